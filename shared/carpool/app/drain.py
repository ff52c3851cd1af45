"""Cordon and drain a node carpool owns, the way `kubectl drain` would but within a deadline.

Evictions go through the Eviction API, so PodDisruptionBudgets are enforced by the API server itself;
pods marked `karpenter.sh/do-not-disrupt` (or Cluster Autoscaler's scale-down-disabled) are skipped for
voluntary disruption. DaemonSet pods are left: they die with the node.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from carpool import labels
from carpool.api.k8s import Pod
from carpool.disruption.protection import pod_protection
from carpool.ports import Cluster, EvictionBlocked
from carpool.taints import NO_SCHEDULE, Taint

log = logging.getLogger(__name__)
DISRUPTED = Taint(labels.DISRUPTED_TAINT, NO_SCHEDULE)


@dataclass
class DrainResult:
    evicted: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)


def pods_on(cluster: Cluster, node_name: str) -> list[Pod]:
    """Pods a node runs that need a new home if it goes (not DaemonSet, static or finished pods)."""
    return [p for p in cluster.list_pods() if p.spec.node_name == node_name and _needs_home(p)]


def serving(pods: Iterable[Pod]) -> dict[str, int]:
    """Node name -> how many pods it runs that would need a new home (what `pods_on` counts), from one
    listing of every pod."""
    return dict(Counter(p.spec.node_name for p in pods if p.spec.node_name and _needs_home(p)))


def _needs_home(pod: Pod) -> bool:
    return not pod.is_daemonset_pod() and not pod.is_static_pod() and not pod.is_terminal()


def protected(pod: Pod) -> str | None:
    """Why a pod blocks voluntary disruption, if it does (one rule, shared with the disruption planner)."""
    return pod_protection(pod)


def cordon(cluster: Cluster, node_name: str) -> None:
    cluster.cordon(node_name)
    cluster.taint(node_name, DISRUPTED)


def drain(cluster: Cluster, node_name: str, voluntary: bool) -> DrainResult:
    """Evict every movable pod. `voluntary` drains skip do-not-disrupt pods; a node that is already
    stopping (`voluntary=False`) takes them with it anyway, so they are evicted too."""
    result = DrainResult()
    for pod in pods_on(cluster, node_name):
        reason = protected(pod) if voluntary else None
        if reason:
            result.blocked[pod.key] = reason
            continue
        try:
            cluster.evict(pod.key)
            result.evicted.append(pod.key)
        except EvictionBlocked as exc:
            result.blocked[pod.key] = f"PodDisruptionBudget: {exc}"
    if result.blocked:
        log.info("drain of %s left %d pods: %s", node_name, len(result.blocked), result.blocked)
    return result
