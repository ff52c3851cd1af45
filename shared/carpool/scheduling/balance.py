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

"Unconstrained" = no topology spread, no pod (anti-)affinity (required or preferred), not selected by
anyone's spread or (anti-)affinity, no host ports, no preferred node affinity. Node selectors, required
node affinity and tolerations are fine: they are checked per bin as usual. Pods this phase cannot place go
through the normal queue afterwards (relaxation, explanations).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from carpool.resources import CPU, MEMORY, PODS
from carpool.scheduling.options import InstanceIndex, bits

if TYPE_CHECKING:  # pragma: no cover
    from carpool.scheduling.claim import Bin
    from carpool.scheduling.scheduler import Scheduler, _GroupState

CHUNK = 4  # greedy top-up adds a quarter of what fits, then looks again
GIB = 2**30


def is_free(gs: _GroupState) -> bool:
    """Whether a pod group takes part in no topology rule (its placement moves no count)."""
    pod = gs.pod
    if (pod.spread or pod.affinity or pod.anti_affinity or pod.preferred_affinity or pod.preferred_anti_affinity
            or pod.host_ports or pod.preferred_node_affinity):
        return False
    return not gs.counted_by and not gs.inverse_selecting


@dataclass(eq=False)
class _Shape:
    """Free groups that differ only in labels/namespace: interchangeable for this phase."""

    groups: list[_GroupState]
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

    def __init__(self, s: Scheduler, groups: list[_GroupState]) -> None:
        self.s = s
        by_key: dict[tuple, _Shape] = {}
        for gs in groups:
            req = gs.group.requests
            key = (frozenset(req.items()), gs.pod.requirements, gs.pod.tolerations)
            shape = by_key.get(key)
            if shape is None:
                shape = by_key[key] = _Shape([], req.get(CPU, 0), req.get(MEMORY, 0))
            shape.groups.append(gs)
        self.shapes = sorted(by_key.values(), key=lambda sh: (-sh.cpu, -sh.memory))
        for sh in self.shapes:
            sh.recount()
        self._targets: dict[tuple[int, int, float | None], int] = {}

    # -- driver -----------------------------------------------------------------------------------
    def run(self) -> None:
        s = self.s
        for b in list(s.bins):
            self.fill(b)
        while True:
            seed = next((sh for sh in self.shapes if sh.left and not sh.failed), None)
            if seed is None:
                return
            before = len(s.bins)
            opened = any(s._open_claim(gs, s._vstate(gs), None, limit=1) for gs in seed.groups if gs.remaining)
            seed.recount()
            if not opened:
                seed.failed = True
                continue
            for b in s.bins[before:]:
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
            ok = sh.verdicts.get(b.sig.id)
            if ok is None:
                gs = sh.groups[0]
                ok = sh.verdicts[b.sig.id] = bool(self.s._sig_terms(self.s._vstate(gs), b.sig))
            if ok:
                out.append(sh)
        return out

    def _room(self, b: Bin, ratio: float | None) -> dict[str, int]:
        """Free room towards the bin's target (see module docstring)."""
        if b.capacity is not None or b.pool is None:
            return b.room()
        index = b.pool.index
        growable = b.options & b.cap
        key = (b.pool.id, growable, None if ratio is None else round(ratio, 2))
        target = self._targets.get(key)
        if target is None:
            target = self._targets[key] = _best_option(index, growable, ratio)
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
        alpha, beta = _fractions(_totals(low), _totals(high), (t_cpu, t_mem))
        count = alpha * sum(sh.left for sh in low) + beta * sum(sh.left for sh in high)
        if count > t_pods:
            alpha, beta = alpha * t_pods / count, beta * t_pods / count
        items: list[tuple[_GroupState, int]] = []
        for side, fraction in ((low, alpha), (high, beta)):
            for sh in side:
                want = int(sh.left * fraction + 1e-9)
                for gs in sh.groups:
                    if want <= 0:
                        break
                    k = min(want, gs.remaining)
                    if k:
                        items.append((gs, k))
                        want -= k
        if not items:
            return
        if not self.s._place_mix(b, items):
            for gs, k in items:  # one group at a time (e.g. a node selector narrows the claim)
                self.s._try_bin(gs, self.s._vstate(gs), b, None, limit=k)
        for sh in usable:
            sh.recount()

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
        for gs in sh.groups:
            if not gs.remaining:
                continue
            got = self.s._try_bin(gs, self.s._vstate(gs), b, None, limit=want - placed)
            if not got:
                break
            placed += got
            if placed >= want:
                break
        sh.recount()
        return placed


def place_free(s: Scheduler, groups: list[_GroupState]) -> None:
    """Place the free groups, bin by bin, keeping each bin's cpu and memory in step."""
    if groups:
        _Filler(s, groups).run()


def _ratio(shapes: list[_Shape]) -> float | None:
    cpu = sum(sh.cpu * sh.left for sh in shapes)
    mem = sum(sh.memory * sh.left for sh in shapes)
    return (mem / GIB) / (cpu / 1000) if cpu and mem else None


def _best_option(index: InstanceIndex, mask: int, ratio: float | None) -> int:
    """The type of `mask` cheapest per vCPU of a workload with `ratio` GiB per vCPU (within 2 %: the
    bigger one)."""
    best, best_eff, best_cpu = -1, float("inf"), 0
    for i in bits(mask):
        price = index.prices[i]
        alloc = index.types[i].allocatable
        cpu = alloc.get(CPU, 0) / 1000
        held = cpu if ratio is None else min(cpu, alloc.get(MEMORY, 0) / GIB / ratio)
        if price is None or held <= 0:
            continue
        eff = price / held
        if eff < best_eff * 0.98 or (eff <= best_eff * 1.02 and cpu > best_cpu):
            best, best_eff, best_cpu = i, min(eff, best_eff), cpu
    return best if best >= 0 else (mask & -mask).bit_length() - 1


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
