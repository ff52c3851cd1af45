"""The scheduler's own input types: small, frozen, and free of pydantic.

Why its own types: the scheduler is the hot path and must not depend on the shape of the API models (which
carry every Kubernetes field) nor on the catalog or sizing modules. `convert.py` builds these from
`carpool.api` objects; tests and benchmarks build them directly.

Conventions (same as `carpool.resources`): cpu in millicores, memory in bytes, `pods` as a count.
A pod's node-affinity is a tuple of alternative `Requirements` (the terms of
`requiredDuringSchedulingIgnoredDuringExecution`, each already merged with `nodeSelector`): the pod fits a
node when *any* term does. An empty tuple means "no node constraint".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from carpool.requirements import Requirements
from carpool.resources import Resources
from carpool.taints import Taint, Toleration

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SplitBy = Literal["nodes", "cpu"]

_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class SelectorExpression:
    """One `matchExpressions` entry of a Kubernetes LabelSelector (In/NotIn/Exists/DoesNotExist)."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.operator not in _SELECTOR_OPS:
            raise ValueError(f"label selector {self.key}: unknown operator {self.operator!r}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A pod label selector; hashable so topology groups sharing one selector are tracked once.

    An empty selector matches every pod (Kubernetes semantics). A *missing* selector (None on the owning
    term) matches nothing; `NOTHING` stands for it.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[SelectorExpression, ...] = ()
    nothing: bool = False

    @classmethod
    def of(
        cls,
        match_labels: Mapping[str, str] | None = None,
        expressions: Iterable[tuple[str, str, Iterable[str]]] = (),
    ) -> LabelSelector:
        exprs = tuple(SelectorExpression(k, op, frozenset(vals)) for k, op, vals in expressions)
        return cls(tuple(sorted((match_labels or {}).items())), exprs)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(e.matches(labels) for e in self.expressions)

    def query(self) -> str | None:
        """The selector in the API's `labelSelector` syntax (`app=web,tier in (a,b),!gpu`; "" selects
        every pod), or None when it selects nothing (missing, or `In` no value): nothing to list."""
        if self.nothing or any(e.operator == "In" and not e.values for e in self.expressions):
            return None
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for e in self.expressions:
            if e.operator in ("In", "NotIn") and e.values:
                parts.append(f"{e.key} {e.operator.lower()} ({','.join(sorted(e.values))})")
            elif e.operator in ("Exists", "DoesNotExist"):
                parts.append(e.key if e.operator == "Exists" else f"!{e.key}")
        return ",".join(parts)

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        parts = [f"{k}={v}" for k, v in self.match_labels]
        parts += [f"{e.key} {e.operator} {sorted(e.values)}" if e.values else f"{e.key} {e.operator}" for e in self.expressions]
        return ",".join(parts) or "<all>"


NOTHING = LabelSelector(nothing=True)


@dataclass(frozen=True, slots=True)
class TopologySpread:
    """A `topologySpreadConstraints` entry. `min_domains` None = unset.

    `honor_node_affinity` (`nodeAffinityPolicy`, default Honor) and `honor_node_taints`
    (`nodeTaintsPolicy`, default Ignore): whether nodes the pod's node affinity does not select, or whose
    taints it does not tolerate, are left out of the spread's domains and counts."""

    topology_key: str
    max_skew: int = 1
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    selector: LabelSelector = NOTHING
    min_domains: int | None = None
    honor_node_affinity: bool = True
    honor_node_taints: bool = False

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term. `namespaces` None = the pod's own namespace; `all_namespaces` is the
    empty `namespaceSelector: {}` (every namespace)."""

    topology_key: str
    selector: LabelSelector = NOTHING
    namespaces: frozenset[str] | None = None
    all_namespaces: bool = False


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    """A preferred pod (anti-)affinity term with its weight (1..100)."""

    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    """A preferred node-affinity term with its weight (1..100)."""

    weight: int
    requirements: Requirements


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the host; two pods conflict on the same port/protocol/overlapping IP."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wild = ("", "0.0.0.0", "::")
        return self.host_ip in wild or other.host_ip in wild or self.host_ip == other.host_ip


@dataclass(frozen=True, slots=True)
class PodSpec:
    """What the scheduler needs to know about one pod.

    `requests` should include `pods: 1` (added when missing). `key` is "namespace/name"; `namespace` is
    derived from it when left empty. `owner` (e.g. "ReplicaSet/web-abc") is only a grouping hint.
    """

    key: str
    requests: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = ""
    uid: str = ""
    requirements: tuple[Requirements, ...] = ()
    preferred_node_affinity: tuple[PreferredNodeTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    spread: tuple[TopologySpread, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    owner: str | None = None

    def __post_init__(self) -> None:
        if not self.namespace:
            object.__setattr__(self, "namespace", self.key.split("/", 1)[0] if "/" in self.key else "default")
        if not self.uid:
            object.__setattr__(self, "uid", self.key)


@dataclass(frozen=True, slots=True)
class Offering:
    """One way to buy an instance type (zone x capacity type) at an hourly price."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True


@dataclass(frozen=True, slots=True)
class InstanceOption:
    """An instance type as one NodePool sees it.

    `allocatable` is already net of kube-reserved, system-reserved and eviction thresholds (what pods can
    use). `capacity` is what NodePool limits count (Karpenter counts capacity); it defaults to allocatable.
    `requirements` are the type's labels as single-valued `In` (zone/capacity-type keys are ignored here:
    offerings are the source of truth for those).
    """

    name: str
    requirements: Requirements
    allocatable: Resources
    offerings: tuple[Offering, ...]
    capacity: Resources | None = None

    @property
    def limit_capacity(self) -> Resources:
        return self.capacity if self.capacity is not None else self.allocatable


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A NodePool reduced to what scheduling needs.

    `requirements` should include `karpenter.sh/nodepool In [name]` and the template labels (added when
    missing). `usage` is what the pool already holds (existing nodes and in-flight claims: cpu, memory,
    `nodes`), counted against `limits`. `daemon_overhead` is added to the DaemonSet pods that `schedule`
    works out per pool from its `daemonsets` argument.
    `ordered_keys` (annotation `carpool.dev/ordered-requirements`) turn the pool's values for those keys
    into a preference order; `split_share` (annotation `carpool.dev/split`) and `split_by`
    (`carpool.dev/split-by`) share new claims among pools of equal weight.
    """

    name: str
    instance_types: Sequence[InstanceOption]
    weight: int = 0
    requirements: Requirements = field(default_factory=Requirements)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Resources | None = None
    usage: Resources = field(default_factory=dict)
    daemon_overhead: Resources = field(default_factory=dict)
    ordered_keys: tuple[str, ...] = ()
    split_share: float | None = None
    split_by: SplitBy = "nodes"
    #: why the pool cannot launch (its EC2NodeClass is not ready), None when it can: such a pool has no
    #: instance types and this is its reason for a pod it would otherwise take (`explain`)
    not_ready: str | None = None


@dataclass(frozen=True, slots=True)
class InFlightClaim:
    """A claim already launched but whose node has not registered yet.

    `labels` are the labels the node will carry (nodepool, zone, capacity type, instance type, template
    labels); `remaining` is the allocatable still free after DaemonSets and the pods already nominated
    (`pods`, which also count for topology).
    """

    name: str
    pool: str
    labels: Mapping[str, str]
    remaining: Resources
    taints: tuple[Taint, ...] = ()
    pods: tuple[PodSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class ExistingNode:
    """A registered node. `remaining` is its free allocatable (may be empty for full nodes, which still
    matter: their `pods` count for topology spread and (anti-)affinity)."""

    name: str
    labels: Mapping[str, str]
    remaining: Resources
    taints: tuple[Taint, ...] = ()
    pods: tuple[PodSpec, ...] = ()
    pool: str | None = None


