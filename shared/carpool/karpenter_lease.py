"""Whether a Karpenter controller is running in the cluster, from its leader-election Lease.

carpool uses Karpenter's tag keys and answers the same pending pods, so a cluster where Karpenter's
controller still runs must not also run carpool: the two garbage collections would terminate each other's
instances and both would launch for the same pods. carpool stands still while the controller is active
(`carpool.app.standstill`); this module is the rule that says when it is.

What Karpenter v1.14.1 holds (kubernetes-sigs/karpenter `pkg/operator/operator.go`, controller-runtime
v0.23.1, client-go's `leaderelection`):
- a `coordination.k8s.io/v1` Lease (`LeaderElectionResourceLock: resourcelock.LeasesResourceLock`) named by
  `LeaderElectionID: options.LeaderElectionName`, which defaults to `karpenter-leader-election`
  (`pkg/operator/options/options.go`, `LEADER_ELECTION_NAME`);
- in `options.LeaderElectionNamespace`, default "", which controller-runtime replaces with the pod's own
  namespace (`pkg/leaderelection/leader_election.go` `getInClusterNamespace`): the namespace Karpenter's
  Helm release is installed in, `kube-system` in Karpenter's getting-started guide (`karpenter` in older
  guides; `CARPOOL_KARPENTER_NAMESPACE` names another);
- with controller-runtime's defaults (`pkg/manager/internal.go`): `LeaseDuration` 15 s (written into the
  Lease as `spec.leaseDurationSeconds`), `RenewDeadline` 10 s, `RetryPeriod` 2 s: the leader renews
  `spec.renewTime` every 2 s, and another candidate may take the Lease 15 s after the last renewal;
- `LeaderElectionReleaseOnCancel: true`: a controller that stops cleanly (its Deployment scaled to 0)
  releases the Lease, writing an empty `holderIdentity` and `leaseDurationSeconds: 1`; one that dies
  leaves its holder in place until the Lease expires.

client-go decides that a Lease is held by comparing its own clock at the moment it *observed* the last
change with the duration, never the writer's `renewTime`, precisely because two machines' clocks differ.
carpool's functions live minutes and cannot watch the Lease change, so they read `renewTime` and allow
`CLOCK_SKEW` on top of the duration: a controller is active while `renewTime + leaseDurationSeconds +
CLOCK_SKEW` is after now and a holder is named. A Lease with no `renewTime` is free, as client-go reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

#: Karpenter's `--leader-election-name` default
LEASE_NAME: Final = "karpenter-leader-election"
#: where Karpenter's Helm chart is installed by its getting-started guide (the Lease is in that namespace)
DEFAULT_NAMESPACE: Final = "kube-system"
#: controller-runtime's `defaultLeaseDuration`, used when a Lease does not say its own
LEASE_DURATION_SECONDS: Final = 15
#: controller-runtime's `defaultRetryPeriod`: how often the leader renews
RETRY_PERIOD_SECONDS: Final = 2
#: what carpool allows for the difference between the Karpenter pod's clock and the function's
CLOCK_SKEW: Final = timedelta(seconds=5)
#: what client-go writes when the leader releases the Lease on a clean stop (`LeaderElector.release`)
RELEASED_DURATION_SECONDS: Final = 1


class LeaseUnreadable(ValueError):
    """The Lease's JSON is not a Lease as the API server serves it (the field named)."""

    def __init__(self, namespace: str, name: str, field: str, why: str) -> None:
        super().__init__(f"Lease {namespace}/{name}: {field}: {why}")
        self.field = field


@dataclass(frozen=True, slots=True)
class Lease:
    """The fields of a `coordination.k8s.io/v1` Lease that say who holds it and until when."""

    namespace: str
    name: str
    uid: str
    #: `spec.holderIdentity` ("" when released or never held)
    holder: str
    #: `spec.renewTime` (a MicroTime), None when unset
    renew_time: datetime | None
    #: `spec.leaseDurationSeconds`, None when unset
    duration_seconds: int | None

    def held_until(self) -> datetime | None:
        """When the holder's claim runs out on the writer's clock (None: nobody holds it)."""
        if not self.holder or self.renew_time is None:
            return None
        return self.renew_time + timedelta(seconds=self.duration_seconds or LEASE_DURATION_SECONDS)


def is_active(lease: Lease | None, now: datetime) -> bool:
    """Whether the Lease's holder is still leading at `now`, `CLOCK_SKEW` allowed for (no Lease: no)."""
    until = lease.held_until() if lease is not None else None
    return until is not None and now < until + CLOCK_SKEW


def parse_micro_time(value: str) -> datetime:
    """A `metav1.MicroTime` as the API server writes it (RFC 3339 with microseconds,
    `2006-01-02T15:04:05.000000Z07:00`); offsets other than Z are taken as given."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def micro_time(at: datetime) -> str:
    """`at` as a MicroTime: the API server refuses a Lease time without exactly six fractional digits."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_json(raw: Mapping[str, Any]) -> Lease:
    """The Lease from its API JSON. Raises `LeaseUnreadable` naming the field that is not as served."""
    meta = raw.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    spec = raw.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise LeaseUnreadable(namespace, name, "spec", f"expected an object, got {type(spec).__name__}")
    renew, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    try:
        renew_time = parse_micro_time(renew) if renew else None
    except (TypeError, ValueError, AttributeError) as exc:
        raise LeaseUnreadable(namespace, name, "spec.renewTime", f"not a MicroTime: {renew!r}") from exc
    if duration is not None and (not isinstance(duration, int) or isinstance(duration, bool)):
        raise LeaseUnreadable(namespace, name, "spec.leaseDurationSeconds", f"not an integer: {duration!r}")
    return Lease(namespace, name, str(meta.get("uid") or ""), str(spec.get("holderIdentity") or ""),
                 renew_time, duration)
