"""A NodePool's `terminationGracePeriod` as the drain deadline, as Karpenter's terminator applies it.

Karpenter stamps a NodeClaim being deleted with its termination time (deletion + the NodePool template's
`terminationGracePeriod`, the `karpenter.sh/nodeclaim-termination-timestamp` annotation). Until then pods
leave through the Eviction API (PodDisruptionBudgets honoured, `karpenter.sh/do-not-disrupt` pods left);
from the moment a pod's own `terminationGracePeriodSeconds` would no longer end before that time, it is
deleted instead, whatever budgets or annotations say, with a grace period clamped to what remains (at
least 1 s: 0 would be a force delete from etcd). A pod already terminating past the deadline is deleted
again with the shorter grace. (`pkg/controllers/node/termination/terminator/eviction.go`:
`needsForceDelete`, `forceDelete`; `pkg/utils/pod/scheduling.go`: `IsPodEligibleForForcedEviction`.)

carpool records the same time on the claim when its drain starts
(`DisruptionProgress.termination_deadline`), so every run of the stateless disruption function agrees on
it. Karpenter reconciles continuously; carpool's drain
steps come a minute apart, so a pod is deleted at the last step before its own grace would stop fitting
(`lead`: the time to the next step), with all the time that remains: its grace ends by the deadline, as
in Karpenter, instead of being cut to a second by a step that came too late.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from carpool.api.k8s import Pod

#: What the API server defaults `terminationGracePeriodSeconds` to when a pod does not say.
DEFAULT_POD_GRACE_SECONDS = 30


def termination_deadline(drain_started: datetime, grace_period_seconds: int | None) -> datetime | None:
    """When the node's remaining pods are deleted regardless; None without a `terminationGracePeriod`."""
    if grace_period_seconds is None:
        return None
    return drain_started + timedelta(seconds=grace_period_seconds)


def must_delete(pod: Pod, deadline: datetime | None, now: datetime, lead: timedelta = timedelta(0)) -> bool:
    """Whether `pod` is deleted now rather than evicted: its own grace period would end past the deadline
    if deleted at the next drain step, `lead` from now."""
    if deadline is None:
        return False
    deleted_at = pod.metadata.deletion_timestamp
    if deleted_at is not None:  # already terminating: only if it would still run past the deadline
        return deleted_at > deadline
    grace = pod.spec.termination_grace_period_seconds
    own = DEFAULT_POD_GRACE_SECONDS if grace is None else grace
    return now + lead > deadline - timedelta(seconds=own)


def delete_grace_seconds(deadline: datetime, now: datetime) -> int:
    """The grace period a deleted pod gets: what remains until the deadline, at least 1 s."""
    return max(int((deadline - now).total_seconds()), 1)
