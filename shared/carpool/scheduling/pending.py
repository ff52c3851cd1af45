"""A pod group while the batch places it, and the constraints it is held to at its current relaxation level.

Why two types: a group keeps its progress (how many pods are left, which keys go next) for the whole batch,
while what constrains it changes each time a preference is relaxed. Everything derived from one
relaxation level (`ActiveConstraints`: the topology groups in force, which node-affinity terms each
requirement signature satisfies) is cached per `Variant` id, so a group that is retried at the same level
re-derives nothing.
"""

from __future__ import annotations

from carpool.scheduling.inputs import PodSpec
from carpool.scheduling.podgroups import PodGroup
from carpool.scheduling.preferences import Preferences, Variant
from carpool.scheduling.topologygroup import TopologyConstraint, TopologyGroup


class ActiveConstraints:
    """A pod group's constraints at one relaxation level.

    `hostname_constraints` are checked per bin (bit masks over bins); `domain_constraints` (zone, capacity
    type, any other key) per value of their key, grouped by key so a claim is narrowed to one domain
    that satisfies all of them. `terms_by_signature` caches, per requirement signature id, the indices
    of the variant's node-affinity terms that signature can satisfy; it depends only on the variant's
    terms and tolerations, so constraints of the same `Variant.profile` may share one dict.
    """

    __slots__ = ("variant", "hostname_constraints", "domain_constraints", "terms_by_signature")

    def __init__(self, variant: Variant, hostname_constraints: list[TopologyConstraint],
                 domain_constraints: dict[str, list[TopologyConstraint]],
                 terms_by_signature: dict[int, tuple[int, ...]] | None = None) -> None:
        self.variant = variant
        self.hostname_constraints = hostname_constraints
        self.domain_constraints = domain_constraints
        self.terms_by_signature: dict[int, tuple[int, ...]] = {} if terms_by_signature is None else terms_by_signature


class PendingGroup:
    """A pod group being scheduled: its progress, its preferences and the topology groups that count it.

    - `remaining` pods are still to place; the next one is `group.keys[next_key]`.
    - `room_position`: the group's request as thresholds of the batch's `RoomIndex`.
    - `counted_by`: spread and affinity groups whose selector matches these pods (placements count there);
      `inverse_owned`: the inverse anti-affinity groups of the group's own required anti-affinity terms;
      `inverse_selecting`: inverse groups whose selector matches these pods (they may only go where no
      holder of that term is).
    - `eligible_domains`: per topology key (and the spread's node inclusion policies), the domains the
      pods could ever use (cached).
    """

    __slots__ = (
        "group", "preferences", "remaining", "next_key", "room_position", "counted_by", "inverse_owned",
        "inverse_selecting", "by_variant", "eligible_domains",
    )

    def __init__(self, group: PodGroup, preferences: Preferences) -> None:
        self.group = group
        self.preferences = preferences
        self.remaining = group.count
        self.next_key = 0
        self.room_position: tuple[int, ...] = ()
        self.counted_by: list[TopologyGroup] = []
        self.inverse_owned: list[TopologyGroup] = []
        self.inverse_selecting: list[TopologyConstraint] = []
        self.by_variant: dict[int, ActiveConstraints] = {}
        self.eligible_domains: dict[tuple, frozenset[str]] = {}

    @property
    def pod(self) -> PodSpec:
        """The group's first pod: every member is identical for scheduling."""
        return self.group.pod

    def unplaced(self) -> list[str]:
        return self.group.keys[self.next_key :]
