"""Each disruption action is its own failure unit: one that fails is reported and the run goes on.

The disruption function acts on many items per run (claims to repair or release, orphans to terminate,
nodes to drain or finish, decisions to start). An error from one of them (EC2 refusing to terminate an
instance under termination protection or a service control policy, a throttled write, a node patch
that keeps conflicting) must not stop the others: before this, one protected instance failed every
run at the same place, so the next orphan leaked and consolidation never planned again.

A failed action is logged with what it was about and the error, counted in `DisruptionActionFailures`
(breakdown `action`; the `DisruptionActionFailures` alarm reads the cluster's total), and listed in the
run's summary. Nothing of a failed action is undone: each action is written so that the next run
finishes or retries it (a terminate is idempotent; a claim is released only after its instance).
`BaseException`s (a killed process) are not caught: a dead invocation runs nothing more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from carpool import observability
from carpool.app.disruption_summary import DisruptSummary
from carpool.ports import TerminationRefused

log = logging.getLogger(__name__)

#: the `action` of a TerminateInstances that EC2 refused, wherever it was asked
TERMINATE = "terminate"


def isolated(summary: DisruptSummary, action: str, subject: str, step: Callable[[], object]) -> bool:
    """Run `step`; if it raises, report it as `action` on `subject` and return False (the caller goes on
    with its next item)."""
    try:
        step()
    except TerminationRefused as refused:
        report(summary, TERMINATE, ", ".join(refused.instance_ids),
               f"EC2 refused TerminateInstances ({subject}): {refused.code}: {refused.message}; "
               "it keeps running and is tried again next run")
        return False
    except Exception as exc:  # noqa: BLE001 - one item's failure must not stop the others (module docstring)
        report(summary, action, subject, f"{type(exc).__name__}: {exc}")
        log.debug("disruption action %s on %s failed", action, subject, exc_info=True)
        return False
    return True


def report(summary: DisruptSummary, action: str, subject: str, why: str) -> None:
    """Log, count and list one failed action."""
    message = f"disruption action {action} on {subject} failed: {why}"
    log.error(message)
    observability.emit("DisruptionActionFailures", action=action)
    summary.failures.append(message)
    summary.decisions.append(message)
