"""Karpenter's controller as the simulated cluster sees it: a leader-election Lease renewed while it runs.

Modelled on client-go's `leaderelection` with controller-runtime's defaults, as Karpenter v1.14.1 runs it
(`carpool.karpenter_lease` cites the source): the leader creates the Lease when it first leads
(`holderIdentity`, `acquireTime`, `renewTime`, `leaseDurationSeconds: 15`, `leaseTransitions: 0`), renews
`renewTime` every `RetryPeriod` (2 s) while it runs, and then either releases it (a clean stop,
`LeaderElectionReleaseOnCancel`: `holderIdentity` emptied, `leaseDurationSeconds: 1`, both times set to
the moment of release) or, when it dies, leaves it as its last renewal wrote it.

Nothing reads a Lease but a GET, so the renewals are not played one by one on the agenda (90 writes for 3
minutes of a controller): `written_at` gives the Lease as the controller last wrote it by a moment, and the
run writes that just before each read (`SimulatedCluster.before_lease_read`), which is what any read at
that moment would have found.

`lease_problem` refuses what the API server refuses of a Lease: a MicroTime without exactly six fractional
digits ("parsing time ... as "2006-01-02T15:04:05.000000Z07:00"") and a `leaseDurationSeconds` that is
not positive (`ValidateLeaseSpec`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from carpool.karpenter_lease import (
    LEASE_DURATION_SECONDS,
    LEASE_NAME,
    RELEASED_DURATION_SECONDS,
    RETRY_PERIOD_SECONDS,
)
from carpool.sim.cluster.specs import KarpenterController

_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")
_TIMES = ("acquireTime", "renewTime")


def _micro(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_problem(raw: Mapping[str, Any]) -> str | None:
    """Why the API server would refuse this Lease (400 BadRequest / 422 Invalid), None when it would not."""
    spec = raw.get("spec") or {}
    for name in _TIMES:
        value = spec.get(name)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
            return (f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}" as '
                    f'"2006-01-02T15:04:05.000000Z07:00": cannot parse it as a MicroTime')
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        return f"spec.leaseDurationSeconds: Invalid value: {duration!r}: must be greater than 0"
    return None


def written_at(controller: KarpenterController, elapsed: float, start: datetime) -> dict[str, Any] | None:
    """The Lease as `controller` last wrote it by `elapsed` seconds into a run that began at `start`: None
    before it first led; its last renewal while it runs (and after it crashed); the released Lease after a
    clean stop."""
    if elapsed < controller.from_:
        return None
    stopped = controller.until is not None and elapsed >= controller.until
    if stopped and controller.stop == "release":
        spec = _released(start + timedelta(seconds=controller.until or 0.0))
    else:
        spec = _held(controller, elapsed, start)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE_NAME, "namespace": controller.namespace}, "spec": spec}


def _held(controller: KarpenterController, elapsed: float, start: datetime) -> dict[str, Any]:
    """The leader's last renewal by `elapsed`: every `RETRY_PERIOD_SECONDS` from `from`, none at or after
    `until` (a renewal due at the moment it stopped never happened)."""
    last = min(elapsed, controller.until) if controller.until is not None else elapsed
    renewals = math.floor((last - controller.from_) / RETRY_PERIOD_SECONDS + 1e-9)
    if controller.until is not None and controller.from_ + renewals * RETRY_PERIOD_SECONDS >= controller.until:
        renewals -= 1
    renewed = controller.from_ + max(renewals, 0) * RETRY_PERIOD_SECONDS
    return {"holderIdentity": controller.holder, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "acquireTime": _micro(start + timedelta(seconds=controller.from_)),
            "renewTime": _micro(start + timedelta(seconds=renewed)), "leaseTransitions": 0}


def _released(at: datetime) -> dict[str, Any]:
    """What client-go's `release` writes: no holder, a one-second duration, both times the moment of release."""
    return {"leaseDurationSeconds": RELEASED_DURATION_SECONDS, "acquireTime": _micro(at), "renewTime": _micro(at),
            "leaseTransitions": 0}


def renewer(controllers: list[KarpenterController], elapsed: Callable[[], float], start: datetime,
            put: Callable[[Mapping[str, Any]], Any]) -> Callable[[], None]:
    """What the run calls before a Lease is read: each controller's Lease as it last wrote it, written
    (`put`) when it changed since the last read. Controllers are taken in order, so of two in one
    namespace the later one's write wins, as the later leader's would."""
    last: dict[int, dict[str, Any] | None] = {}

    def bring_up_to_date() -> None:
        now = elapsed()
        for i, controller in enumerate(controllers):
            raw = written_at(controller, now, start)
            if raw is not None and raw != last.get(i):
                put(raw)
                last[i] = raw

    return bring_up_to_date
