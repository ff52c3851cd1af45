"""Which pods leave an interrupted node now, and which wait: the eviction rules of a spot notice.

EC2 reclaims a spot instance two minutes after its warning. The node is cordoned and its replacement
launched at once; its pods are then moved in steps, each step re-run every few seconds until the node is
empty or gone:

- **The deadline.** Once the reclaim is `MARGIN` away, everything left is evicted (PodDisruptionBudgets
  are still enforced by the API server): `MARGIN` is the default `terminationGracePeriodSeconds`, so
  evicted pods still get their full graceful shutdown before the instance disappears. do-not-disrupt
  pods are evicted then too: the node goes whatever they say, and a graceful eviction beats a power cut.
- **A PodDisruptionBudget covers the pod.** Eviction is asked for; the API server allows it or answers
  429, and the next step asks again. This is how Karpenter's terminator and `kubectl drain` treat PDBs.
- **No PDB, the pod has a controller.** Kubernetes would let `kubectl drain` (and Karpenter) evict every
  replica at once. Here at most ceil(25%) of the controller's pods may be unavailable at a time (the
  Deployment controller's own default `maxUnavailable` for a rolling update): a controller whose
  replicas all sit on the node keeps three quarters of them serving while the others move.
- **Bare pods** (nothing recreates them) wait for the replacement to be Ready, then go.
- **do-not-disrupt pods** wait for the deadline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from carpool.api.k8s import Pod, PodDisruptionBudget
from carpool.disruption.protection import pod_protection

#: EC2's spot interruption notice: the instance is reclaimed this long after the warning.
NOTICE = timedelta(seconds=120)
#: Evict everything once the reclaim is this close (Kubernetes' default terminationGracePeriodSeconds).
MARGIN = timedelta(seconds=30)
#: Share of a controller's pods that may be unavailable at a time when no PDB speaks for them.
IMPLICIT_MAX_UNAVAILABLE = 0.25
#: How often a drain in progress is looked at again (blocked evictions retried, the replacement checked).
RETRY_EVERY = timedelta(seconds=5)
#: Controllers that recreate their pods elsewhere.
CONTROLLERS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job", "ReplicationController"})


@dataclass
class Step:
    """One look at the node: the pods to evict now and why the others wait."""

    evict: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    #: the rule that applied: "deadline" or "budgeted"
    phase: str = "budgeted"

    def describe(self) -> str:
        waits = "; ".join(f"{k}: {v}" for k, v in sorted(self.waiting.items()))
        return (f"{self.phase}: evicting {len(self.evict)} pods" + (f", {len(self.waiting)} wait ({waits})"
                                                                    if self.waiting else ""))


def reclaim_at(warned_at: datetime) -> datetime:
    return warned_at + NOTICE


def deadline_near(now: datetime, warned_at: datetime) -> bool:
    return now >= reclaim_at(warned_at) - MARGIN


def controller_of(pod: Pod) -> str | None:
    """namespace/Kind/name of the controller that recreates the pod, None for a bare pod."""
    for ref in pod.metadata.owner_references:
        if ref.kind in CONTROLLERS:
            return f"{pod.namespace}/{ref.kind}/{ref.name}"
    return None


def available(pod: Pod) -> bool:
    """Bound, running, Ready and not being deleted: serving."""
    ready = pod.condition("Ready")
    return (bool(pod.spec.node_name) and pod.status.phase == "Running" and not pod.is_terminating()
            and (ready is None or ready.status == "True"))


def implicit_allowance(pods: Sequence[Pod]) -> int:
    """How many more of one controller's `pods` may become unavailable now (at least one may ever be)."""
    limit = max(1, math.ceil(len(pods) * IMPLICIT_MAX_UNAVAILABLE))
    return max(0, limit - sum(1 for p in pods if not available(p)))


def plan(on_node: Sequence[Pod], everywhere: Iterable[Pod], pdbs: Sequence[PodDisruptionBudget],
         replacement_ready: bool, now: datetime, warned_at: datetime) -> Step:
    """The eviction step for the pods `on_node` (see the module docstring for the rules)."""
    if deadline_near(now, warned_at):
        return Step(evict=sorted(p.key for p in on_node), phase="deadline")
    step = Step()
    by_controller: dict[str, list[Pod]] = {}
    for pod in everywhere:
        owner = controller_of(pod)
        if owner is not None:
            by_controller.setdefault(owner, []).append(pod)
    left = {owner: implicit_allowance(pods) for owner, pods in by_controller.items()}
    for pod in sorted(on_node, key=lambda p: p.key):
        why = _why_wait(pod, pdbs, replacement_ready, left)
        if why:
            step.waiting[pod.key] = why
        else:
            step.evict.append(pod.key)
    return step


def _why_wait(pod: Pod, pdbs: Sequence[PodDisruptionBudget], replacement_ready: bool, left: dict[str, int]) -> str:
    protection = pod_protection(pod)
    if protection:
        return f"{protection}; evicted when the reclaim is {MARGIN.seconds} s away"
    if any(pdb.matches(pod) for pdb in pdbs):
        return ""  # the API server applies the budget
    owner = controller_of(pod)
    if owner is None:
        return "" if replacement_ready else "a bare pod (nothing recreates it): waits for the replacement"
    if left.get(owner, 0) <= 0:
        pct = int(IMPLICIT_MAX_UNAVAILABLE * 100)
        return f"{owner} has {pct}% of its pods unavailable already (no PodDisruptionBudget)"
    left[owner] -= 1
    return ""
