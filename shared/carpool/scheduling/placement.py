"""Placing a pod group: onto the bins that already exist, else onto a new claim from the first pool that
can take it.

Why it is fast (no per-pod loop over claims): a group is placed k pods at a time, and "bins this group
may use" is an AND of bit masks kept up to date incrementally: the members of every compatible
signature, the bins with room for the request (`room.py`) and the bins hostname topology still allows
(`topologygroup.py`). The lowest set bit is the first fit in Karpenter's order (initialized nodes, then
uninitialized nodes and in-flight claims, then claims in the order they were opened); a bin that refuses the group is masked out for the
rest of the call. When no bin takes the group, `newclaim.py` opens a claim for it.
"""

from __future__ import annotations

from carpool import labels as L
from carpool.resources import CPU
from carpool.scheduling.bitmask import lowest_bit
from carpool.scheduling.claim import Bin, fixed_fit, max_fit, min_values_ok, options_after
from carpool.scheduling.compatibility import compatible_terms
from carpool.scheduling.domains import Allowed, Domains
from carpool.scheduling.newclaim import NewClaims
from carpool.scheduling.pending import ActiveConstraints, PendingGroup
from carpool.scheduling.room import RoomIndex
from carpool.scheduling.signature import Signature, SignatureRegistry
from carpool.scheduling.topology import Topology
from carpool.scheduling.topologygroup import AFFINITY


