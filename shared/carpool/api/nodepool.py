"""Karpenter v1 `NodePool` (`karpenter.sh/v1`), loaded from users' YAML unchanged.

The schema, defaults and validation rules follow Karpenter's v1 CRD so that YAML the API server accepts
loads here and YAML it rejects is rejected here with the same reason. One deliberate difference: glob
values (`c7*`, `*`) in `In`/`NotIn` requirements are accepted (a documented carpool extension).
Defaults: `weight` unset (treated as 0), `disruption` {WhenEmptyOrUnderutilized, consolidateAfter 0s,
budgets [{nodes: 10%}]}, `template.spec.expireAfter` 720h.

Capacity type `reserved`: Karpenter launches it only into the capacity reservations an EC2NodeClass
selects, and carpool refuses those (`carpool.api.nodeclass`), so carpool has no reserved offering, as
Karpenter has none without them. Listed beside `spot` or `on-demand` it is honoured as Karpenter honours it
then: the pool launches the other types. A pool that allows `reserved` alone (a requirement `In` only it,
or the label set to it) is refused: it is meant for reservations and would quietly launch nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from carpool import labels as wk
from carpool import quantity, resources
from carpool import taints as domain
from carpool.api.base import CrdModel
from carpool.api.durations import Duration, NillableDuration, parse_duration
from carpool.api.fields import Quantity, check_label_key, check_label_value, scaled_int_or_percent
from carpool.api.meta import CrdObjectMeta
from carpool.api.selectors import NodeSelectorRequirement
from carpool.api.taints import StrictTaint
from carpool.requirements import Requirement, Requirements
from carpool.resources import Resources

__all__ = [
    "API_VERSION",
    "Budget",
    "Disruption",
    "NodeClaimTemplate",
    "NodeClaimTemplateSpec",
    "NodeClassReference",
    "NodePool",
    "NodePoolRequirement",
    "NodePoolSpec",
    "TemplateMetadata",
    "restricted_label_problem",
]

API_VERSION: Final = "karpenter.sh/v1"
KIND: Final = "NodePool"
DEFAULT_EXPIRE_AFTER = "720h"
DEFAULT_CONSOLIDATE_AFTER = "0s"
DEFAULT_BUDGET_NODES = "10%"
#: the limit on the number of nodes, which is no instance type's resource
NODES_LIMIT: Final = "nodes"

# Karpenter's label-domain rules (the CRD's x-kubernetes-validations on labels and requirement keys).
_KUBERNETES_IO_ALLOWED = frozenset(
    {
        "beta.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/windows-build",
    }
)
_KARPENTER_SH_ALLOWED = frozenset({wk.CAPACITY_TYPE, wk.NODEPOOL})
_BUDGET_NODES = r"^((100|[0-9]{1,2})%|[0-9]+)$"
_BUDGET_DURATION = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
_CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})


def restricted_label_problem(key: str) -> str | None:
    """Why a NodePool may not set or require label `key` (Karpenter's restricted keys/domains), or None.

    Karpenter owns `karpenter.sh/nodepool` (it sets it) and the node's hostname is unknown before launch;
    the kubernetes.io, k8s.io and karpenter.sh domains are reserved except for their well-known keys.
    """
    problem = check_label_key(key)
    if problem:
        return problem
    if key == wk.NODEPOOL:
        return f'label "{wk.NODEPOOL}" is restricted (Karpenter sets it to the NodePool name)'
    if key == wk.HOSTNAME:
        return f'label "{wk.HOSTNAME}" is restricted (a node\'s hostname is unknown before launch)'
    domain_part = key.split("/", 1)[0]
    if domain_part.endswith("kubernetes.io") and not (
        key in _KUBERNETES_IO_ALLOWED
        or domain_part.endswith("node.kubernetes.io")
        or domain_part.endswith("node-restriction.kubernetes.io")
    ):
        return f'label domain "kubernetes.io" is restricted ({key!r})'
    if domain_part.endswith("k8s.io") and not domain_part.endswith("kops.k8s.io"):
        return f'label domain "k8s.io" is restricted ({key!r})'
    if domain_part.endswith("karpenter.sh") and key not in _KARPENTER_SH_ALLOWED:
        return f'label domain "karpenter.sh" is restricted ({key!r})'
    return None


#: why a pool that allows only capacity type `reserved` is refused (see the module docstring)
RESERVED_REFUSED: Final = (
    f'capacity type "{wk.CAPACITY_RESERVED}" is not supported by carpool (it launches into capacity '
    "reservations, which carpool refuses); use spot and/or on-demand"
)


class NodePoolRequirement(NodeSelectorRequirement):
    """A `template.spec.requirements` entry (Karpenter's NodeSelectorRequirementWithMinValues)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _no_reserved_capacity(self) -> NodePoolRequirement:
        if self.key == wk.CAPACITY_TYPE and self.operator == "In" and set(self.values) == {wk.CAPACITY_RESERVED}:
            raise ValueError(RESERVED_REFUSED)
        return self

    @field_validator("key")
    @classmethod
    def _not_restricted(cls, key: str) -> str:
        problem = restricted_label_problem(key)
        if problem:
            raise ValueError(problem)
        return key


class NodeClassReference(CrdModel):
    """Which node class the pool launches with; carpool supports `karpenter.k8s.aws/EC2NodeClass`."""

    group: str = Field(min_length=1, pattern=r"^[^/]*$")
    kind: str = Field(min_length=1, pattern=r"^[^/]*$")
    name: str = Field(min_length=1)


class TemplateMetadata(CrdModel):
    """Labels and annotations every node of the pool gets."""

    labels: dict[str, str] = Field(default_factory=dict, max_length=100)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _valid_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            problem = restricted_label_problem(key) or check_label_value(value)
            if key == wk.CAPACITY_TYPE and value == wk.CAPACITY_RESERVED:
                problem = RESERVED_REFUSED
            if problem:
                raise ValueError(problem)
        return labels


class NodeClaimTemplateSpec(CrdModel):
    node_class_ref: NodeClassReference
    taints: list[StrictTaint] = Field(default_factory=list)
    startup_taints: list[StrictTaint] = Field(default_factory=list)
    requirements: list[NodePoolRequirement] = Field(max_length=100)
    expire_after: NillableDuration = DEFAULT_EXPIRE_AFTER
    termination_grace_period: Duration | None = None


class NodeClaimTemplate(CrdModel):
    metadata: TemplateMetadata = Field(default_factory=TemplateMetadata)
    spec: NodeClaimTemplateSpec


class Budget(CrdModel):
    """How many nodes disruption may take down at once, optionally only during a cron window."""

    nodes: str = Field(default=DEFAULT_BUDGET_NODES, pattern=_BUDGET_NODES)
    schedule: str | None = None
    duration: str | None = Field(default=None, pattern=_BUDGET_DURATION)
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = None

    @field_validator("nodes", mode="before")
    @classmethod
    def _int_nodes(cls, value: object) -> object:
        """Accept `nodes: 5` as YAML writes it; Karpenter's field is a string ("5" or "10%")."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None and value not in _CRON_MACROS and len(value.split()) != 5:
            raise ValueError(
                f"invalid schedule {value!r}: expected a 5-field cron expression or a macro such as @daily"
            )
        return value

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("'schedule' must be set with 'duration'")
        return self

    def max_disruptions(self, total_nodes: int) -> int:
        """The node count this budget allows out of `total_nodes` (percentages round up, as Karpenter)."""
        return scaled_int_or_percent(self.nodes, total_nodes, round_up=True)


class Disruption(CrdModel):
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = "WhenEmptyOrUnderutilized"
    consolidate_after: NillableDuration = DEFAULT_CONSOLIDATE_AFTER
    budgets: list[Budget] = Field(default_factory=lambda: [Budget(nodes=DEFAULT_BUDGET_NODES)], max_length=50)


def _not_negative(value: str) -> str:
    """A limit below zero can never be met: every launch would be refused, silently, forever. Karpenter's
    CRD accepts it (its quantity pattern allows a sign); carpool rejects it where it is written."""
    if quantity.parse(value) < 0:
        raise ValueError(f"invalid limit {value!r}: must not be negative (0 stops the pool launching)")
    return value


#: `spec.limits`: any resource (cpu, memory, nodes, nvidia.com/gpu, ...), each a non-negative quantity
Limits = dict[str, Annotated[Quantity, AfterValidator(_not_negative)]]


class NodePoolSpec(CrdModel):
    template: NodeClaimTemplate
    disruption: Disruption = Field(default_factory=Disruption)
    limits: Limits | None = None
    weight: int | None = Field(default=None, ge=1, le=100)


class NodePool(CrdModel):
    """A Karpenter v1 NodePool. A `status` block (from `kubectl get -o yaml`) is accepted and ignored."""

    api_version: Literal["karpenter.sh/v1"] = API_VERSION
    kind: Literal["NodePool"] = KIND
    metadata: CrdObjectMeta
    spec: NodePoolSpec
    status: Any = Field(default=None, exclude=True)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def weight(self) -> int:
        """Strict priority, highest first; unset means 0."""
        return self.spec.weight or 0

    @property
    def node_class_name(self) -> str:
        return self.spec.template.spec.node_class_ref.name

    def requirements(self) -> Requirements:
        """What every node of the pool satisfies: template requirements, the pool's own name, its labels."""
        template = self.spec.template
        reqs = Requirements(r.to_domain() for r in template.spec.requirements)
        return reqs.add(
            Requirement.in_(wk.NODEPOOL, self.name),
            *(Requirement.in_(k, v) for k, v in template.metadata.labels.items()),
        )

    def taints(self) -> list[domain.Taint]:
        return [t.to_domain() for t in self.spec.template.spec.taints]

    def startup_taints(self) -> list[domain.Taint]:
        """Taints present only until the node is initialized (pods need not tolerate them)."""
        return [t.to_domain() for t in self.spec.template.spec.startup_taints]

    def limits(self) -> Resources | None:
        """Total resources the pool may own, or None for unlimited."""
        return resources.parse(self.spec.limits) if self.spec.limits is not None else None

    def limit_warnings(self, offered: Iterable[str]) -> list[str]:
        """One warning per limited resource that no instance type the pool may launch offers: such a
        limit never binds, which is usually a typo (`nvidia.com/gpus`) or a pool that cannot launch what
        the limit was meant for. Karpenter accepts these silently; carpool warns and still loads them."""
        have = set(offered) | {NODES_LIMIT}
        return [
            f"spec.limits[{name}]: no instance type this NodePool can launch offers {name!r}; the limit never applies"
            for name in sorted(self.spec.limits or {})
            if name not in have
        ]

    def expire_after_seconds(self) -> int | None:
        """Node lifetime before replacement; None for "Never"."""
        return parse_duration(self.spec.template.spec.expire_after)

    def consolidate_after_seconds(self) -> int | None:
        """How long a node must be consolidatable before acting; None for "Never" (no consolidation)."""
        return parse_duration(self.spec.disruption.consolidate_after)

    def termination_grace_period_seconds(self) -> int | None:
        tgp = self.spec.template.spec.termination_grace_period
        return parse_duration(tgp) if tgp is not None else None
