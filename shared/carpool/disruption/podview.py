"""A pod as disruption sees it: a few hundred bytes instead of a full `Pod` model.

The disruption pass looks at every pod of the cluster once per run (each node's free room, each movable
pod's scheduling shape, budgets and protections), and at 150,000 pods a full `Pod` model per pod (~15 KB of
Python objects) would not fit a 1,024 MB Lambda. A `PodView` keeps only what the pass decides on:
- identity and place: key, uid, node, phase;
- what moving it takes: its scheduling shape (`si.PodSpec`: requests, node affinity, tolerations, spread,
  pod (anti-)affinity, host ports), built once per distinct shape and shared between the pods of a
  workload (their labels, requests and constraints are the same objects);
- what may stop it from moving: its protection (do-not-disrupt and Cluster Autoscaler annotations), its
  eviction cost (priority and pod-deletion-cost), whether it counts as healthy for a PodDisruptionBudget,
  and whether it is a DaemonSet, static or finished pod (none of which move).

Two ways in, with the same result: `from_pod` for a `Pod` model already read, and `Shapes.view` for a pod
projected straight from the API server's JSON (`carpool.adapters.k8s.reads`), where the scheduling shape is
keyed by a faithful text of the fields it is made of, so only the first pod of each shape is converted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from carpool import labels as L
from carpool.api.k8s import TERMINAL_PHASES, Pod, PodDisruptionBudget
from carpool.resources import Resources
from carpool.scheduling import convert
from carpool.scheduling import inputs as si

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
CAS_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
TRUE = "true"


@dataclass(frozen=True, slots=True)
class PodView:
    """One pod, reduced to what consolidation, budgets, PDBs and protections need."""

    key: str
    node: str
    phase: str
    labels: Mapping[str, str]
    requests: Resources
    #: the scheduling shape of a pod that moves when its node goes (None for pods that never move)
    spec: si.PodSpec | None
    daemonset: bool = False
    static: bool = False
    terminating: bool = False
    #: Running, Ready (or no Ready condition reported) and not being deleted: healthy for a PDB
    healthy: bool = False
    #: why this pod keeps its node from voluntary disruption (None: it does not)
    protection: str | None = None
    #: Karpenter's eviction cost of the pod (priority and pod-deletion-cost aware)
    eviction_cost: float = 1.0

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def reschedulable(self) -> bool:
        """Needs a new home if its node goes (not a DaemonSet, static or finished pod)."""
        return not (self.daemonset or self.static or self.terminal)


def protection_of(key: str, annotations: Mapping[str, str]) -> str | None:
    """Why a pod with these annotations keeps its node from voluntary disruption, if it does."""
    if annotations.get(L.DO_NOT_DISRUPT) == TRUE:
        return f"pod {key} has {L.DO_NOT_DISRUPT}"
    if annotations.get(L.CAS_SCALE_DOWN_DISABLED) == TRUE:
        return f"pod {key} has {L.CAS_SCALE_DOWN_DISABLED}"
    if annotations.get(CAS_SAFE_TO_EVICT) == "false":
        return f"pod {key} has {CAS_SAFE_TO_EVICT}: false"
    return None


def eviction_cost(annotations: Mapping[str, str], priority: int | None) -> float:
    """Karpenter's per-pod eviction cost: 1, plus pod-deletion-cost / 2^27, plus priority / 2^25, in
    [-10, 10]. Nodes whose pods are cheap to evict are disrupted first."""
    cost = 1.0
    raw = annotations.get(DELETION_COST, "")
    if raw.lstrip("-").isdigit():  # the API server only admits int32 values
        cost += int(raw) / 2**27
    if priority:
        cost += priority / 2**25
    return max(-10.0, min(10.0, cost))


def pdb_selects(pdb: PodDisruptionBudget, pod: PodView) -> bool:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one selects none."""
    selector = pdb.spec.selector
    return selector is not None and pod.namespace == pdb.namespace and selector.matches(pod.labels)