class Placer:
    """Places pod groups on the batch's bins, opening claims as needed; records what it relaxed."""

    def __init__(
        self,
        bins: list[Bin],
        signatures: SignatureRegistry,
        topology: Topology,
        domains: Domains,
        new_claims: NewClaims,
        room: RoomIndex,
    ) -> None:
        self.bins = bins  # shared with `new_claims`, which appends the claims it opens
        self.signatures = signatures
        self.topology = topology
        self.domains = domains
        self.new_claims = new_claims
        self.room = room
        self.relaxed: dict[str, tuple[str, ...]] = {}  # pod key -> the preferences relaxed to place it

    def place(self, pending: PendingGroup) -> int:
        """Place as many pods of the group as its current constraints allow; returns how many."""
        active = self.topology.active(pending)
        placed = 0
        rejected = 0
        bins = self.bins
        try_bin = self.try_bin
        while pending.remaining > 0:
            allowed = self.domains.allowed(pending, active) if active.domain_constraints else None
            if allowed is not None and not all(allowed.values()):
                break
            candidates = self.candidates(pending, active, allowed) & ~rejected
            k = 0
            while candidates:
                low = candidates & -candidates
                k = try_bin(pending, active, bins[low.bit_length() - 1], allowed)
                if k:
                    break
                rejected |= low
                candidates ^= low
            if not k:
                k = self.open_claim(pending, active, allowed)
                if not k:
                    break
            placed += k
        return placed

    def candidates(self, pending: PendingGroup, active: ActiveConstraints, allowed: Allowed | None) -> int:
        """Bins that may take a pod of the group, judged by signature, room and hostname topology."""
        mask = 0
        signatures = self.signatures
        cached = active.terms_by_signature
        for signature in signatures.all:
            if not signature.members:
                continue
            terms = cached.get(signature.id)
            if terms is None:
                terms = compatible_terms(active, signature, signatures)
            if not terms:
                continue
            if allowed and any(signature.domains(key).isdisjoint(doms) for key, doms in allowed.items()):
                continue
            mask |= signature.members
        if not mask:
            return 0
        mask &= self.room.candidates(pending.room_position)
        for c in active.hostname_constraints:
            group = c.group
            threshold = group.host_exclusion(c.self_selecting)
            if threshold:
                mask &= ~group.at_least[threshold]
            elif group.kind == AFFINITY:
                occupied = group.at_least[1]
                if occupied:
                    mask &= occupied
                elif not c.self_selecting:
                    return 0
        return mask

    @staticmethod
    def host_cap(pending: PendingGroup, active: ActiveConstraints, target: Bin | None,
                 limit: int | None = None) -> int:
        """Most pods of the group one bin (None: a new one) may take under hostname topology and ports."""
        cap = pending.remaining if limit is None else min(pending.remaining, limit)
        if pending.pod.host_ports:
            cap = 1
        for c in active.hostname_constraints:
            if target is None:
                n = c.group.new_host_budget(c.self_selecting)
            else:
                n = c.group.host_budget(target.id, c.self_selecting)
            if n < cap:
                cap = n
        return cap

    def try_bin(self, pending: PendingGroup, active: ActiveConstraints, target: Bin, allowed: Allowed | None,
                limit: int | None = None) -> int:
        """Place up to `limit` (default: all remaining) pods of the group on the target bin; returns how
        many."""
        pod = pending.pod
        if pod.host_ports and target.port_conflict(pod.host_ports):
            return 0
        cap = self.host_cap(pending, active, target, limit)
        if cap <= 0:
            return 0
        request = pending.group.requests
        signature = target.signature
        choices = self.domains.choices
        for i in compatible_terms(active, signature, self.signatures):
            if target.capacity is not None:
                hostname = active.variant.terms[i].get(L.HOSTNAME)
                if hostname is not None and not hostname.has(target.hostname):
                    continue
                for narrowed, budget in choices(signature, allowed, active):
                    k = fixed_fit(target.capacity, target.used, request, min(cap, budget))
                    if k:
                        self._commit(pending, active, target, narrowed, 0, k)
                        return k
                continue
            by_term = self.signatures.narrowed_by_term(signature, active.variant, i)
            if by_term is None:
                continue
            pool = target.pool
            assert pool is not None
            for narrowed, budget in choices(by_term, allowed, active):
                options = target.options & narrowed.type_mask
                if not options & target.growth_options:
                    continue
                k, _ = max_fit(pool, target.used, options & target.growth_options, request, min(cap, budget))
                if k:
                    after = options_after(pool, target.used, options, request, k)
                    self._commit(pending, active, target, narrowed, after, k)
                    return k
        return 0

    def open_claim(self, pending: PendingGroup, active: ActiveConstraints, allowed: Allowed | None,
                   limit: int | None = None) -> int:
        """Open a claim in the first pool (by priority) that can take the group; returns pods placed."""
        cap = self.host_cap(pending, active, None, limit)
        if cap <= 0:
            return 0
        opened = self.new_claims.open(pending.group.requests, active, allowed, cap, pending.pod.host_ports)
        if opened is None:
            return 0
        claim, k, options = opened
        self._commit(pending, active, claim, claim.signature, options, k)
        return k

    def place_mix(self, target: Bin, items: list[tuple[PendingGroup, int]]) -> bool:
        """Place several unconstrained groups on a bin in one step (no topology, no requirement
        narrowing); False (nothing placed) when the mix does not fit or a group would narrow the bin."""
        total = dict(target.used)
        active_of = self.topology.active
        for pending, k in items:
            active = active_of(pending)
            if pending.pod.host_ports or k > pending.remaining:
                return False
            terms = compatible_terms(active, target.signature, self.signatures)
            if not terms:
                return False
            if target.capacity is None:
                narrowed = self.signatures.narrowed_by_term(target.signature, active.variant, terms[0])
                if narrowed is not target.signature:
                    return False
            for r, v in pending.group.requests.items():
                total[r] = total.get(r, 0) + k * v
        if target.capacity is not None:
            if any(v > target.capacity.get(r, 0) for r, v in total.items() if v > 0):
                return False
            options = 0
        else:
            pool = target.pool
            assert pool is not None
            options = target.options & pool.index.fit_mask(total)
            grow = options & target.growth_options
            if not grow or (pool.min_values and not min_values_ok(pool, grow)):
                return False
        target.used = total
        if target.capacity is None:
            target.options = options
        for pending, k in items:
            if k:
                self.assign(pending, active_of(pending), target, k)
                self.topology.record(pending, target, k)
        self.refresh(target)
        return True

    def _commit(self, pending: PendingGroup, active: ActiveConstraints, target: Bin, signature: Signature,
                options: int, k: int) -> None:
        """Put k pods of the group on the target bin, moving it to `signature` (narrowed by them)."""
        for r, v in pending.group.requests.items():
            target.used[r] = target.used.get(r, 0) + k * v
        if target.capacity is None:
            target.options = options
        if signature is not target.signature:
            bit = 1 << target.id
            target.signature.members &= ~bit
            signature.members |= bit
            target.signature = signature
            self.topology.flush_pending(target)
        if pending.pod.host_ports:
            target.ports.extend(pending.pod.host_ports)
        self.assign(pending, active, target, k)
        self.refresh(target)
        self.topology.record(pending, target, k)

    def assign(self, pending: PendingGroup, active: ActiveConstraints, target: Bin, count: int) -> None:
        """Hand the group's next `count` pod keys to the bin (resources and counts are the caller's)."""
        start = pending.next_key
        keys = pending.group.keys[start : start + count]
        pending.next_key = start + count
        pending.remaining -= count
        target.pods.extend(keys)
        relaxed = active.variant.relaxed
        if relaxed:
            for key in keys:
                self.relaxed[key] = relaxed

    def refresh(self, target: Bin) -> None:
        """Refresh what depends on a bin's usage: the room index, the pool's limit charge, split counts."""
        self.room.update(target.id, target.room())
        pool = target.pool
        if pool is not None and target.capacity is None:
            pool.limits.charge(target.id, pool.index, target.options)
            if pool.split_share and pool.split_by == "cpu":
                cpu = pool.index.types[lowest_bit(target.options)].allocatable.get(CPU, 0)
                pool.split_amount += cpu - target.split_cpu
                target.split_cpu = cpu
