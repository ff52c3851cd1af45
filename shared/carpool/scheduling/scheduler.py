"""The batch scheduler: pending pods onto in-flight claims, existing nodes, claims opened in this batch, and
new claims from NodePools by weight.

Behaviour follows Karpenter's scheduler (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling):
pods go biggest first (cpu, then memory); each tries the bins that already exist (in-flight claims, then
existing nodes, then claims opened earlier in the batch, in that order), then a new claim from the first
NodePool (by weight) that can take it; a pod that fails has one preference relaxed and goes to the back of
the queue; the batch ends when a full pass over the queue makes no progress.

One concept a module, as in Karpenter's package:
- `podgroups.py`: identical pods grouped, placed k at a time; `pending.py`: a group's progress and the
  constraints in force at its relaxation level; `queue.py`: the queue; `preferences.py`: relaxation;
- `placement.py`: placing a group on the bins; `newclaim.py`: opening a claim when none takes it;
  `claim.py`: bins and how far a claim can grow; `existingnode.py`: existing nodes and in-flight
  claims; `signature.py`: interned requirement sets; `compatibility.py`: node affinity and taints
  against a signature; `room.py`: bins by free room;
- `topology.py` / `topologygroup.py`: topology counts; `domains.py`: the domains a group may use;
- `pools.py` and `limits.py`: NodePool order and limits; `balance.py`: cost-balanced filling of
  unconstrained pods; `planned_claims.py` and `explain.py`: the result and the reasons for what is left;
  `indexcache.py`: pools' instance indexes shared by batches scheduled one after another (consolidation).

Beyond Karpenter:
- cost: pods with no placement rule of their own are placed after the others, bin by bin, so nodes fill
  in cpu and memory together (`balance.py`), and a claim only grows while a cost-efficient option still
  fits (`ScheduleOptions.efficiency_tolerance`) instead of until its largest option is full;
- a pod's required node-affinity terms are tried as the OR they are (Karpenter tries the first and
  relaxes); topology domains are chosen among those with an available offering; a claim whose zone is
  decided late still counts the pods it already holds; zone anti-affinity narrows a claim to one empty
  zone instead of blocking them all;
- ordered requirement values (flex first) and proportional split between pools (`pools.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from carpool.resources import CPU
from carpool.scheduling import balance, explain, label_safety
from carpool.scheduling.domains import Domains
from carpool.scheduling.existingnode import fixed_bins
from carpool.scheduling.indexcache import IndexCache
from carpool.scheduling.inputs import ExistingNode, InFlightClaim, PodSpec, PoolSpec
from carpool.scheduling.newclaim import NewClaims
from carpool.scheduling.pending import PendingGroup
from carpool.scheduling.placement import Placer
from carpool.scheduling.planned_claims import build_result
from carpool.scheduling.podgroups import PodGroup, group_pods
from carpool.scheduling.pools import PoolOrder, PoolState
from carpool.scheduling.preferences import Preferences, ProfileIds
from carpool.scheduling.queue import PodGroupQueue
from carpool.scheduling.result import SchedulingResult
from carpool.scheduling.room import RoomIndex
from carpool.scheduling.signature import SignatureRegistry
from carpool.scheduling.topology import Topology
from carpool.taints import PREFER_NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class ScheduleOptions:
    """Knobs: options listed per claim, claim names, and how far claims may grow.

    `efficiency_tolerance`: a new claim picks, among the options that fit its first pods, those whose
    price per unit of the batch's workload shape is within this fraction of the best, and only grows while
    one of them still fits (its option list keeps every type that fits, cheapest first). Karpenter grows a
    claim until its *largest* option is full, which on a real catalog ends on 12 TB u7i nodes; `None`
    restores that behaviour.
    """

    max_instance_types: int | None = 60
    claim_name: Callable[[str, int], str] | None = None
    efficiency_tolerance: float | None = 0.10


def schedule(
    pods: Sequence[PodSpec],
    pools: Sequence[PoolSpec],
    *,
    in_flight: Sequence[InFlightClaim] = (),
    existing: Sequence[ExistingNode] = (),
    daemonsets: Sequence[PodSpec] = (),
    options: ScheduleOptions | None = None,
    indexes: IndexCache | None = None,
) -> SchedulingResult:
    """Plan where every pending pod goes. Pure: same inputs, same result (`indexes`, when given, only
    shares the pools' instance indexes with the caller's other batches: see `carpool.scheduling.indexcache`)."""
    start = time.perf_counter()
    unsafe = label_safety.unsafe_pods(pods)
    if unsafe:
        pods = [p for p in pods if p.key not in unsafe]
    result = Scheduler(pools, in_flight=in_flight, existing=existing, daemonsets=daemonsets, options=options,
                       indexes=indexes).solve(pods)
    for key, reason in unsafe.items():
        result.unschedulable[key] = {pool.name: reason for pool in pools} or {"": reason}
    result.seconds = time.perf_counter() - start
    return result


class Scheduler:
    """One batch. Build with the cluster's pools and bins, then `solve(pods)` once."""

    def __init__(
        self,
        pools: Sequence[PoolSpec],
        *,
        in_flight: Sequence[InFlightClaim] = (),
        existing: Sequence[ExistingNode] = (),
        daemonsets: Sequence[PodSpec] = (),
        options: ScheduleOptions | None = None,
        indexes: IndexCache | None = None,
    ) -> None:
        self.options = options or ScheduleOptions()
        self.pools = [PoolState(i, spec, daemonsets, indexes) for i, spec in enumerate(pools)]
        self.order = PoolOrder(self.pools)
        self.topology = Topology()
        self.signatures = SignatureRegistry()
        self.pool_signatures = {p.id: self.signatures.for_pool(p, p.requirements) for p in self.pools}
        self.fixed = fixed_bins(in_flight, existing, {p.name: p for p in self.pools}, self.signatures)
        self.domains = Domains(self.pools, self.signatures)
        # PreferNoSchedule is relaxed last, and only when some pool or node has such a taint
        self.prefer_no_schedule = any(
            t.effect == PREFER_NO_SCHEDULE
            for taints in [p.taints for p in self.pools] + [s.taints for s in self.signatures.all]
            for t in taints
        )

    def solve(self, pods: Sequence[PodSpec]) -> SchedulingResult:
        """Constrained groups first (Karpenter's order and queue), then the free ones (balanced), then
        everything still pending once more (e.g. pods whose affinity targets were just placed)."""
        groups, opted_out = group_pods(pods)
        pending, placer = self._prepare(groups)
        free = [g for g in pending if balance.is_free(g)]
        PodGroupQueue([g for g in pending if not balance.is_free(g)]).run(placer.place)
        balance.place_free(placer, free)
        PodGroupQueue([g for g in pending if g.remaining]).run(placer.place)
        return build_result(
            placer.bins,
            pending,
            opted_out=opted_out,
            relaxed=placer.relaxed,
            max_instance_types=self.options.max_instance_types,
            reasons=lambda group: explain.reasons(group, self.order, self.topology, self.domains),
        )

    def _prepare(self, groups: list[PodGroup]) -> tuple[list[PendingGroup], Placer]:
        """Pending groups with their topology and room positions, and the placer over the fixed bins."""
        room = RoomIndex(g.requests for g in groups)
        if self.options.efficiency_tolerance is not None:
            shape = _shape(groups)
            for pool in self.pools:
                pool.index.set_shape(shape)
        profiles = ProfileIds()
        pending = [PendingGroup(g, Preferences(g.pod, self.prefer_no_schedule, profiles)) for g in groups]
        self.topology.prepare(pending, self.fixed)
        for group in pending:
            group.room_position = room.position(group.group.requests)
        bins = [b for b, _ in self.fixed]
        for b in bins:
            room.update(b.id, b.room())
        new_claims = NewClaims(
            bins, self.signatures, self.domains, self.order, self.pool_signatures,
            efficiency_tolerance=self.options.efficiency_tolerance, claim_name=self.options.claim_name,
        )
        return pending, Placer(bins, self.signatures, self.topology, self.domains, new_claims, room)


def _shape(groups: Sequence[PodGroup]) -> float | None:
    """GiB of memory requested per vCPU over the batch (None when one side is not requested)."""
    cpu = sum(g.requests.get(CPU, 0) * g.count for g in groups) / 1000
    memory = sum(g.requests.get("memory", 0) * g.count for g in groups) / 2**30
    return memory / cpu if cpu > 0 and memory > 0 else None
