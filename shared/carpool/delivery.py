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


#: Provisioner: the watcher already batches pending pods the way Karpenter does (`POD_BATCH_IDLE_SECONDS`,
#: `POD_BATCH_MAX_SECONDS`) and puts each micro-batch on the bus at once, so the queue only has to gather
#: one micro-batch's messages (EventBridge delivers them to SQS over a few hundred milliseconds): a 1 s
#: window, not a second batching of its own. Up to 1,000 pods are scheduled together: one scheduling pass
#: packs a burst better than ten, and the per-invocation reads (claims, pools, learned capacity) are paid
#: once. Lambda also caps a batch at its 6 MB payload (a pod event is about 1-2 KB). At most five batches
#: at once: a 10,000-pod burst is ten batches of about 5 s each (1,000 pods scheduled and reserved, then
#: CreateFleet), and two at a time put the last pod's CreateFleet 35 s after it turned pending, five at
#: a time 21 s. Batches that race for one pool's limit are settled by the ledger's conditional
#: reservations (the loser's pods wait for the next resync, as Karpenter's wait for room under the limit).
PROVISIONER = Delivery(batch_size=1000, max_batching_window_seconds=1, max_concurrency=5)
#: Registrar: a joined node keeps the `karpenter.sh/unregistered` NoExecute taint until the registrar lifts
#: it, and no pod binds before; Karpenter lifts it as soon as the Node exists. So no batching window to
#: speak of: 1 s, the smallest that still lets a burst's nodes share an invocation.
REGISTRAR = Delivery(batch_size=50, max_batching_window_seconds=1)
#: Interruption: a spot warning gives two minutes; do not wait for company.
INTERRUPTION = Delivery(batch_size=10, max_batching_window_seconds=0)

#: Each function's Lambda timeout in seconds. The stack sets these, and the simulation's Lambda context
#: counts the remaining time down from them, so deadline-driven code behaves as deployed.
TIMEOUT_SECONDS: dict[str, int] = {
    # a resync, then the watch until `WATCH_SECONDS` after the start; the rest is margin for a slow resync
    "watcher": 90,
    "provisioner": 120,
    "registrar": 60,
    "interruption": 60,
    # shorter than the one-minute schedule, so runs never overlap; its pass at 5,000 nodes needs 45 s at
    # its memory (see MEMORY_MIB), which leaves 13 s
    "disruption": 58,
}

#: Each function's memory in MiB (Lambda gives CPU in proportion). The stack sets these, and the
#: simulation prices carpool's own Lambda GB-seconds at them.
MEMORY_MIB: dict[str, int] = {
    # billed by the second, all month: the least Lambda offers. Its resync reads a page at a time and
    # publishes as it goes (67 MB at 5,000 nodes, `bench/scale.py`); its CPU share is a fourteenth of a
    # core, which the simulation charges for every byte it reads
    "watcher": 128,
    # the scheduler is CPU-bound; 2 GB buys more than one vCPU
    "provisioner": 2048,
    # a cold registrar is on the path of every new node (node -> taint lifted, p99 <= 5 s): more CPU
    "registrar": 1024,
    # a spot warning gives two minutes, and a cold start at 512 MB takes five seconds of them
    "interruption": 1024,
    # one whole vCPU, the most a single Python thread uses: its pass at 5,000 nodes / 151,000 pods is 37.7 s
    # on a bench core (`bench/scale.py`), 45 s on the deployed core (`sim.durations.CORE_SLOWDOWN`), within
    # its 58 s timeout; at 1,024 MB (0.58 vCPU) it would take 78 s and never finish
    "disruption": 1769,
}

#: How long each watcher run follows the API's watch stream, counted from the run's start. The schedule
#: starts a run every `SCHEDULE_SECONDS["watcher"]`; each run watches a little longer than that, so the
#: next run's resync is done before this run's watch ends and no moment goes unwatched (the two runs'
#: events overlap for a few seconds; duplicates are harmless: the provisioner confirms every pod against
#: its nominations). A pod that turns pending is on the bus within `POD_BATCH_IDLE_SECONDS` of quiet, at
#: most `POD_BATCH_MAX_SECONDS`, as Karpenter's batcher; a node is on the bus as soon as it is seen.
#: Every second watched is billed at the watcher's memory, all month: hence its small memory.
#: `CARPOOL_WATCH_SECONDS` on the function overrides it (0: resync only, as before).
WATCH_SECONDS = 65.0
#: Karpenter's `BATCH_IDLE_DURATION` and `BATCH_MAX_DURATION`: a micro-batch of pending pods is put on the
#: bus after 1 s without a new one, or 10 s after its first.
POD_BATCH_IDLE_SECONDS = 1.0
POD_BATCH_MAX_SECONDS = 10.0
#: Functions the stack runs on a schedule, and its period in seconds (``infra/events.py``: every minute).
SCHEDULE_SECONDS: dict[str, int] = {"watcher": 60, "disruption": 60}

def visibility_timeout_seconds(function: str) -> int:
    """The visibility timeout of `function`'s queue: six times the function timeout plus the batching
    window (AWS's guidance for SQS event sources). The stack sets it; the simulation re-shows a failed
    message after it."""
    return 6 * TIMEOUT_SECONDS[function] + BY_FUNCTION[function].max_batching_window_seconds


BY_FUNCTION: dict[str, Delivery] = {"provisioner": PROVISIONER, "registrar": REGISTRAR, "interruption": INTERRUPTION}
