"""The pydantic configuration every carpool API model shares.

Kubernetes and Karpenter spell fields in camelCase; Python code reads better in snake_case. Each model
therefore declares snake_case attributes and gets the camelCase spelling as its alias, so YAML and JSON
load unchanged, Python code can still construct models by attribute name, and `model_dump(by_alias=True)`
writes what Kubernetes expects. Where Kubernetes does not follow plain camelCase (`providerID`,
`clusterDNS`, `kmsKeyID`...) the field carries an explicit alias.

Two flavours, because the two kinds of input fail differently:
- `CrdModel` (Karpenter's `NodePool`, `EC2NodeClass`): `extra="forbid"`, so a typo such as
  `requirments` is an error instead of a silently ignored field (the API server rejects it too).
- `KubeModel` (Pods, Nodes, workloads, events): `extra="ignore"`, because real objects carry many fields
  the autoscaler never needs (managedFields, volumes, probes...).

Both build their validators on first use (`defer_build`): every Lambda handler imports most of these
models, each uses only some of them, and building them all would cost tens of milliseconds per cold start.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["CrdModel", "KubeModel"]

_NONE_TYPE = type(None)


class KubeModel(BaseModel):
    """A Kubernetes shape: camelCase aliases, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        protected_namespaces=(),
        defer_build=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        """Kubernetes treats an explicit `null` (YAML `labels:` with nothing after it) as unset."""
        # `NoneType in map(type, ...)` rather than `None in values`: the same answer, without comparing each
        # (mostly list and dict) value with None by equality; this runs for every object of every model.
        if isinstance(data, dict) and _NONE_TYPE in map(type, data.values()):
            return {k: v for k, v in data.items() if v is not None}
        return data

    def to_json_dict(self) -> dict[str, Any]:
        """The object as Kubernetes would write it (camelCase, unset optional fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class CrdModel(KubeModel):
    """A Karpenter custom resource shape: like `KubeModel` but unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")
