"""Identical pods grouped, so the scheduler packs counts instead of pods one by one.

Why: a Deployment's 1,000 replicas are the same scheduling problem 1,000 times. Pods with the same
namespace, labels, requests and constraints behave identically in every check the scheduler makes, so a
group is placed "k at a time" (k = how many still fit the bin and the topology budgets).

Order (as Karpenter): groups by cpu request, then memory request, descending (big pods first pack
better); ties by the first member's key so results are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from carpool import labels as L
from carpool.requirements import DOES_NOT_EXIST
from carpool.resources import CPU, MEMORY, PODS, Resources
from carpool.scheduling.inputs import PodSpec


@dataclass(slots=True, eq=False)
class PodGroup:
    """Pods that are interchangeable for scheduling. `keys` are the members, in placement order."""

    id: int
    pod: PodSpec
    requests: Resources
    keys: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @property
    def count(self) -> int:
        return len(self.keys)


def normalized_requests(pod: PodSpec) -> Resources:
    """Requests with `pods: 1` (every pod takes a pod slot) and zero entries dropped."""
    req = {k: v for k, v in pod.requests.items() if v > 0}
    if req.get(PODS, 0) < 1:
        req[PODS] = 1
    return req


def _signature(pod: PodSpec, requests: Resources) -> tuple:
    return (
        pod.namespace,
        frozenset(pod.labels.items()),
        frozenset(requests.items()),
        pod.requirements,
        pod.preferred_node_affinity,
        pod.tolerations,
        pod.spread,
        pod.affinity,
        pod.anti_affinity,
        pod.preferred_affinity,
        pod.preferred_anti_affinity,
        pod.host_ports,
    )


def opts_out(pod: PodSpec) -> bool:
    """True when every node-affinity term requires `karpenter.sh/nodepool DoesNotExist`: the pod asks
    to stay off provisioned capacity, so the scheduler leaves it alone."""
    if not pod.requirements:
        return False
    for term in pod.requirements:
        req = term.get(L.NODEPOOL)
        if req is None or req.operator != DOES_NOT_EXIST:
            return False
    return True


def group_pods(pods: Iterable[PodSpec]) -> tuple[list[PodGroup], list[str]]:
    """Group identical pods; returns (groups in scheduling order, keys of pods that opted out)."""
    by_sig: dict[tuple, PodGroup] = {}
    opted_out: list[str] = []
    for pod in pods:
        if opts_out(pod):
            opted_out.append(pod.key)
            continue
        requests = normalized_requests(pod)
        sig = _signature(pod, requests)
        group = by_sig.get(sig)
        if group is None:
            group = by_sig[sig] = PodGroup(len(by_sig), pod, requests)
        group.keys.append(pod.key)
    groups = list(by_sig.values())
    for g in groups:
        g.keys.sort()
    groups.sort(key=lambda g: (-g.requests.get(CPU, 0), -g.requests.get(MEMORY, 0), g.keys[0]))
    for i, g in enumerate(groups):
        g.id = i
    return groups, opted_out
