"""Balanced filling for unconstrained pods: keep nodes full in cpu *and* memory.

Why: Karpenter's order (biggest cpu first, first fit) fills the first nodes with cpu-heavy pods (their cpu
saturates, memory is stranded) and the last ones with memory-heavy pods (the reverse). On Karpenter's own
pod mix and a catalog priced per vCPU and per GB that costs 27-45 % above the lower bound.

Pods that take part in no topology rule can go anywhere their requirements allow, so after the
constrained pods are placed (in Karpenter's order), carpool places these bin by bin - in-flight claims,
existing nodes, claims already open, then new claims seeded with the biggest pod left:
1. the bin's *target* is, for a claim, its option that is cheapest per unit of the remaining free
   demand's shape (GiB per vCPU); growing past it onto a bigger, less efficient type costs more than a
   second node;
2. the bin takes a *mix*: the same fraction alpha of every relatively cpu-heavy shape and beta of every
   memory-heavy one, alpha and beta solved so the mix fills the target's cpu and memory together;
3. what rounding left is topped up greedily: the shape whose normalized request best matches the free
   room (the dot-product heuristic of vector bin packing), a quarter of what fits at a time.

"Unconstrained" (`is_free`) = no topology spread, no pod (anti-)affinity (required or preferred), no host
ports, no preferred node affinity, not the target of anyone's pod affinity or required anti-affinity.
Node selectors, required node affinity and tolerations are fine: they are checked per bin as usual, and
placements are counted in every topology group that selects the pods. Pods left over go through the
normal queue afterwards (relaxation, explanations), with every other group still pending.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from carpool.resources import CPU, MEMORY, PODS
from carpool.scheduling.claim import Bin
from carpool.scheduling.compatibility import compatible_terms
from carpool.scheduling.pending import PendingGroup
from carpool.scheduling.placement import Placer
from carpool.scheduling.topologygroup import AFFINITY

CHUNK = 4  # greedy top-up adds a quarter of what fits, then looks again
TARGET_TOLERANCE = 0.02  # options this close to the most efficient count as equally good (take the biggest)
GIB = 2**30


def is_free(group: PendingGroup) -> bool:
    """Whether a pod group has no placement rule of its own beyond node affinity and tolerations.

    It may still be *counted* by other pods' spreads or preferred anti-affinity (those rules bind the
    pods that declare them, which were placed first), but not be the target of someone's pod affinity
    (those pods need it placed first, in Karpenter's order) nor of a required anti-affinity (that binds
    it too: anti-affinity is symmetric).
    """
    pod = group.pod
    if (pod.spread or pod.affinity or pod.anti_affinity or pod.preferred_affinity or pod.preferred_anti_affinity
            or pod.host_ports or pod.preferred_node_affinity):
        return False
    return not group.inverse_selecting and not any(tg.kind == AFFINITY for tg in group.counted_by)


@dataclass(eq=False)
class _Shape:
    """Free groups that differ only in labels/namespace: interchangeable for this phase."""

    groups: list[PendingGroup]
    cpu: int
    memory: int
    left: int = 0
    failed: bool = False
    verdicts: dict[int, bool] = field(default_factory=dict)  # signature id -> compatible
    rejected_by: set[int] = field(default_factory=set)  # bin ids that refused it

    def recount(self) -> None:
        self.left = sum(g.remaining for g in self.groups)


class _Filler:
    """The free phase over one scheduler."""

    def __init__(self, placer: Placer, groups: list[PendingGroup]) -> None:
        self.placer = placer
        by_key: dict[tuple, _Shape] = {}
        for group in groups:
            req = group.group.requests
            key = (frozenset(req.items()), group.pod.requirements, group.pod.tolerations)
            shape = by_key.get(key)
            if shape is None:
                shape = by_key[key] = _Shape([], req.get(CPU, 0), req.get(MEMORY, 0))
            shape.groups.append(group)
        self.shapes = sorted(by_key.values(), key=lambda sh: (-sh.cpu, -sh.memory))
        for sh in self.shapes:
            sh.recount()

    # -- driver -----------------------------------------------------------------------------------
    def run(self) -> None:
        placer = self.placer
        active = placer.topology.active
        for b in list(placer.bins):
            self.fill(b)
        while True:
            seed = next((sh for sh in self.shapes if sh.left and not sh.failed), None)
            if seed is None:
                return
            before = len(placer.bins)
            opened = any(placer.open_claim(g, active(g), None, limit=1) for g in seed.groups if g.remaining)
            seed.recount()
            if not opened:
                seed.failed = True
                continue
            for b in placer.bins[before:]:
                self.fill(b)

    def fill(self, b: Bin) -> None:
        usable = self._usable(b)
        if not usable:
            return
        ratio = _ratio(usable)
        self._proportional(b, usable, ratio)
        self._greedy(b, ratio)

    # -- helpers ----------------------------------------------------------------------------------
    def _usable(self, b: Bin) -> list[_Shape]:
        out = []
        for sh in self.shapes:
            if not sh.left or sh.failed or b.id in sh.rejected_by:
                continue
            ok = sh.verdicts.get(b.signature.id)
            if ok is None:
                placer = self.placer
                active = placer.topology.active(sh.groups[0])
                ok = sh.verdicts[b.signature.id] = bool(compatible_terms(active, b.signature, placer.signatures))
            if ok:
                out.append(sh)
        return out

    def _room(self, b: Bin, ratio: float | None) -> dict[str, int]:
        """Free room towards the bin's target (see module docstring)."""
        if b.capacity is not None or b.pool is None:
            return b.room()
        index = b.pool.index
        target = index.largest(index.efficient(b.options & b.growth_options, TARGET_TOLERANCE, ratio))
        alloc = index.types[target].allocatable
        return {r: alloc.get(r, 0) - b.used.get(r, 0) for r in (CPU, MEMORY, PODS)}

    def _proportional(self, b: Bin, usable: list[_Shape], ratio: float | None) -> None:
        """The mix step: alpha of the cpu-heavy shapes, beta of the memory-heavy ones."""
        room = self._room(b, ratio)
        t_cpu, t_mem, t_pods = room.get(CPU, 0), room.get(MEMORY, 0), room.get(PODS, 0)
        usable = [sh for sh in usable if sh.cpu <= t_cpu and sh.memory <= t_mem]
        if not usable or t_pods < 1:
            return
        low = [sh for sh in usable if sh.memory * t_cpu < t_mem * sh.cpu]  # relatively cpu-heavy
        high = [sh for sh in usable if not sh.memory * t_cpu < t_mem * sh.cpu]
        lows, highs = _totals(low), _totals(high)
        both = _fractions(lows, highs, (t_cpu, t_mem))  # fills the target's cpu and memory together
        f = _fractions((lows[0] + highs[0], lows[1] + highs[1]), (0.0, 0.0), (t_cpu, t_mem))[0]
        mixes = [self._mix(low, high, alpha, beta, t_pods) for alpha, beta in (both, (f, f))]
        items = self._cheaper(b, usable, mixes)  # ... or the remaining demand's own mix
        if not items:
            return
        placer = self.placer
        if not placer.place_mix(b, items):
            for group, k in items:  # one group at a time (e.g. a node selector narrows the claim)
                placer.try_bin(group, placer.topology.active(group), b, None, limit=k)
        for sh in usable:
            sh.recount()

    @staticmethod
    def _mix(low: list[_Shape], high: list[_Shape], alpha: float, beta: float,
             pods: int) -> list[tuple[PendingGroup, int]]:
        count = alpha * sum(sh.left for sh in low) + beta * sum(sh.left for sh in high)
        if count > pods:
            alpha, beta = alpha * pods / count, beta * pods / count
        items: list[tuple[PendingGroup, int]] = []
        for side, fraction in ((low, alpha), (high, beta)):
            for sh in side:
                want = int(sh.left * fraction + 1e-9)
                for group in sh.groups:
                    if want <= 0:
                        break
                    k = min(want, group.remaining)
                    if k:
                        items.append((group, k))
                        want -= k
        return items

    def _cheaper(self, b: Bin, usable: list[_Shape],
                 mixes: list[list[tuple[PendingGroup, int]]]) -> list[tuple[PendingGroup, int]]:
        """Among candidate mixes, the one leaving the demand that is cheapest to serve afterwards,
        estimated at the pool's best price per unit of the leftover's shape (one-step lookahead: filling
        a bin to the brim only pays when some type suits what it leaves behind). Ties: the first."""
        if b.pool is None or b.capacity is not None or len(mixes) == 1:
            return mixes[-1]
        index = b.pool.index
        cpu0, mem0 = _totals(usable)
        best, best_cost = mixes[0], float("inf")
        for items in mixes:
            cpu = cpu0 - sum(group.group.requests.get(CPU, 0) * k for group, k in items)
            mem = mem0 - sum(group.group.requests.get(MEMORY, 0) * k for group, k in items)
            cost = index.unit_cost(cpu, mem)
            if cost < best_cost * (1 - 1e-9):
                best, best_cost = items, cost
        return best

    def _greedy(self, b: Bin, ratio: float | None) -> None:
        """Top up: the best-matching shape, a quarter of what fits, until nothing fits."""
        while True:
            room = self._room(b, ratio)
            r_cpu, r_mem, r_pods = room.get(CPU, 0), room.get(MEMORY, 0), room.get(PODS, 0)
            if r_pods < 1:
                return
            cap_cpu = max(r_cpu + b.used.get(CPU, 0), 1)
            cap_mem = max(r_mem + b.used.get(MEMORY, 0), 1)
            best: _Shape | None = None
            best_score, best_fit = -1.0, 0
            for sh in self._usable(b):
                if sh.cpu > r_cpu or sh.memory > r_mem:
                    continue
                fit = min(r_cpu // sh.cpu if sh.cpu else sh.left, r_mem // sh.memory if sh.memory else sh.left, r_pods)
                score = sh.cpu / cap_cpu * r_cpu / cap_cpu + sh.memory / cap_mem * r_mem / cap_mem
                if score > best_score:
                    best, best_score, best_fit = sh, score, min(fit, sh.left)
            if best is None:
                return
            want = max(1, -(-best_fit // CHUNK))
            if not self._place(best, b, want):
                best.rejected_by.add(b.id)

    def _place(self, sh: _Shape, b: Bin, want: int) -> int:
        placed = 0
        placer = self.placer
        for group in sh.groups:
            if not group.remaining:
                continue
            got = placer.try_bin(group, placer.topology.active(group), b, None, limit=want - placed)
            if not got:
                break
            placed += got
            if placed >= want:
                break
        sh.recount()
        return placed


def place_free(placer: Placer, groups: list[PendingGroup]) -> None:
    """Place the free groups, bin by bin, keeping each bin's cpu and memory in step."""
    if groups:
        _Filler(placer, groups).run()


def _ratio(shapes: list[_Shape]) -> float | None:
    cpu = sum(sh.cpu * sh.left for sh in shapes)
    mem = sum(sh.memory * sh.left for sh in shapes)
    return (mem / GIB) / (cpu / 1000) if cpu and mem else None


def _totals(shapes: list[_Shape]) -> tuple[float, float]:
    return float(sum(sh.cpu * sh.left for sh in shapes)), float(sum(sh.memory * sh.left for sh in shapes))


def _fractions(low: tuple[float, float], high: tuple[float, float], room: tuple[float, float]) -> tuple[float, float]:
    """alpha, beta in [0, 1] with alpha*low + beta*high <= room, using room's cpu and memory together."""
    (lc, lm), (hc, hm), (tc, tm) = low, high, room

    def fit(c: float, m: float, rc: float, rm: float) -> float:
        limits = [x for x in (rc / c if c else None, rm / m if m else None) if x is not None]
        return max(0.0, min([1.0, *limits]))

    if not (lc or lm):
        return 0.0, fit(hc, hm, tc, tm)
    if not (hc or hm):
        return fit(lc, lm, tc, tm), 0.0
    det = lc * hm - hc * lm
    if det <= 0:
        f = fit(lc + hc, lm + hm, tc, tm)
        return f, f
    alpha = (tc * hm - hc * tm) / det
    beta = (lc * tm - tc * lm) / det
    if alpha >= 1 and beta >= 1:
        return 1.0, 1.0
    if alpha >= 1:
        return 1.0, fit(hc, hm, tc - lc, tm - lm)
    if beta >= 1:
        return fit(lc, lm, tc - hc, tm - hm), 1.0
    return max(alpha, 0.0), max(beta, 0.0)
