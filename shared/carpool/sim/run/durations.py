"""How long a deployed invocation takes, in simulated time: a cold start and the invocation's own work.

The simulation runs every handler for real, but in one process on a development machine, against local
AWS that answers in microseconds: its wall time measures neither Lambda's CPU at the function's memory
nor AWS's latency. So an invocation's simulated duration is modelled, never shorter than the deployed
one is expected to be:

- CPU work: what `make bench` measures on the development machine (one core), scaled to the function's
  configured memory: Lambda gives a full vCPU at 1,769 MB and a share in proportion below it
  (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html), and runs carpool on Graviton
  (arm64), whose core we take as `CORE_SLOWDOWN` times slower than the machine the bench ran on (no
  measurement here; a cautious guess). Above 1,769 MB a single-threaded handler gains nothing.
- AWS calls the simulation cannot time: CreateFleet (an `instant` fleet answers in one to a few seconds:
  the handler's writes happen when it asks, its instances start running `CREATE_FLEET_SECONDS` later, and
  the invocation holds its environment and its queue's concurrency until then), DynamoDB transactions
  and Kubernetes API writes (tens of milliseconds each), and EventBridge's delivery to SQS (AWS reported
  a p99 around 130 ms after its 2024 latency work; we charge about twice that).

`tests/unit/sim/run/test_durations.py` checks the bench figures below against `bench/results.json`, so the
model is never faster than what the bench last measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from carpool import delivery, together
from carpool.app import recorder

#: Memory at which Lambda allocates one full vCPU.
FULL_VCPU_MIB = 1769
#: The deployed arm64 core against the development machine's core (an assumption, see the docstring).
CORE_SLOWDOWN = 1.2
#: EventBridge rule -> SQS queue: a message is visible to the event source this long after PutEvents.
BUS_TO_QUEUE_SECONDS = 0.25
#: CreateFleet (`instant`): from the request to the instances it names starting to run.
CREATE_FLEET_SECONDS = 1.5
#: Reading one byte of a listed or watched Kubernetes object on one bench core: the watcher's resync at
#: 5,000 nodes / 151,000 pods when it read every node in full (`bench/scale.py`: 2.26 s for 29.1 MB,
#: 78 ns a byte, the HTTP read, the decode and the watcher's own work on each object). Kept though the
#: resync now reads 7 MB (node names, metadata only) for 0.19-0.26 CPU seconds (27-37 ns a byte): the harsher
#: figure also covers the API server's time to answer, which the CPU figure leaves out. Charged by size,
#: not by count: a burst's pending pods are under 1 KB, and decoding costs what there is to decode.
BYTE_CPU_SECONDS = 7.8e-8
#: One Kubernetes API request from a function (a read, a patch, an event written).
K8S_CALL_SECONDS = 0.03
#: A provisioner's Kubernetes events (`carpool.app.recorder`: at most `MAX_PER_INVOCATION`, written
#: `together.MAX_WORKERS` at a time), after its launches and before its answer.
EVENT_WRITES_SECONDS = -(-recorder.MAX_PER_INVOCATION // together.MAX_WORKERS) * K8S_CALL_SECONDS
#: One PutEvents call (up to 10 entries) from a function to EventBridge.
PUT_EVENTS_SECONDS = 0.03
#: Lambda keeps an idle execution environment at least this long (AWS does not promise more; shorter
#: is harsher: more cold starts).
WARM_SECONDS = 300.0
#: Lambda retires an execution environment after a while even when it is invoked all the time (AWS says
#: environments are recycled periodically and promises no lifetime; a few hours is what users observe). An
#: hour here, harsher: what an environment keeps in memory (the disruption pass's pods) is read anew at
#: least this often.
ENVIRONMENT_LIFETIME_SECONDS = 3600.0


@dataclass(frozen=True)
class Cost:
    """One function's modelled costs: CPU seconds on one development-machine core, and AWS I/O seconds."""

    #: init + first invocation (`bench/first_invocation.py`), CPU
    cold_cpu: float
    #: fixed part of a warm invocation, CPU
    base_cpu: float
    #: per record (pod, node, event) of the invocation, CPU
    per_item_cpu: float = 0.0
    #: fixed AWS latency of an invocation
    base_io: float = 0.0
    #: AWS latency per record
    per_item_io: float = 0.0
    #: AWS latency after the handler's writes, while the invocation still runs (CreateFleet's answer)
    tail_io: float = 0.0


#: Figures from `make bench` (bench/results.json): cold starts are "init + first invocation" at their
#: worst measured run; the provisioner's work is its 1,000-pod invocation (2.13 s: 0.15 s fixed, 2 ms a
#: pod); the watcher's resync is `bench/scale.py`'s (5,000 nodes in 2.3 s: 78 ns a byte read); the
#: disruption pass's is 37.7 s at 5,000 nodes (7.5 ms a node).
COSTS: dict[str, Cost] = {
    # reads (claims, config, the pending pods) and the reservations' transactions before CreateFleet
    # after them CreateFleet's answer, then the batch's Kubernetes events
    "provisioner": Cost(cold_cpu=1.03, base_cpu=0.15, per_item_cpu=0.002, base_io=0.3,
                        tail_io=CREATE_FLEET_SECONDS + EVENT_WRITES_SECONDS),
    # per node: a read, a merge patch, a claim update and its events (written together), a request each
    "registrar": Cost(cold_cpu=0.80, base_cpu=0.05, per_item_cpu=0.005, base_io=0.05,
                      per_item_io=4 * K8S_CALL_SECONDS),
    "interruption": Cost(cold_cpu=1.15, base_cpu=0.10, per_item_cpu=0.01, base_io=0.1, per_item_io=0.2),
    # its lists and watch events are charged as they are read (`read`), its PutEvents per call
    "watcher": Cost(cold_cpu=0.51, base_cpu=0.05, base_io=0.1),
    "disruption": Cost(cold_cpu=1.00, base_cpu=0.5, per_item_cpu=0.0075, base_io=0.3),
}


def cpu_factor(function: str) -> float:
    """How many times longer CPU work takes in the deployed function than on one bench core."""
    memory = delivery.MEMORY_MIB[function]
    return max(1.0, FULL_VCPU_MIB / memory) * CORE_SLOWDOWN


def cold_start(function: str) -> float:
    """Seconds a new execution environment adds before the handler runs (init and first use)."""
    return COSTS[function].cold_cpu * cpu_factor(function)


def read(function: str, size: int) -> float:
    """Seconds `function` takes to read `size` bytes of listed or watched objects, at its memory."""
    return BYTE_CPU_SECONDS * size * cpu_factor(function)


def tail(function: str) -> float:
    """Seconds an invocation still runs after its writes (waiting for CreateFleet's answer)."""
    return COSTS[function].tail_io


def work(function: str, items: int) -> float:
    """Seconds an invocation of `function` over `items` records (or listed objects) takes once warm, up
    to its writes."""
    cost = COSTS[function]
    cpu = (cost.base_cpu + cost.per_item_cpu * items) * cpu_factor(function)
    return cpu + cost.base_io + cost.per_item_io * items
