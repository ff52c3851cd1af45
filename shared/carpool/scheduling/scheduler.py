"""The batch scheduler: pending pods onto in-flight claims, existing nodes, claims opened in this batch, and
new claims from NodePools by weight.

Behaviour follows Karpenter's scheduler (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling):
pods go biggest first (cpu, then memory); each tries the bins that already exist (in-flight claims, then
existing nodes, then claims opened earlier in the batch, in that order), then a new claim from the first
NodePool (by weight) that can take it; a pod that fails has one preference relaxed and goes to the back of
the queue; the batch ends when a full pass over the queue makes no progress.

What makes it fast (no per-pod loop over claims):
- identical pods are one `PodGroup` and are placed k at a time (`podgroups.py`);
- bins are bit positions: "bins this pod group may use" is an AND of masks kept up to date incrementally
  (requirement signatures, free room per request threshold (`room.py`), hostname topology counts
  (`topology.py`)); the lowest set bit is the first fit in Karpenter's order;
- a claim's instance type options are a mask over its pool's `InstanceIndex` (`options.py`).

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
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from carpool import labels as L
from carpool.requirements import NEGATIVE, Requirement, Requirements
from carpool.resources import CPU, Resources, add
from carpool.scheduling import balance, explain, label_safety
from carpool.scheduling.claim import CLAIM, IN_FLIGHT, NODE, Bin, Signature
from carpool.scheduling.inputs import ExistingNode, InFlightClaim, PodSpec, PoolSpec
from carpool.scheduling.options import lowest_bit
from carpool.scheduling.podgroups import PodGroup, group_pods
from carpool.scheduling.pools import PoolOrder, PoolState
from carpool.scheduling.preferences import Preferences, Variant
from carpool.scheduling.result import InstanceChoice, Placement, PlannedClaim, SchedulingResult
from carpool.scheduling.room import RoomIndex
from carpool.scheduling.topology import (
    AFFINITY,
    ANTI,
    INVERSE,
    SPREAD,
    UNLIMITED,
    Owned,
    Topology,
    TopologyGroup,
)
from carpool.taints import PREFER_NO_SCHEDULE, Taint, Toleration


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
) -> SchedulingResult:
    """Plan where every pending pod goes. Pure: same inputs, same result."""
    start = time.perf_counter()
    unsafe = label_safety.unsafe_pods(pods)
    if unsafe:
        pods = [p for p in pods if p.key not in unsafe]
    result = Scheduler(pools, in_flight=in_flight, existing=existing, daemonsets=daemonsets, options=options).solve(pods)
    for key, reason in unsafe.items():
        result.unschedulable[key] = {pool.name: reason for pool in pools} or {"": reason}
    result.seconds = time.perf_counter() - start
    return result


class _VariantState:
    """Per (pod group, relaxation level): the topology constraints in force and compatibility caches."""

    __slots__ = ("variant", "host", "domain", "sig_terms")

    def __init__(self, variant: Variant, host: list[Owned], domain: dict[str, list[Owned]]) -> None:
        self.variant = variant
        self.host = host
        self.domain = domain
        self.sig_terms: dict[int, tuple[int, ...]] = {}


class _GroupState:
    """A pod group while it is being scheduled."""

    __slots__ = (
        "group", "prefs", "remaining", "next", "room_pos", "counted_by", "inverse_owned", "inverse_selecting",
        "vcache", "eligible",
    )

    def __init__(self, group: PodGroup, prefs: Preferences) -> None:
        self.group = group
        self.prefs = prefs
        self.remaining = group.count
        self.next = 0
        self.room_pos: tuple[int, ...] = ()
        self.counted_by: list[TopologyGroup] = []
        self.inverse_owned: list[TopologyGroup] = []
        self.inverse_selecting: list[Owned] = []
        self.vcache: dict[int, _VariantState] = {}
        self.eligible: dict[str, frozenset[str]] = {}

    @property
    def pod(self) -> PodSpec:
        return self.group.pod


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
    ) -> None:
        self.options = options or ScheduleOptions()
        self.pools = [PoolState(i, spec, daemonsets) for i, spec in enumerate(pools)]
        self.pool_by_name = {p.name: p for p in self.pools}
        self.order = PoolOrder(self.pools)
        self.topology = Topology()
        self.bins: list[Bin] = []
        self.sigs: list[Signature] = []
        self._sig_index: dict[tuple, Signature] = {}
        self._filter_cache: dict[tuple[int, int], bool] = {}
        self._seq: dict[str, int] = {}
        self._fixed_pods: list[tuple[Bin, Sequence[PodSpec]]] = []
        self.base_sig = {p.id: self._intern(p, p.requirements) for p in self.pools}
        for c in in_flight:
            labels = {**c.labels, L.NODEPOOL: c.labels.get(L.NODEPOOL, c.pool)}
            self._add_fixed(IN_FLIGHT, c.name, labels, c.taints, c.remaining, self.pool_by_name.get(c.pool), c.pods)
        for n in existing:
            self._add_fixed(NODE, n.name, n.labels, n.taints, n.remaining, self.pool_by_name.get(n.pool or ""), n.pods)
        self._prefer_no_schedule = any(
            t.effect == PREFER_NO_SCHEDULE for taints in [p.taints for p in self.pools] + [s.taints for s in self.sigs]
            for t in taints
        )
        self.room: RoomIndex | None = None
        self.groups: list[_GroupState] = []
        self._relaxed: dict[str, tuple[str, ...]] = {}

    # == setup ======================================================================================
    def _intern(self, pool: PoolState | None, reqs: Requirements, taints: tuple[Taint, ...] | None = None,
                labels: Mapping[str, str] | None = None) -> Signature:
        if labels is not None:
            key: tuple = ("fixed", frozenset(labels.items()), taints)
        else:
            assert pool is not None
            key = (pool.id, reqs)
        sig = self._sig_index.get(key)
        if sig is None:
            sig = Signature(len(self.sigs), pool, reqs, taints if taints is not None else pool.taints if pool else (), labels)
            self._sig_index[key] = sig
            self.sigs.append(sig)
        return sig

    def _add_fixed(self, kind: str, name: str, labels: Mapping[str, str], taints: tuple[Taint, ...],
                   remaining: Resources, pool: PoolState | None, pods: Sequence[PodSpec]) -> None:
        # an empty value for a well-known key means "not known yet" (e.g. an in-flight claim's zone)
        labels = {k: v for k, v in labels.items() if v or k not in L.WELL_KNOWN}
        host_labels = {**labels, L.HOSTNAME: labels.get(L.HOSTNAME) or name}
        sig_labels = {k: v for k, v in host_labels.items() if k != L.HOSTNAME}
        sig = self._intern(pool, Requirements.from_labels(sig_labels), tuple(taints), sig_labels)
        b = Bin(len(self.bins), name, kind, sig, pool, {}, capacity=dict(remaining))
        b.hostname = host_labels[L.HOSTNAME]
        b.ports = [hp for p in pods for hp in p.host_ports]
        sig.members |= 1 << b.id
        self.bins.append(b)
        self._fixed_pods.append((b, pods))

    def _setup(self, groups: list[PodGroup]) -> None:
        self.room = RoomIndex(g.requests for g in groups)
        if self.options.efficiency_tolerance is not None:
            shape = _shape(groups)
            for pool in self.pools:
                pool.index.set_shape(shape)
        self.groups = [_GroupState(g, Preferences(g.pod, self._prefer_no_schedule)) for g in groups]
        topo = self.topology
        for gs in self.groups:
            gs.inverse_owned = [topo.affinity(INVERSE, gs.pod.namespace, t) for t in gs.pod.anti_affinity]
        for _, pods in self._fixed_pods:
            for p in pods:
                for t in p.anti_affinity:
                    topo.affinity(INVERSE, p.namespace, t)
        for gs in self.groups:
            self._owned(gs, gs.prefs.current)
        tgs = topo.all()
        select_cache: dict[tuple, list[TopologyGroup]] = {}
        for gs in self.groups:
            selecting = self._selecting(gs.pod, tgs, select_cache)
            gs.counted_by = [tg for tg in selecting if tg.kind != INVERSE]
            gs.inverse_selecting = [Owned(tg, tg in gs.inverse_owned) for tg in selecting if tg.kind == INVERSE]
            gs.room_pos = self.room.position(gs.group.requests)
            vs = self._vstate(gs)
            for o in vs.host:
                o.group.track(o.group.host_exclusion(o.self_selecting))
        for b in self.bins:
            self.room.update(b.id, b.room())
        for b, pods in self._fixed_pods:
            for p in pods:
                for tg in self._selecting(p, tgs, select_cache):
                    if tg.kind == INVERSE:
                        continue
                    if tg.kind == SPREAD and not self._filter_ok(tg, b.sig):
                        continue
                    self._count(tg, b, 1)
                for t in p.anti_affinity:
                    self._count(topo.affinity(INVERSE, p.namespace, t), b, 1)

    @staticmethod
    def _selecting(pod: PodSpec, tgs: list[TopologyGroup], cache: dict[tuple, list[TopologyGroup]]) -> list[TopologyGroup]:
        key = (pod.namespace, frozenset(pod.labels.items()))
        got = cache.get(key)
        if got is None:
            got = cache[key] = [tg for tg in tgs if tg.selects(pod.namespace, pod.labels)]
        return got

    def _owned(self, gs: _GroupState, v: Variant) -> list[Owned]:
        pod, topo = gs.pod, self.topology
        ns, labels = pod.namespace, pod.labels
        out: list[Owned] = []
        node_filter = v.strict_terms if pod.requirements else ()
        for s in v.spreads:
            tg = topo.spread(ns, s, node_filter)
            out.append(Owned(tg, tg.selects(ns, labels)))
        for term in v.affinity:
            tg = topo.affinity(AFFINITY, ns, term)
            out.append(Owned(tg, tg.selects(ns, labels)))
        for term in v.anti_affinity:
            tg = topo.affinity(ANTI, ns, term)
            out.append(Owned(tg, tg.selects(ns, labels)))
        return out

    def _vstate(self, gs: _GroupState) -> _VariantState:
        v = gs.prefs.current
        vs = gs.vcache.get(v.id)
        if vs is None:
            host: list[Owned] = []
            domain: dict[str, list[Owned]] = {}
            for o in self._owned(gs, v) + gs.inverse_selecting:
                if o.group.hostname:
                    host.append(o)
                else:
                    domain.setdefault(o.group.key, []).append(o)
            vs = gs.vcache[v.id] = _VariantState(v, host, domain)
        return vs

    # == main loop ==================================================================================
    def solve(self, pods: Sequence[PodSpec]) -> SchedulingResult:
        """Constrained groups first (Karpenter's order and queue), then the free ones (balanced), then
        everything still pending once more (e.g. pods whose affinity targets were just placed)."""
        groups, opted_out = group_pods(pods)
        self._setup(groups)
        free = [gs for gs in self.groups if balance.is_free(gs)]
        self._run_queue([gs for gs in self.groups if not balance.is_free(gs)])
        balance.place_free(self, free)
        self._run_queue([gs for gs in self.groups if gs.remaining])
        return self._result(opted_out)

    def _run_queue(self, groups: list[_GroupState]) -> None:
        """Karpenter's queue: a group that cannot be (fully) placed relaxes one preference and goes to the
        back; stop when a whole pass over the queue changes nothing."""
        queue = deque(groups)
        stale = 0
        while queue and stale < len(queue):
            gs = queue.popleft()
            placed = self._place(gs)
            if gs.remaining == 0:
                stale = 0
                continue
            relaxed = gs.prefs.relax() is not None
            stale = 0 if placed or relaxed else stale + 1
            queue.append(gs)

    def _place(self, gs: _GroupState) -> int:
        """Place as many pods of the group as the current constraints allow; returns how many."""
        vs = self._vstate(gs)
        placed = 0
        rejected = 0
        bins = self.bins
        while gs.remaining > 0:
            allowed = self._allowed(gs, vs) if vs.domain else None
            if allowed is not None and not all(allowed.values()):
                break
            cand = self._candidates(gs, vs, allowed) & ~rejected
            k = 0
            while cand:
                low = cand & -cand
                k = self._try_bin(gs, vs, bins[low.bit_length() - 1], allowed)
                if k:
                    break
                rejected |= low
                cand ^= low
            if not k:
                k = self._open_claim(gs, vs, allowed)
                if not k:
                    break
            placed += k
        return placed

    # == constraints ================================================================================
    def _allowed(self, gs: _GroupState, vs: _VariantState) -> dict[str, dict[str, int]]:
        """For each non-hostname topology key: the domains the group may use now, with budgets."""
        out: dict[str, dict[str, int]] = {}
        for key, owned in vs.domain.items():
            eligible = self._eligible(gs, key)
            cur: dict[str, int] | None = None
            for o in owned:
                a = o.group.allowed(eligible, o.self_selecting)
                cur = a if cur is None else {d: min(b, a[d]) for d, b in cur.items() if d in a}
            out[key] = cur or {}
        return out

    def _eligible(self, gs: _GroupState, key: str) -> frozenset[str]:
        """Domains of `key` the pod could ever use (its required terms against pools and fixed bins)."""
        got = gs.eligible.get(key)
        if got is not None:
            return got
        terms = gs.prefs.current.strict_terms
        doms: set[str] = set()
        for pool in self.pools:
            for term in terms:
                if pool.requirements.compatible(term, L.WELL_KNOWN) is not None:
                    continue
                reqs = pool.requirements.merge(term)
                doms |= pool.index.domains(key, pool.index.compatible_mask(reqs), reqs)
        for sig in self.sigs:
            labels = sig.labels
            if labels is not None and key in labels and any(t.satisfied_by(labels) is None for t in terms):
                doms.add(labels[key])
        got = gs.eligible[key] = frozenset(doms)
        return got

    def _blocking_taint(self, taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
        for t in taints:
            if not any(tol.tolerates(t) for tol in tolerations):
                return t
        return None

    def _sig_terms(self, vs: _VariantState, sig: Signature) -> tuple[int, ...]:
        """Indices of the variant's node-affinity terms compatible with a signature (cached)."""
        got = vs.sig_terms.get(sig.id)
        if got is not None:
            return got
        v = vs.variant
        out: list[int] = []
        if self._blocking_taint(sig.taints, v.tolerations) is None:
            for i, term in enumerate(v.terms):
                if sig.labels is not None:
                    if _satisfied_except_hostname(term, sig.labels):
                        out.append(i)
                elif (_claimable(term) and sig.requirements.compatible(term, L.WELL_KNOWN) is None
                      and self._narrow_term(sig, vs, i) is not None):
                    out.append(i)
        got = vs.sig_terms[sig.id] = tuple(out)
        return got

    def _narrow_term(self, sig: Signature, vs: _VariantState, i: int) -> Signature | None:
        key = ("t", vs.variant.id, i)
        if key in sig.narrowed:
            return sig.narrowed[key]
        term = vs.variant.terms[i]
        assert sig.pool is not None
        out: Signature | None = None
        if sig.requirements.compatible(term, L.WELL_KNOWN) is None:
            n = self._intern(sig.pool, sig.requirements.merge(term))
            out = n if n.type_mask else None
        sig.narrowed[key] = out
        return out

    def _narrow_domain(self, sig: Signature, key: str, domain: str) -> Signature | None:
        ck = ("d", key, domain)
        if ck in sig.narrowed:
            return sig.narrowed[ck]
        assert sig.pool is not None
        n = self._intern(sig.pool, sig.requirements.add(Requirement.in_(key, domain)))
        out = n if n.type_mask else None
        sig.narrowed[ck] = out
        return out

    def _domain_choices(self, sig: Signature, allowed: dict[str, dict[str, int]] | None,
                        vs: _VariantState) -> Iterator[tuple[Signature, int]]:
        """Signatures narrowed to one allowed domain per constrained key, best first, with budgets."""
        if not allowed:
            yield sig, UNLIMITED
            return
        yield from self._choose(sig, list(allowed.items()), vs, UNLIMITED)

    def _choose(self, sig: Signature, keys: list[tuple[str, dict[str, int]]], vs: _VariantState,
                budget: int) -> Iterator[tuple[Signature, int]]:
        if not keys:
            yield sig, budget
            return
        (key, allowed), rest = keys[0], keys[1:]
        possible = sig.domains(key)
        doms = [d for d in possible if d in allowed]
        if not doms:
            return
        if len(possible) == 1:
            yield from self._choose(sig, rest, vs, min(budget, allowed[doms[0]]))
            return
        owned = vs.domain[key]
        doms.sort(key=lambda d: (sum(o.group.count(d) for o in owned), d))
        for d in doms:
            n = self._narrow_domain(sig, key, d)
            if n is not None:
                yield from self._choose(n, rest, vs, min(budget, allowed[d]))

    def _candidates(self, gs: _GroupState, vs: _VariantState, allowed: dict[str, dict[str, int]] | None) -> int:
        """Bins that may take a pod of the group, judged by signature, room and hostname topology."""
        mask = 0
        for sig in self.sigs:
            if not sig.members:
                continue
            terms = vs.sig_terms.get(sig.id)
            if terms is None:
                terms = self._sig_terms(vs, sig)
            if not terms:
                continue
            if allowed and any(sig.domains(key).isdisjoint(doms) for key, doms in allowed.items()):
                continue
            mask |= sig.members
        if not mask:
            return 0
        assert self.room is not None
        mask &= self.room.candidates(gs.room_pos)
        for o in vs.host:
            tg = o.group
            t = tg.host_exclusion(o.self_selecting)
            if t:
                mask &= ~tg.at_least[t]
            elif tg.kind == AFFINITY:
                occupied = tg.at_least[1]
                if occupied:
                    mask &= occupied
                elif not o.self_selecting:
                    return 0
        return mask

    # == placing ====================================================================================
    def _host_cap(self, gs: _GroupState, vs: _VariantState, b: Bin | None, limit: int | None = None) -> int:
        cap = gs.remaining if limit is None else min(gs.remaining, limit)
        if gs.pod.host_ports:
            cap = 1
        for o in vs.host:
            c = o.group.host_budget(b.id, o.self_selecting) if b is not None else o.group.new_host_budget(o.self_selecting)
            if c < cap:
                cap = c
        return cap

    def _try_bin(self, gs: _GroupState, vs: _VariantState, b: Bin, allowed: dict[str, dict[str, int]] | None,
                 limit: int | None = None) -> int:
        """Place up to `limit` (default: all remaining) pods of the group on bin b; returns how many."""
        pod = gs.pod
        if pod.host_ports and b.port_conflict(pod.host_ports):
            return 0
        cap = self._host_cap(gs, vs, b, limit)
        if cap <= 0:
            return 0
        req = gs.group.requests
        sig = b.sig
        for i in self._sig_terms(vs, sig):
            if b.capacity is not None:
                host_req = vs.variant.terms[i].get(L.HOSTNAME)
                if host_req is not None and not host_req.has(b.hostname):
                    continue
                for dsig, dcap in self._domain_choices(sig, allowed, vs):
                    k = _fixed_fit(b.capacity, b.used, req, min(cap, dcap))
                    if k:
                        self._commit(gs, vs, b, dsig, 0, k)
                        return k
                continue
            nsig = self._narrow_term(sig, vs, i)
            if nsig is None:
                continue
            for dsig, dcap in self._domain_choices(nsig, allowed, vs):
                opts = b.options & dsig.type_mask
                if not opts & b.cap:
                    continue
                assert b.pool is not None
                k, _ = self._max_fit(b.pool, b.used, opts & b.cap, req, min(cap, dcap))
                if k:
                    self._commit(gs, vs, b, dsig, self._remaining_options(b.pool, b.used, opts, req, k), k)
                    return k
        return 0

    @staticmethod
    def _remaining_options(pool: PoolState, used: Resources, opts: int, req: Resources, k: int) -> int:
        total = dict(used)
        for r, v in req.items():
            total[r] = total.get(r, 0) + k * v
        return opts & pool.index.fit_mask(total)

    def _open_claim(self, gs: _GroupState, vs: _VariantState, allowed: dict[str, dict[str, int]] | None,
                    limit: int | None = None) -> int:
        """Open a claim in the first pool (by priority) that can take the group; returns pods placed."""
        cap = self._host_cap(gs, vs, None, limit)
        if cap <= 0:
            return 0
        req = gs.group.requests
        for pool in self.order:
            base = self.base_sig[pool.id]
            terms = self._sig_terms(vs, base)
            if not terms:
                continue
            limit_mask, _ = pool.limits.allowed(pool.index)
            first = limit_mask & pool.index.fit_mask(add(pool.overhead, req)) if limit_mask else 0
            if not first:
                continue
            for i in terms:
                nsig = self._narrow_term(base, vs, i)
                if nsig is None:
                    continue
                for dsig, dcap in self._domain_choices(nsig, allowed, vs):
                    opts = self._tier(pool, dsig.type_mask & first)
                    if not opts:
                        continue
                    grow = self._efficient(pool, opts)
                    k, _ = self._max_fit(pool, pool.overhead, grow, req, min(cap, dcap))
                    if not k:
                        continue
                    b = self._new_claim(pool, dsig, opts)
                    b.cap = grow
                    self._commit(gs, vs, b, dsig, self._remaining_options(pool, pool.overhead, opts, req, k), k)
                    return k
        return 0

    def _efficient(self, pool: PoolState, opts: int) -> int:
        """The options a new claim may grow into (see `ScheduleOptions.efficiency_tolerance`)."""
        tolerance = self.options.efficiency_tolerance
        if tolerance is None:
            return opts
        grow = pool.index.efficient(opts, tolerance)
        if pool.min_values and not self._min_values_ok(pool, grow):
            return opts
        return grow

    def _tier(self, pool: PoolState, opts: int) -> int:
        """Restrict a new claim to the best preference tier that still has a fitting, offered option."""
        if pool.tiers is None:
            return opts if self._min_values_ok(pool, opts) else 0
        for tier in pool.tiers:
            o = opts & tier
            if o and self._min_values_ok(pool, o):
                return o
        return 0

    @staticmethod
    def _min_values_ok(pool: PoolState, opts: int) -> bool:
        return all(pool.index.distinct_values(opts, key, n) >= n for key, n in pool.min_values.items())

    def _max_fit(self, pool: PoolState, used: Resources, opts: int, req: Resources, cap: int) -> tuple[int, int]:
        """Most pods (<= cap) of size `req` that some option can hold on top of `used`, and the options left."""
        index = pool.index
        ub = cap
        for r, v in req.items():
            q = (index.max_allocatable(opts, r) - used.get(r, 0)) // v
            if q < ub:
                ub = q
                if ub <= 0:
                    return 0, 0
        m = self._fits(pool, used, opts, req, ub)
        if m:
            return ub, m
        best = self._fits(pool, used, opts, req, 1)
        if not best:
            return 0, 0
        lo, hi = 1, ub
        while hi - lo > 1:
            mid = (lo + hi) // 2
            m = self._fits(pool, used, opts, req, mid)
            if m:
                lo, best = mid, m
            else:
                hi = mid
        return lo, best

    def _fits(self, pool: PoolState, used: Resources, opts: int, req: Resources, k: int) -> int:
        total = dict(used)
        for r, v in req.items():
            total[r] = total.get(r, 0) + k * v
        m = opts & pool.index.fit_mask(total)
        if m and pool.min_values and not self._min_values_ok(pool, m):
            return 0
        return m

    def _new_claim(self, pool: PoolState, sig: Signature, opts: int) -> Bin:
        seq = self._seq.get(pool.name, 0) + 1
        self._seq[pool.name] = seq
        namer = self.options.claim_name
        name = namer(pool.name, seq) if namer else f"{pool.name}-{seq:04d}"
        b = Bin(len(self.bins), name, CLAIM, sig, pool, dict(pool.overhead), options=opts, seq=seq)
        self.bins.append(b)
        sig.members |= 1 << b.id
        if pool.split_share:
            pool.split_amount += 1 if pool.split_by == "nodes" else 0
        return b

    def _commit(self, gs: _GroupState, vs: _VariantState, b: Bin, sig: Signature, options: int, k: int) -> None:
        for r, v in gs.group.requests.items():
            b.used[r] = b.used.get(r, 0) + k * v
        if b.capacity is None:
            b.options = options
        if sig is not b.sig:
            bit = 1 << b.id
            b.sig.members &= ~bit
            sig.members |= bit
            b.sig = sig
            self._flush_pending(b)
        if gs.pod.host_ports:
            b.ports.extend(gs.pod.host_ports)
        self._assign(gs, vs, b, k)
        self._changed(b)
        self._record(gs, b, k)

    def _record(self, gs: _GroupState, b: Bin, k: int) -> None:
        """Count k pods of the group on bin b in every topology group that selects them."""
        sig = b.sig
        for tg in gs.counted_by:
            if tg.kind == SPREAD and tg.node_filter and not self._filter_ok(tg, sig):
                continue
            self._count(tg, b, k)
        for tg in gs.inverse_owned:
            self._count(tg, b, k)

    def _assign(self, gs: _GroupState, vs: _VariantState, b: Bin, k: int) -> None:
        """Hand the group's next k pod keys to the bin."""
        keys = gs.group.keys[gs.next : gs.next + k]
        gs.next += k
        gs.remaining -= k
        b.pods.extend(keys)
        b.placements.append((gs.group.id, k))
        if vs.variant.relaxed:
            for key in keys:
                self._relaxed[key] = vs.variant.relaxed

    def _changed(self, b: Bin) -> None:
        """Refresh what depends on a bin's usage: the room index, the pool's limit charge, split counts."""
        assert self.room is not None
        self.room.update(b.id, b.room())
        pool = b.pool
        if pool is not None and b.capacity is None:
            pool.limits.charge(b.id, pool.index, b.options)
            if pool.split_share and pool.split_by == "cpu":
                self._recount_split_cpu(b)

    def _place_mix(self, b: Bin, items: list[tuple[_GroupState, int]]) -> bool:
        """Place several free groups on a bin in one step (no topology, no requirement narrowing);
        False (nothing placed) when the mix does not fit or a group would narrow the bin."""
        total = dict(b.used)
        for gs, k in items:
            vs = self._vstate(gs)
            if gs.pod.host_ports or k > gs.remaining:
                return False
            terms = self._sig_terms(vs, b.sig)
            if not terms:
                return False
            if b.capacity is None and self._narrow_term(b.sig, vs, terms[0]) is not b.sig:
                return False
            for r, v in gs.group.requests.items():
                total[r] = total.get(r, 0) + k * v
        if b.capacity is not None:
            if any(v > b.capacity.get(r, 0) for r, v in total.items() if v > 0):
                return False
            options = 0
        else:
            assert b.pool is not None
            options = b.options & b.pool.index.fit_mask(total)
            grow = options & b.cap
            if not grow or (b.pool.min_values and not self._min_values_ok(b.pool, grow)):
                return False
        b.used = total
        if b.capacity is None:
            b.options = options
        for gs, k in items:
            if k:
                self._assign(gs, self._vstate(gs), b, k)
                self._record(gs, b, k)
        self._changed(b)
        return True

    def _recount_split_cpu(self, b: Bin) -> None:
        assert b.pool is not None
        i = lowest_bit(b.options)
        cpu = b.pool.index.types[i].allocatable.get(CPU, 0)
        b.pool.split_amount += cpu - b.split_cpu
        b.split_cpu = cpu

    def _filter_ok(self, tg: TopologyGroup, sig: Signature) -> bool:
        key = (tg.id, sig.id)
        got = self._filter_cache.get(key)
        if got is None:
            if sig.labels is not None:
                got = tg.filter_matches_labels(sig.labels)
            else:
                got = tg.filter_matches_requirements(sig.requirements)
            self._filter_cache[key] = got
        return got

    def _count(self, tg: TopologyGroup, b: Bin, k: int) -> None:
        if tg.hostname:
            tg.add_host(b.id, k)
            return
        doms = b.sig.domains(tg.key)
        if len(doms) == 1:
            tg.add(next(iter(doms)), k)
        elif tg.kind in (ANTI, INVERSE):
            for d in doms:
                tg.add(d, k)
        elif doms:
            b.pending.append((tg, k))

    def _flush_pending(self, b: Bin) -> None:
        if not b.pending:
            return
        keep = []
        for tg, k in b.pending:
            doms = b.sig.domains(tg.key)
            if len(doms) == 1:
                tg.add(next(iter(doms)), k)
            else:
                keep.append((tg, k))
        b.pending = keep

    # == result =====================================================================================
    def _result(self, opted_out: list[str]) -> SchedulingResult:
        result = SchedulingResult(opted_out=sorted(opted_out), relaxed=dict(self._relaxed))
        ordered_cache: dict[int, list[tuple[int, InstanceChoice]]] = {}
        limit = self.options.max_instance_types
        for b in self.bins:
            if not b.pods:
                continue
            if b.capacity is not None:
                for key in b.pods:
                    result.placements[key] = Placement(b.kind, b.name)
                continue
            result.claims.append(self._planned(b, ordered_cache, limit))
            for key in b.pods:
                result.placements[key] = Placement(CLAIM, b.name)
        for gs in self.groups:
            if gs.remaining:
                reasons = explain.reasons(self, gs)
                for key in gs.group.keys[gs.next :]:
                    result.unschedulable[key] = reasons
        return result

    def _planned(self, b: Bin, cache: dict[int, list[tuple[int, InstanceChoice]]], limit: int | None) -> PlannedClaim:
        sig, pool = b.sig, b.pool
        assert pool is not None
        ordered = cache.get(sig.id)
        if ordered is None:
            ordered = []
            mask = sig.type_mask
            i = 0
            while mask:
                if mask & 1:
                    p = pool.index.price(i, sig.requirements)
                    if p is not None:
                        ordered.append((i, InstanceChoice(pool.index.types[i].name, p[0], p[1], p[2])))
                mask >>= 1
                i += 1
            ordered.sort(key=lambda t: (t[1].price, t[1].name))
            cache[sig.id] = ordered
        choices = []
        for i, choice in ordered:
            if b.options >> i & 1:
                choices.append(choice)
                if limit is not None and len(choices) >= limit:
                    break
        zones = sig.domains(L.ZONE)
        cts = sig.domains(L.CAPACITY_TYPE)
        ct = next(iter(cts)) if len(cts) == 1 else (choices[0].capacity_type if choices else None)
        return PlannedClaim(
            name=b.name,
            pool=pool.name,
            instance_types=tuple(choices),
            option_count=bin(b.options).count("1"),
            requirements=sig.requirements,
            requests=dict(b.used),
            pods=tuple(b.pods),
            taints=pool.taints,
            startup_taints=pool.spec.startup_taints,
            zone=next(iter(zones)) if len(zones) == 1 else None,
            capacity_type=ct,
        )


def _shape(groups: Sequence[PodGroup]) -> float | None:
    """GiB of memory requested per vCPU over the batch (None when one side is not requested)."""
    cpu = sum(g.requests.get(CPU, 0) * g.count for g in groups) / 1000
    memory = sum(g.requests.get("memory", 0) * g.count for g in groups) / 2**30
    return memory / cpu if cpu > 0 and memory > 0 else None


def _satisfied_except_hostname(term: Requirements, labels: Mapping[str, str]) -> bool:
    for key, r in term.items():
        if key == L.HOSTNAME:
            continue
        value = labels.get(key)
        if value is None:
            if r.operator in NEGATIVE and r.gt is None and r.lt is None:
                continue
            return False
        if not r.has(value):
            return False
    return True


def _claimable(term: Requirements) -> bool:
    """A term naming specific hostnames can only match an existing node, never a new claim."""
    r = term.get(L.HOSTNAME)
    return r is None or r.operator in NEGATIVE


def _fixed_fit(capacity: Resources, used: Resources, req: Resources, cap: int) -> int:
    k = cap
    for r, v in req.items():
        q = (capacity.get(r, 0) - used.get(r, 0)) // v
        if q < k:
            k = q
    return max(k, 0)
