"""How queued events reach each function: the SQS event source mappings' batch sizes and windows.

One definition for the stack (`infra/events.py` builds the mappings from it) and for the simulation
(which hands the handlers batches of the same size), so the simulation measures what is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Delivery:
    """One function's SQS event source mapping."""

    batch_size: int
    max_batching_window_seconds: int
    #: Upper bound of concurrent batches; 2 is the lowest SQS event sources accept.
    max_concurrency: int | None = None


#: Provisioner: batch like Karpenter (wait for pods to accumulate, at most 10 s) and schedule up to 1,000
#: pods together: one scheduling pass packs a burst better than ten, and the per-invocation reads (claims,
#: pools, learned capacity) are paid once. Lambda also caps a batch at its 6 MB payload (a pod event is
#: about 1-2 KB). At most two batches at once, so two schedulers rarely race for the same pool limit.
PROVISIONER = Delivery(batch_size=1000, max_batching_window_seconds=10, max_concurrency=2)
#: Registrar: a joining node waits for its startup taint to go, so keep the window short.
REGISTRAR = Delivery(batch_size=50, max_batching_window_seconds=2)
#: Interruption: a spot warning gives two minutes; do not wait for company.
INTERRUPTION = Delivery(batch_size=10, max_batching_window_seconds=0)

#: Each function's Lambda timeout in seconds. The stack sets these, and the simulation's Lambda context
#: counts the remaining time down from them, so deadline-driven code behaves as deployed.
TIMEOUT_SECONDS: dict[str, int] = {
    # a resync per run, no long watch (`WATCH_SECONDS`); shorter than the schedule, so runs never overlap
    "watcher": 50,
    "provisioner": 120,
    "registrar": 60,
    "interruption": 60,
    # shorter than the one-minute schedule, so runs never overlap
    "disruption": 50,
}

#: Each function's memory in MiB (Lambda gives CPU in proportion). The stack sets these, and the
#: simulation prices carpool's own Lambda GB-seconds at them.
MEMORY_MIB: dict[str, int] = {
    "watcher": 512,
    # the scheduler is CPU-bound; 2 GB buys more than one vCPU
    "provisioner": 2048,
    "registrar": 512,
    "interruption": 512,
    "disruption": 1024,
}

#: How long each watcher run follows the API's watch stream after its resync. 0: the watcher publishes
#: what its resync found and returns. A watch would not bring a pod to the provisioner sooner: a run puts
#: its events on the bus when it ends, so a pod the watch saw waits for the watch to close, and a pod that
#: turns pending after the watch closed waits for the next run's resync. Without the watch the worst case is
#: one schedule period plus the resync (a pod turning pending just after a resync listed is published by
#: the next run's resync: <= 60 s + resync); with a 50 s watch it was 60 s + 50 s + resync. Every second
#: watched is billed at the watcher's memory, all month (a 50 s watch at 512 MB is 1.1 million GB-seconds a month).
#: `CARPOOL_WATCH_SECONDS` on the function overrides it.
WATCH_SECONDS = 0.0

#: Functions the stack runs on a schedule, and its period in seconds (``infra/events.py``: every minute).
SCHEDULE_SECONDS: dict[str, int] = {"watcher": 60, "disruption": 60}

BY_FUNCTION: dict[str, Delivery] = {"provisioner": PROVISIONER, "registrar": REGISTRAR, "interruption": INTERRUPTION}
