"""Cluster Autoscaler coexistence: who should serve a pending pod, carpool or a node group?

Both autoscalers react to the same Unschedulable pod (reference.md section 8) unless pods are split. The
split carpool understands is the one people already write for managed node groups: a `nodeSelector` or a
required node affinity on a node-group label. Such a pod is Cluster Autoscaler's (`node-group`); carpool
never launches for it. A pod some NodePool could serve is `carpool`'s; anything else is `nobody`'s, with
the reason, so a pod is never silently ignored.

Node-group label keys: `eks.amazonaws.com/nodegroup` (EKS managed node groups),
`alpha.eksctl.io/nodegroup-name` (eksctl), `eks.amazonaws.com/capacityType` (a label only managed node
group nodes carry), plus any keys listed (comma-separated) in the NodePool annotation
`carpool.dev/node-group-label-keys`, for self-managed groups labelled your own way. A pod is pinned when
every alternative of its node constraints requires one of those keys to exist or have a value (`In`,
`Exists`, `Gt`...); `NotIn`/`DoesNotExist` on them is how a pod says "not a node group", which makes it
carpool's. The explicit key list wins over NodePools that could also produce the label.

Pods for another scheduler (`schedulerName`, e.g. Fargate's `fargate-scheduler`) are `nobody`'s and left
alone: carpool's nodes would not be used by that scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from carpool import labels
from carpool.api.k8s import Pod
from carpool.api.nodepool import NodePool
from carpool.requirements import Requirements
from carpool.taints import untolerated

EKSCTL_NODEGROUP = "alpha.eksctl.io/nodegroup-name"
EKS_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"
NODE_GROUP_KEYS = (labels.EKS_NODEGROUP, EKSCTL_NODEGROUP, EKS_CAPACITY_TYPE)
KEYS_ANNOTATION = "carpool.dev/node-group-label-keys"
DEFAULT_SCHEDULER = "default-scheduler"


class Server(StrEnum):
    CARPOOL = "carpool"
    NODE_GROUP = "node-group"
    NOBODY = "nobody"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Who serves a pod and why. `leave_alone`: the provisioner must not launch for it."""

    server: Server
    reason: str
    leave_alone: bool = False


@dataclass
class Coexistence:
    """The classifier for one configuration (NodePools + node-group label keys)."""

    nodepools: Sequence[NodePool] = ()
    extra_keys: Iterable[str] = ()
    keys: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        found = set(NODE_GROUP_KEYS) | {k.strip() for k in self.extra_keys if k.strip()}
        for pool in self.nodepools:
            raw = (pool.metadata.annotations or {}).get(KEYS_ANNOTATION, "")
            found |= {k.strip() for k in raw.split(",") if k.strip()}
        self.keys = frozenset(found)
        self._pools = [(p.name, p.requirements(), p.taints()) for p in sorted(self.nodepools, key=lambda p: p.name)]

    def serves(self, pod: Pod) -> Verdict:
        scheduler = pod.spec.scheduler_name
        if scheduler and scheduler != DEFAULT_SCHEDULER:
            return Verdict(Server.NOBODY, f"scheduled by {scheduler}, not the default scheduler", leave_alone=True)
        terms = node_terms(pod)
        pinned = [self._pinned_key(t) for t in terms]
        if terms and all(pinned):
            return Verdict(Server.NODE_GROUP, f"requires node-group label {pinned[0]}", leave_alone=True)
        return self._pool_verdict(pod, terms)

    def _pinned_key(self, term: Requirements) -> str | None:
        for key in sorted(self.keys & set(term)):
            if not term[key].allows_absent():
                return key
        return None

    def _pool_verdict(self, pod: Pod, terms: list[Requirements]) -> Verdict:
        if any(labels.NODEPOOL in t and t[labels.NODEPOOL].operator == "DoesNotExist" for t in terms):
            return Verdict(Server.NOBODY, f"opted out of carpool ({labels.NODEPOOL} DoesNotExist)")
        if not self._pools:
            return Verdict(Server.NOBODY, "no NodePool is configured")
        why: dict[str, str] = {}
        tolerations = pod.tolerations()
        for name, reqs, taints in self._pools:
            taint = untolerated(taints, tolerations)
            if taint is not None:
                why[name] = f"does not tolerate taint {taint}"
                continue
            problems = [reqs.compatible(t, labels.WELL_KNOWN) for t in (terms or [Requirements()])]
            if any(p is None for p in problems):
                return Verdict(Server.CARPOOL, f"NodePool {name} can serve it")
            why[name] = str(problems[0])
        return Verdict(Server.NOBODY, "no NodePool can serve it: " + "; ".join(f"{k}: {v}" for k, v in why.items()))


def node_terms(pod: Pod) -> list[Requirements]:
    """The pod's node constraints as ORed requirement sets (each required-affinity term + nodeSelector)."""
    base = Requirements.from_labels(pod.spec.node_selector or {})
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required if affinity else []
    if not required:
        return [base] if len(base) else []
    return [base.merge(t.requirements()) for t in required]


def serves(pod: Pod, nodepools: Sequence[NodePool] = (), extra_keys: Iterable[str] = ()) -> Verdict:
    """One-off classification (build a `Coexistence` once to classify many pods)."""
    return Coexistence(nodepools, extra_keys).serves(pod)
