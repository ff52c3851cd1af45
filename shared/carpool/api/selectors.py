"""Label selectors and node selector requirements, with the Kubernetes validation and matching rules.

Two selector families exist in Kubernetes and they are not interchangeable:
- `NodeSelectorRequirement` (node affinity, NodePool requirements): operators include `Gt`/`Lt` (and
  Karpenter's `Gte`/`Lte`), and carpool turns them into `carpool.requirements.Requirement` for scheduling.
- `LabelSelector` (pod affinity, topology spread, PDBs, workloads): `matchLabels` plus `matchExpressions`
  with `In`/`NotIn`/`Exists`/`DoesNotExist`, matched against pod labels directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from carpool.api.base import KubeModel
from carpool.requirements import Requirement, Requirements

__all__ = [
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeSelector",
    "NodeSelectorOperator",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
]

NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
_BOUNDS = ("Gt", "Lt", "Gte", "Lte")


class NodeSelectorRequirement(KubeModel):
    """One `{key, operator, values, minValues}` entry.

    Validation follows Kubernetes and Karpenter: `In`/`NotIn` need values; `Gt`/`Lt`/`Gte`/`Lte` need
    exactly one non-negative integer; `minValues` (Karpenter) is 1..50 and, with `In`, no more than the
    number of values. Glob values (`c7*`, `*`) are a carpool extension and are accepted.
    """

    key: str = Field(min_length=1, max_length=316)
    operator: NodeSelectorOperator
    values: list[str] = Field(default_factory=list, validate_default=True)
    min_values: int | None = Field(default=None, ge=1, le=50)

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str], info: ValidationInfo) -> list[str]:
        operator = info.data.get("operator")
        if operator in ("In", "NotIn") and not values:
            raise ValueError(f"operator {operator} needs at least one value")
        if operator in _BOUNDS:
            if len(values) != 1:
                raise ValueError(f"operator {operator} needs exactly one value, got {len(values)}")
            try:
                number = int(values[0])
            except ValueError:
                raise ValueError(f"operator {operator} needs an integer value, got {values[0]!r}") from None
            if number < 0:
                raise ValueError(f"operator {operator} needs a non-negative integer value, got {number}")
        return values

    @field_validator("min_values")
    @classmethod
    def _min_values_within_values(cls, min_values: int | None, info: ValidationInfo) -> int | None:
        values = info.data.get("values")
        if (
            min_values is not None
            and info.data.get("operator") == "In"
            and values
            and len(values) < min_values
        ):
            raise ValueError(
                f"minValues {min_values} is more than the {len(values)} value(s) listed for operator In"
            )
        return min_values

    def to_domain(self) -> Requirement:
        """The scheduling form (`carpool.requirements.Requirement`)."""
        return Requirement.of(self.key, self.operator, self.values, self.min_values)


class NodeSelectorTerm(KubeModel):
    """Requirements that must all hold (terms of a `NodeSelector` are ORed)."""

    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)

    def requirements(self) -> Requirements:
        """The term's label expressions as one requirement set (`matchFields` only name nodes; skipped)."""
        return Requirements(expr.to_domain() for expr in self.match_expressions)


class NodeSelector(KubeModel):
    """`requiredDuringSchedulingIgnoredDuringExecution` of node affinity: any one term must hold."""

    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class LabelSelectorRequirement(KubeModel):
    """One `matchExpressions` entry of a LabelSelector."""

    key: str = Field(min_length=1)
    operator: LabelSelectorOperator
    values: list[str] = Field(default_factory=list, validate_default=True)

    @field_validator("values")
    @classmethod
    def _values_fit_operator(cls, values: list[str], info: ValidationInfo) -> list[str]:
        operator = info.data.get("operator")
        if operator in ("In", "NotIn") and not values:
            raise ValueError(f"operator {operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"operator {operator} takes no values")
        return values

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


class LabelSelector(KubeModel):
    """`matchLabels` AND `matchExpressions`. An empty selector matches everything, as in Kubernetes.

    (A *missing* selector matches nothing; callers holding `None` decide that themselves.)
    """

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(expr.matches(labels) for expr in self.match_expressions)

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions
