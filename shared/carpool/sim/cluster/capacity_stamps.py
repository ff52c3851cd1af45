"""When each pod and node of a simulation reached each step on the way to capacity, in simulated seconds.

The simulated cluster writes these where the state changes (the binder marks a pod Unschedulable or binds
it; a kubelet creates a Node; a patch lifts `karpenter.sh/unregistered`), because the objects themselves
forget: a condition's `lastTransitionTime` is rewritten on the next transition, keeps whole seconds only,
and a pod or node that is gone by the end of a run takes its timestamps with it.
`carpool.sim.run.time_to_capacity` reads them at the end of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import labels


@dataclass
class PodStamps:
    """One pod's latest wait: marked Unschedulable at `pending`, bound to `node` at `bound`."""

    pending: float
    bound: float | None = None
    node: str | None = None


@dataclass
class NodeStamps:
    """One Node object: created at `created`; `lifted` once carpool removed the unregistered taint it was
    created with (never set for a node that joined without it, such as a node group's)."""

    created: float
    unregistered: bool
    lifted: float | None = None


@dataclass
class CapacityStamps:
    """Every pod's and node's stamps, by pod key ("namespace/name") and node name."""

    pods: dict[str, PodStamps] = field(default_factory=dict)
    nodes: dict[str, NodeStamps] = field(default_factory=dict)

    def pod_pending(self, key: str, at: float) -> None:
        """The pod was marked Unschedulable: a new wait starts (a pod recreated under the same name, as a
        StatefulSet's is, waits again)."""
        self.pods[key] = PodStamps(at)

    def pod_bound(self, key: str, node: str, at: float) -> None:
        """The pod was bound; only the first binding after it was marked counts (a pod bound without ever
        being marked never waited for capacity)."""
        stamps = self.pods.get(key)
        if stamps is not None and stamps.bound is None:
            stamps.bound, stamps.node = at, node

    def node_created(self, name: str, raw: Mapping[str, Any], at: float) -> None:
        self.nodes[name] = NodeStamps(at, has_unregistered_taint(raw))

    def node_changed(self, name: str, raw: Mapping[str, Any], at: float) -> None:
        """A write to the node: the first one that leaves it without the unregistered taint lifted it."""
        stamps = self.nodes.get(name)
        if stamps is not None and stamps.unregistered and stamps.lifted is None and not has_unregistered_taint(raw):
            stamps.lifted = at


def has_unregistered_taint(raw: Mapping[str, Any]) -> bool:
    taints = (raw.get("spec") or {}).get("taints") or []
    return any(t.get("key") == labels.UNREGISTERED_TAINT for t in taints)
