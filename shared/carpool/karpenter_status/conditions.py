"""Status conditions as Karpenter sets them: operatorpkg's `status.ConditionSet`
(github.com/awslabs/operatorpkg `status/condition_set.go`, the version Karpenter v1.14.1 pins).

Why copy its rules rather than write conditions freely: `kubectl describe`, `kubectl wait
--for=condition=Ready` and every tool built for Karpenter read them, and they rely on operatorpkg's
behaviour:
- every condition carries `observedGeneration`: the object's `metadata.generation` when it was set;
- `lastTransitionTime` moves only when `status` changes (a new reason or message keeps it);
- the root condition `Ready` is recomputed after every other one is set: True when every dependent is
  True at the current generation; else False when some dependent is False at the current generation,
  Unknown otherwise, with reason `UnhealthyDependents` / `ReconcilingDependents` and a message listing the
  unhealthy dependents, most recent transition first (`InstanceProfileReady=False, ...`);
- a dependent not set yet starts Unknown, its `lastTransitionTime` the object's creation;
- the list is kept sorted: by `lastTransitionTime`, the root last.

A condition crosses as the JSON dict the CRD holds (`type`, `status`, `observedGeneration`,
`lastTransitionTime`, `reason`, `message`), so what is read from the API server and what is written back
compare as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

__all__ = [
    "FALSE",
    "READY",
    "TRUE",
    "UNKNOWN",
    "ConditionSet",
    "failing_dependents",
    "is_true",
    "timestamp",
]

READY: Final = "Ready"
TRUE: Final = "True"
FALSE: Final = "False"
UNKNOWN: Final = "Unknown"
#: what operatorpkg's `SetUnknown` says (a condition not reconciled yet)
AWAITING_REASON: Final = "AwaitingReconciliation"
AWAITING_MESSAGE: Final = "object is awaiting reconciliation"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(moment: datetime) -> str:
    """`metav1.Time` as JSON: RFC 3339 in UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parsed(value: Any) -> datetime:
    """A `lastTransitionTime` read back (any RFC 3339 form); the epoch when unreadable, so sorting never fails."""
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return _EPOCH
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return _EPOCH


def is_true(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == TRUE


class ConditionSet:
    """The conditions of one object, changed as operatorpkg changes them (the module docstring).

    `obj` is the object as read (its `metadata.generation`, `creationTimestamp`, `deletionTimestamp`
    and `status.conditions`); `dependents` the conditions `Ready` is computed from, in the order the
    object's kind names them; `now` stamps what transitions. The object is not changed: `conditions()`
    is the new list."""

    def __init__(self, obj: Mapping[str, Any], dependents: Sequence[str], now: datetime,
                 root: str = READY) -> None:
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        self.generation = int(meta.get("generation") or 0)
        self._deleting = bool(meta.get("deletionTimestamp"))
        self._created = str(meta.get("creationTimestamp") or timestamp(now))
        self._now = timestamp(now)
        self.root = root
        self.dependents = tuple(d for d in dict.fromkeys(dependents) if d != root)
        raw = status.get("conditions") if isinstance(status, Mapping) else None
        self._conditions: list[dict[str, Any]] = [dict(c) for c in raw or () if isinstance(c, Mapping)]
        # `For`: every known condition starts Unknown, the root first (consistent transition times)
        for kind in (root, *self.dependents):
            if self.get(kind) is None:
                self.set_unknown(kind)

    def conditions(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self._conditions]

    def get(self, kind: str) -> dict[str, Any] | None:
        for condition in self._conditions:
            if condition.get("type") == kind:
                return dict(condition)
        return None

    def set_true(self, kind: str, reason: str | None = None, message: str = "") -> bool:
        """True; the reason defaults to the condition's type, as operatorpkg's `SetTrue`."""
        return self.set(kind, TRUE, reason or kind, message)

    def set_false(self, kind: str, reason: str, message: str) -> bool:
        return self.set(kind, FALSE, reason, message)

    def set_unknown(self, kind: str, reason: str = AWAITING_REASON, message: str = AWAITING_MESSAGE) -> bool:
        return self.set(kind, UNKNOWN, reason, message)

    def set(self, kind: str, status: str, reason: str, message: str) -> bool:
        """operatorpkg's `Set`: True when something changed. The root is recomputed after any other."""
        new: dict[str, Any] = {"type": kind, "status": status, "observedGeneration": self.generation,
                               "reason": reason, "message": message}
        kept: list[dict[str, Any]] = []
        found = False
        for condition in self._conditions:
            if condition.get("type") != kind:
                if self._deleting:  # an object being deleted has every condition's generation bumped
                    condition = {**condition, "observedGeneration": self.generation}
                kept.append(condition)
                continue
            found = True
            same_status = condition.get("status") == status
            new["lastTransitionTime"] = condition.get("lastTransitionTime") if same_status else self._now
            if new == condition:
                return False
        if not found:
            # a dependent not set yet is being initialized: its last "transition" was the object's creation
            new["lastTransitionTime"] = self._created if self._is_known(kind) else self._now
        kept.append(new)
        self._conditions = _sorted(kept, self.root)
        self._recompute_root(kind)
        return True

    def _is_known(self, kind: str) -> bool:
        return kind == self.root or kind in self.dependents

    def _recompute_root(self, changed: str) -> None:
        if changed == self.root:
            return
        unhealthy = self.unhealthy_dependents()
        if not unhealthy:
            self.set_true(self.root)
            return
        current = any(c.get("status") == FALSE and c.get("observedGeneration") == self.generation for c in unhealthy)
        self.set(self.root, FALSE if current else UNKNOWN,
                 "UnhealthyDependents" if current else "ReconcilingDependents",
                 ", ".join(f"{c.get('type')}={c.get('status')}" for c in unhealthy))

    def unhealthy_dependents(self) -> list[dict[str, Any]]:
        """Dependents not True at the current generation, the most recent transition first."""
        found = [c for c in self._conditions if c.get("type") in self.dependents
                 and (c.get("status") != TRUE or c.get("observedGeneration") != self.generation)]
        return sorted(found, key=lambda c: _parsed(c.get("lastTransitionTime")), reverse=True)


def _sorted(conditions: Iterable[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    """operatorpkg's order "for the convenience of kubectl": by transition time, the root last (stable)."""
    return sorted(conditions, key=lambda c: (c.get("type") == root, _parsed(c.get("lastTransitionTime"))))


def failing_dependents(obj: Mapping[str, Any], dependents: Sequence[str]) -> list[dict[str, Any]]:
    """The dependents that make the object `Ready=False` at its current generation, the most recent
    transition first; empty when it is not `Ready=False` at its generation (Ready, not reconciled since its
    spec changed, or never written). For readers that want the cause, not the root's summary (the
    provisioner's `FailedScheduling`)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    generation = int(meta.get("generation") or 0)
    conditions = [c for c in (status.get("conditions") or ()) if isinstance(c, Mapping)]
    ready = next((c for c in conditions if c.get("type") == READY), None)
    if ready is None or ready.get("status") != FALSE or ready.get("observedGeneration") != generation:
        return []
    failed = [dict(c) for c in conditions if c.get("type") in dependents and c.get("status") == FALSE
              and c.get("observedGeneration") == generation]
    return sorted(failed, key=lambda c: _parsed(c.get("lastTransitionTime")), reverse=True)
