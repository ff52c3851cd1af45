"""Taint and Toleration shapes, convertible to the `carpool.taints` objects the scheduler matches."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from carpool import taints as domain
from carpool.api.base import KubeModel
from carpool.api.fields import check_label_key, check_label_value

__all__ = ["StrictTaint", "Taint", "TaintEffect", "Toleration"]

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(KubeModel):
    """A node taint (`key=value:effect`)."""

    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect
    time_added: datetime | None = None

    @field_validator("key")
    @classmethod
    def _qualified_key(cls, key: str) -> str:
        problem = check_label_key(key)
        if problem:
            raise ValueError(problem.replace("label key", "taint key"))
        return key

    @field_validator("value", mode="before")
    @classmethod
    def _valid_value(cls, value: object) -> object:
        if isinstance(value, str):
            problem = check_label_value(value)
            if problem:
                raise ValueError(problem.replace("label value", "taint value"))
        return value

    def to_domain(self) -> domain.Taint:
        return domain.Taint(key=self.key, effect=self.effect, value=self.value)


class StrictTaint(Taint):
    """A taint inside a Karpenter CRD, where unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class Toleration(KubeModel):
    """A pod toleration. An empty key with operator Exists tolerates every taint."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None

    @field_validator("operator", mode="before")
    @classmethod
    def _default_operator(cls, value: object) -> object:
        return "Equal" if value in (None, "") else value

    def to_domain(self) -> domain.Toleration:
        return domain.Toleration(key=self.key, operator=self.operator, value=self.value, effect=self.effect)
