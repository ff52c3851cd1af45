"""Bins: the places pods go. Existing nodes and in-flight claims are fixed; new claims are under construction.

A new claim holds its pool, its requirement set (the pool's, narrowed by every pod added: node affinity,
chosen topology domains), the resources used (DaemonSet overhead + pods) and its remaining instance type
options as a mask over the pool's `InstanceIndex`. Every option in the mask can hold everything placed so
far and has an available offering its requirements allow.

Requirement sets are interned as `Signature`s: claims with the same pool and requirements share one, so
"is this pod compatible with that claim" is answered once per (pod group, signature) instead of once per
claim, and "all claims of a signature" is a bit mask over bin ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from carpool.requirements import Requirements
from carpool.resources import Resources
from carpool.scheduling.inputs import HostPort
from carpool.scheduling.pools import PoolState
from carpool.scheduling.room import INDEXED
from carpool.scheduling.topology import TopologyGroup
from carpool.taints import Taint

CLAIM = "claim"
IN_FLIGHT = "inflight"
NODE = "node"


class Signature:
    """An interned (pool, requirements, taints) shared by bins; caches what depends only on those."""

    __slots__ = ("id", "pool", "requirements", "taints", "labels", "type_mask", "members", "_domains", "narrowed")

    def __init__(
        self,
        id: int,
        pool: PoolState | None,
        requirements: Requirements,
        taints: tuple[Taint, ...],
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.id = id
        self.pool = pool
        self.requirements = requirements
        self.taints = taints
        self.labels = labels  # fixed bins only: the node's labels (hostname excluded)
        self.type_mask = pool.index.compatible_mask(requirements) if pool is not None else 0
        self.members = 0
        self._domains: dict[str, frozenset[str]] = {}
        self.narrowed: dict[tuple, Signature | None] = {}

    @property
    def fixed(self) -> bool:
        return self.labels is not None

    def domains(self, key: str) -> frozenset[str]:
        """Values of `key` a bin with this signature can still take."""
        got = self._domains.get(key)
        if got is None:
            if self.labels is not None:
                v = self.labels.get(key)
                got = frozenset((v,)) if v is not None else frozenset()
            else:
                assert self.pool is not None
                got = self.pool.index.domains(key, self.type_mask, self.requirements)
            self._domains[key] = got
        return got


@dataclass(slots=True, eq=False)
class Bin:
    """A node or claim pods can be placed on. Fixed bins have `capacity`; claims have `options`."""

    id: int
    name: str
    kind: str
    sig: Signature
    pool: PoolState | None
    used: Resources
    capacity: Resources | None = None
    options: int = 0
    ports: list[HostPort] = field(default_factory=list)
    placements: list[tuple[int, int]] = field(default_factory=list)  # (group id, count)
    pods: list[str] = field(default_factory=list)
    pending: list[tuple[TopologyGroup, int]] = field(default_factory=list)
    seq: int = 0
    cap: int = -1  # claims grow only while one of these (cost-efficient) options still fits
    hostname: str = ""
    split_cpu: int = 0

    @property
    def fixed(self) -> bool:
        return self.capacity is not None

    def room(self) -> Resources:
        """Upper bound of what one more pod may use (claims: the largest option it may grow into)."""
        if self.capacity is not None:
            return {r: self.capacity.get(r, 0) - self.used.get(r, 0) for r in INDEXED}
        assert self.pool is not None
        index = self.pool.index
        growable = self.options & self.cap
        return {r: index.max_allocatable(growable, r) - self.used.get(r, 0) for r in INDEXED}

    def port_conflict(self, ports: tuple[HostPort, ...]) -> bool:
        return any(p.conflicts(q) for p in ports for q in self.ports)
