"""Standing still while Karpenter's controller runs: every function that acts asks here first.

A cluster moving from Karpenter to carpool still has Karpenter's controller until someone scales it to
zero. carpool uses Karpenter's tag keys, so while both run, Karpenter's NodeClaim garbage collection
terminates carpool's instances (and carpool's orphan sweep Karpenter's), and both launch for the same
pending pods. So each function checks Karpenter's leader-election Lease once per invocation, before it
acts (`carpool.karpenter_lease` says which Lease and when it counts as renewed), and while the controller
is active it does nothing but say so:

- an error log line naming the Lease's holder and how to stop it (scale Karpenter's Deployment to 0);
- the `KarpenterControllerActive` metric, which an alarm watches (`infra/monitoring.py`);
- a Warning event `KarpenterControllerActive` on the Lease (`kubectl describe lease -n kube-system
  karpenter-leader-election`), at most once per `EVENT_EVERY` from a warm environment (the event's name is
  stable, so the next write bumps its `count`: `carpool.app.recorder`).

The answer is the reason for the caller to put on what it did not do: the SQS-triggered functions
report every record for retry (`batchItemFailures`), as the provisioner does with a config it cannot use,
so SQS hands them back after the visibility timeout; the scheduled disruption run returns its summary.

A Lease carpool cannot read is no answer either: a 403 (the role lacks `get` on `leases`, granted by
`infra/rbac.yaml`) or any other failed read stands still the same way, said as what it is, because acting
next to a Karpenter controller nobody can see is the danger this guards against.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from carpool import k8s_events, karpenter_lease, observability
from carpool.app import recorder
from carpool.app.wiring import Dependencies
from carpool.karpenter_lease import Lease

log = logging.getLogger(__name__)

#: the metric an alarm watches: an invocation stood still because of Karpenter's controller (or its Lease
#: could not be read); emitted under its literal name, which the stack's tests read from the calls
METRIC = "KarpenterControllerActive"
#: a warm environment writes the Lease's event at most this often
EVENT_EVERY = timedelta(minutes=5)
#: where a warm environment keeps when it last wrote the event
_EVENT_KEY = "standstill.karpenter_event"


def karpenter_active(deps: Dependencies, function: str) -> str:
    """Why `function` must not act now ("" when it may): Karpenter's controller holds its Lease, or the
    Lease cannot be read. Said loudly (log, metric, event) whenever the answer is not ""."""
    namespace, name = deps.settings.karpenter_namespace, karpenter_lease.LEASE_NAME
    now = deps.clock()
    try:
        lease = deps.cluster.get_lease(namespace, name)
    except Exception as exc:  # noqa: BLE001 - any failed read: carpool cannot tell, so it does not act
        why = (f"cannot tell whether Karpenter's controller is active, so nothing is done: "
               f"{type(exc).__name__}: {exc}")
        log.error("%s: %s", function, why)
        observability.emit("KarpenterControllerActive")
        return why
    if not karpenter_lease.is_active(lease, now):
        return ""
    assert lease is not None  # is_active says so
    why = _active(lease)
    log.error("%s: %s", function, why)
    observability.emit("KarpenterControllerActive")
    _event(lease, deps, now)
    return why


def _active(lease: Lease) -> str:
    renewed = karpenter_lease.micro_time(lease.renew_time) if lease.renew_time else "?"
    return (f"Karpenter's controller is active (Lease {lease.namespace}/{lease.name} held by {lease.holder!r}, "
            f"renewed {renewed}): carpool acts on nothing while it runs, as the two would fight over the same "
            f"instances and pods; stop it with "
            f"`kubectl scale deployment karpenter --namespace {lease.namespace} --replicas 0`")


def _event(lease: Lease, deps: Dependencies, now: datetime) -> None:
    """The Lease's Warning event, unless this environment wrote it less than `EVENT_EVERY` ago."""
    last: datetime | None = deps.cache.get(_EVENT_KEY)
    if last is not None and now - last < EVENT_EVERY:
        return
    deps.cache[_EVENT_KEY] = now
    recorder.record([k8s_events.karpenter_controller_active(lease.namespace, lease.name, lease.uid, lease.holder)],
                    deps)