def _healthy(phase: str, terminating: bool, ready: str | None) -> bool:
    return phase == "Running" and not terminating and ready in (None, "True")


def from_pod(pod: Pod) -> PodView:
    """The view of a `Pod` model (what the simulated cluster and tests hold)."""
    ann = pod.annotations
    ready = pod.condition("Ready")
    phase = pod.status.phase or ""
    view = PodView(
        key=pod.key, node=pod.spec.node_name or "", phase=phase, labels=pod.labels, requests=pod.requests(),
        spec=None, daemonset=pod.is_daemonset_pod(), static=pod.is_static_pod(),
        terminating=pod.is_terminating(), healthy=_healthy(phase, pod.is_terminating(), ready.status if ready is not None else None),
        protection=protection_of(pod.key, ann), eviction_cost=eviction_cost(ann, pod.spec.priority))
    return replace(view, spec=convert.pod_spec(pod)) if view.reschedulable else view


def bound(view: PodView, node: str) -> PodView:
    """The view of a pod that was not finished, once bound to `node` and started (Running, Ready): a
    binding sets the pod's node and status only, so its shape, protection and cost stay what they were."""
    if view.terminal:
        raise ValueError(f"pod {view.key} has finished: a binding does not start it again")
    return replace(view, node=node, phase="Running", healthy=_healthy("Running", view.terminating, "True"))


@dataclass(frozen=True, slots=True)
class Owner:
    kind: str
    name: str
    controller: bool


class Shapes:
    """Scheduling shapes already built in one read, by a faithful text of the fields they are made of.

    Pods of one workload share their namespace, labels, owner and pod template, so a read of 150,000 pods
    converts a few hundred shapes; each pod keeps its own key and uid on a copy of the shared `PodSpec`
    (whose labels, requests and constraint tuples are the shared objects).
    """

    def __init__(self) -> None:
        self._by_json: dict[str, tuple[si.PodSpec, Resources]] = {}

    def __len__(self) -> int:
        return len(self._by_json)

    def view(self, *, key: str, uid: str, node: str, phase: str, annotations: Mapping[str, str],
             owners: Sequence[Owner], priority: int | None, terminating: bool, ready: str | None,
             shape: str, make_pod: Callable[[], Pod]) -> PodView:
        """The view of one projected pod. `shape` is a faithful text of everything its scheduling shape is
        made of (namespace, labels, controller, containers' resources and ports, init containers,
        overhead, node selector, affinity, tolerations, topology spread): equal texts, equal shapes;
        `make_pod` builds a `Pod` of those fields when the shape is new."""
        known = self._by_json.get(shape)
        if known is None:
            pod = make_pod()
            known = self._by_json[shape] = (convert.pod_spec(pod), pod.requests())
        template, requests = known
        daemonset = any(o.kind == "DaemonSet" for o in owners)
        static = any(o.kind == "Node" for o in owners)
        moves = not (daemonset or static or phase in TERMINAL_PHASES)
        return PodView(
            key=key, node=node, phase=phase, labels=template.labels, requests=requests,
            spec=_copy_for(template, key, uid or key) if moves else None,
            daemonset=daemonset, static=static, terminating=terminating,
            healthy=_healthy(phase, terminating, ready), protection=protection_of(key, annotations),
            eviction_cost=eviction_cost(annotations, priority))


def _copy_for(t: si.PodSpec, key: str, uid: str) -> si.PodSpec:
    """The shared shape with one pod's key and uid (every other field is the shared object; spelled out
    because `dataclasses.replace` costs several times as much, once per pod of the cluster)."""
    return si.PodSpec(key, t.requests, t.labels, t.namespace, uid, t.requirements, t.preferred_node_affinity,
                      t.tolerations, t.spread, t.affinity, t.anti_affinity, t.preferred_affinity,
                      t.preferred_anti_affinity, t.host_ports, t.owner)
