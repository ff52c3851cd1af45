"""Soft constraints: honoured as hard first, then relaxed one at a time.

The order follows Karpenter's `preferences.go` (Relax): when a pod cannot be placed,
1. drop the heaviest remaining *preferred pod affinity* term,
2. then the heaviest remaining *preferred pod anti-affinity* term,
3. then the heaviest remaining *preferred node affinity* term (only the heaviest remaining one is ever
   enforced, merged into every required term, so dropping it lets the next-heaviest apply),
4. then one `ScheduleAnyway` topology spread at a time,
5. finally tolerate `PreferNoSchedule` taints (only when some NodePool has one).
Karpenter's first step (dropping the first *required* node-affinity term) is not needed: carpool tries
every required term of a pod as the OR it is.

A `Variant` is the pod group's constraints at one relaxation level; it is immutable so caches keyed by
its id stay valid. Its `profile` names its node-affinity terms and tolerations: variants of different pod
groups with equal terms and tolerations share one profile id (when their `Preferences` share a
`ProfileIds`), so what depends only on those (which signatures a term fits) is derived once per batch
instead of once per pod group.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from dataclasses import replace as _replace

from carpool.requirements import Requirements
from carpool.scheduling.inputs import AffinityTerm, PodSpec, TopologySpread
from carpool.taints import PREFER_NO_SCHEDULE, Toleration

_ids = itertools.count()
_profile_ids = itertools.count()

PREFER_NO_SCHEDULE_TOLERATION = Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)


@dataclass(frozen=True, slots=True)
class Variant:
    """A pod group's constraints at one relaxation level.

    `terms`: the node-affinity OR-terms to try, each merged with the preferred node term in force.
    `strict_terms`: required terms only (which domains the pod could ever use, for spread counting).
    `profile`: names (terms, tolerations); variants with equal ones share it within a batch (`ProfileIds`).
    """

    id: int
    terms: tuple[Requirements, ...]
    strict_terms: tuple[Requirements, ...]
    tolerations: tuple[Toleration, ...]
    spreads: tuple[TopologySpread, ...]
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    profile: int
    relaxed: tuple[str, ...] = ()


class ProfileIds:
    """Interns (node-affinity terms, tolerations) to ids shared by the variants of one batch."""

    def __init__(self) -> None:
        self._ids: dict[tuple[tuple[Requirements, ...], tuple[Toleration, ...]], int] = {}

    def get(self, terms: tuple[Requirements, ...], tolerations: tuple[Toleration, ...]) -> int:
        key = (terms, tolerations)
        got = self._ids.get(key)
        if got is None:
            got = self._ids[key] = next(_profile_ids)
        return got


@dataclass(frozen=True, slots=True)
class _Level:
    pod_affinity: int = 0
    pod_anti_affinity: int = 0
    node_affinity: int = 0
    anyway: int = 0
    prefer_no_schedule: bool = False


class Preferences:
    """Builds a pod's variants, from "every preference as a requirement" to "none left"."""

    def __init__(self, pod: PodSpec, tolerate_prefer_no_schedule: bool, profiles: ProfileIds | None = None) -> None:
        self._pod = pod
        self._profiles = profiles
        self._pns = tolerate_prefer_no_schedule and not _tolerates_prefer_no_schedule(pod.tolerations)
        self._aff = sorted(pod.preferred_affinity, key=lambda w: -w.weight)
        self._anti = sorted(pod.preferred_anti_affinity, key=lambda w: -w.weight)
        self._node = sorted(pod.preferred_node_affinity, key=lambda w: -w.weight)
        self._anyway = [s for s in pod.spread if not s.hard]
        self._level = _Level()
        self.current = self._build(self._level, ())

    def relax(self) -> Variant | None:
        """Move to the next relaxation level; None when nothing is left to relax."""
        lv = self._level
        if lv.pod_affinity < len(self._aff):
            nxt, what = _replace(lv, pod_affinity=lv.pod_affinity + 1), f"preferred pod affinity {_term(self._aff[lv.pod_affinity].term)}"
        elif lv.pod_anti_affinity < len(self._anti):
            nxt, what = (
                _replace(lv, pod_anti_affinity=lv.pod_anti_affinity + 1),
                f"preferred pod anti-affinity {_term(self._anti[lv.pod_anti_affinity].term)}",
            )
        elif lv.node_affinity < len(self._node):
            nxt, what = (
                _replace(lv, node_affinity=lv.node_affinity + 1),
                f"preferred node affinity {self._node[lv.node_affinity].requirements!r}",
            )
        elif lv.anyway < len(self._anyway):
            s = self._anyway[lv.anyway]
            nxt, what = _replace(lv, anyway=lv.anyway + 1), f"ScheduleAnyway spread on {s.topology_key}"
        elif self._pns and not lv.prefer_no_schedule:
            nxt, what = _replace(lv, prefer_no_schedule=True), "tolerating PreferNoSchedule taints"
        else:
            return None
        self._level = nxt
        self.current = self._build(nxt, self.current.relaxed + (what,))
        return self.current

    def _build(self, lv: _Level, relaxed: tuple[str, ...]) -> Variant:
        pod = self._pod
        strict = pod.requirements or (Requirements(),)
        preferred = self._node[lv.node_affinity].requirements if lv.node_affinity < len(self._node) else None
        terms = strict if preferred is None else tuple(t.merge(preferred) for t in strict)
        tolerations = pod.tolerations + ((PREFER_NO_SCHEDULE_TOLERATION,) if lv.prefer_no_schedule else ())
        removed = self._anyway[: lv.anyway]
        spreads = tuple(s for s in pod.spread if not any(s is r for r in removed))
        affinity = pod.affinity + tuple(w.term for w in self._aff[lv.pod_affinity :])
        anti = pod.anti_affinity + tuple(w.term for w in self._anti[lv.pod_anti_affinity :])
        profile = self._profiles.get(terms, tolerations) if self._profiles is not None else next(_profile_ids)
        return Variant(next(_ids), terms, strict, tolerations, spreads, affinity, anti, profile, relaxed)


def _tolerates_prefer_no_schedule(tolerations: tuple[Toleration, ...]) -> bool:
    return any(t.operator == "Exists" and not t.key and t.effect in ("", PREFER_NO_SCHEDULE) for t in tolerations)


def _term(term: AffinityTerm) -> str:
    return f"on {term.topology_key} ({term.selector})"
