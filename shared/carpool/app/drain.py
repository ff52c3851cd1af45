"""Cordon and drain a node carpool owns, the way `kubectl drain` would but within a deadline.

Evictions go through the Eviction API, so PodDisruptionBudgets are enforced by the API server itself;
pods marked `karpenter.sh/do-not-disrupt` (or Cluster Autoscaler's scale-down-disabled) are skipped for
voluntary disruption. DaemonSet pods are left: they die with the node.

A node that is already gone (deleted by its kubelet, the cloud controller or another controller while
carpool was at it) has nothing left to cordon or drain: `cordon` says so instead of raising, and `drain`
of it evicts nothing, so callers go on to what follows (releasing the claim, deleting the instance).

With a deadline (the NodePool's `terminationGracePeriod`, `carpool.disruption.deadline`), a pod whose
own grace period would end past it is deleted instead of evicted, PodDisruptionBudgets and
do-not-disrupt notwithstanding, with the grace that remains: the node is empty by the deadline.

One pod never fails the drain: a pod whose eviction the API server refuses (a PodDisruptionBudget
without a disruption left answers 429; a pod selected by more than one budget answers 500, "This pod has
more than one PodDisruptionBudget, which the eviction subresource does not support.") is reported in
`DrainResult.blocked` with the server's reason, and the node's other pods are still evicted.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from carpool import labels
from carpool.api.k8s import Pod
from carpool.disruption import deadline as termination
from carpool.disruption.protection import pod_protection
from carpool.ports import Cluster, EvictionBlocked, NodeGone, NodePatch
from carpool.taints import NO_SCHEDULE, Taint

log = logging.getLogger(__name__)
DISRUPTED = Taint(labels.DISRUPTED_TAINT, NO_SCHEDULE)


MULTIPLE_BUDGETS = "more than one PodDisruptionBudget"


@dataclass
class DrainResult:
    evicted: list[str] = field(default_factory=list)
    #: pods deleted at the node's termination deadline (budgets and do-not-disrupt bypassed)
    deleted: list[str] = field(default_factory=list)
    #: pod key -> why it is still on the node (protected, or its eviction refused, with the API's reason)
    blocked: dict[str, str] = field(default_factory=dict)


def pods_on(cluster: Cluster, node_name: str) -> list[Pod]:
    """Pods a node runs that need a new home if it goes (not DaemonSet, static or finished pods)."""
    return [p for p in cluster.pods_on_node(node_name) if p.spec.node_name == node_name and _needs_home(p)]


def serving(pods: Iterable[Pod]) -> dict[str, int]:
    """Node name -> how many pods it runs that would need a new home (what `pods_on` counts), from one
    listing of every pod."""
    return dict(Counter(p.spec.node_name for p in pods if p.spec.node_name and _needs_home(p)))


def _needs_home(pod: Pod) -> bool:
    return not pod.is_daemonset_pod() and not pod.is_static_pod() and not pod.is_terminal()


def protected(pod: Pod) -> str | None:
    """Why a pod blocks voluntary disruption, if it does (one rule, shared with the disruption planner)."""
    return pod_protection(pod)


def cordon(cluster: Cluster, node_name: str) -> bool:
    """Cordon the node and taint it `karpenter.sh/disrupted:NoSchedule`. False when the node is gone
    (404 at either write): there is nothing to cordon, and the caller goes on as if it had been."""
    try:
        cluster.cordon(node_name)
        cluster.taint(node_name, DISRUPTED)
    except NodeGone:
        log.info("node %s is gone: nothing to cordon", node_name)
        return False
    return True


def restore(cluster: Cluster, node_name: str) -> bool:
    """Undo `cordon`: remove the `karpenter.sh/disrupted` taint and mark the node schedulable again (a
    disruption abandoned: Karpenter removes its taint and keeps the node). False when the node is gone."""
    try:
        cluster.patch_node(node_name, NodePatch(remove_taint_keys=frozenset({DISRUPTED.key})))
        cluster.uncordon(node_name)
    except NodeGone:
        log.info("node %s is gone: nothing to restore", node_name)
        return False
    return True


def drain(cluster: Cluster, node_name: str, voluntary: bool, deadline: datetime | None = None,
          now: datetime | None = None, lead: timedelta = timedelta(0)) -> DrainResult:
    """Evict every movable pod. `voluntary` drains skip do-not-disrupt pods; a node that is already
    stopping (`voluntary=False`) takes them with it anyway, so they are evicted too. With a `deadline`
    (and the caller's `now`), pods that could no longer end by it if deleted at the next step (`lead`
    from now) are deleted instead."""
    result = DrainResult()
    for pod in pods_on(cluster, node_name):
        if deadline is not None and now is not None and termination.must_delete(pod, deadline, now, lead):
            grace = termination.delete_grace_seconds(deadline, now)
            log.info("deleting pod %s of node %s with %d s grace: the node's terminationGracePeriod ends at %s",
                     pod.key, node_name, grace, deadline.isoformat())
            cluster.delete_pod(pod.key, grace)
            result.deleted.append(pod.key)
            continue
        reason = protected(pod) if voluntary else None
        if reason:
            result.blocked[pod.key] = reason
            continue
        try:
            cluster.evict(pod.key)
            result.evicted.append(pod.key)
        except EvictionBlocked as exc:
            result.blocked[pod.key] = _blocked_reason(exc)
    if result.blocked:
        log.info("drain of %s left %d pods: %s", node_name, len(result.blocked), result.blocked)
    return result


def _blocked_reason(exc: EvictionBlocked) -> str:
    """Why a refused eviction left its pod: several budgets selecting one pod is a configuration fault
    that no retry fixes until a budget is removed, so it says so; a budget out of disruptions clears
    when other pods become healthy again."""
    if MULTIPLE_BUDGETS in str(exc):
        return f"PodDisruptionBudget: the pod is selected by several budgets, so the API refuses every eviction of it: {exc}"
    return f"PodDisruptionBudget: {exc}"
