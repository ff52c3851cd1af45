"""Requirement signatures: the interned (pool, requirements, taints) that bins share.

Why: claims with the same pool and requirements accept exactly the same pods, so "is this pod group
compatible with that bin" is answered once per (pod group, signature) instead of once per bin, and "every
bin of a signature" is one bit mask over bin ids (`Signature.members`). A claim narrowed by a pod (a
node-affinity term, a chosen topology domain) moves to the narrowed signature; narrowing results are
cached on the signature they start from.

Existing nodes and in-flight claims get a signature from their labels (`labels` is set): their
requirements are fixed, and a pod matches them by label, not by requirement intersection.
"""

from __future__ import annotations

from collections.abc import Mapping

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.pools import PoolState
from carpool.scheduling.preferences import Variant
from carpool.taints import Taint


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


class SignatureRegistry:
    """Every signature of the batch, in creation order (`all`), and the interning behind it."""

    def __init__(self) -> None:
        self.all: list[Signature] = []
        self._index: dict[tuple, Signature] = {}

    def for_pool(self, pool: PoolState, requirements: Requirements) -> Signature:
        """The signature of a claim in `pool` with these requirements (the pool's taints)."""
        signature = self._index.get((pool.id, requirements))  # looked up here: narrowing calls this a lot
        if signature is None:
            signature = self._intern((pool.id, requirements), pool, requirements, pool.taints, None)
        return signature

    def for_node(self, pool: PoolState | None, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> Signature:
        """The signature of an existing node or in-flight claim: its labels (hostname excluded) and taints."""
        key = ("fixed", frozenset(labels.items()), taints)
        signature = self._index.get(key)  # nodes with equal labels share it: requirements built once
        if signature is None:
            signature = self._intern(key, pool, Requirements.from_labels(labels), taints, labels)
        return signature

    def _intern(self, key: tuple, pool: PoolState | None, requirements: Requirements, taints: tuple[Taint, ...],
                labels: Mapping[str, str] | None) -> Signature:
        signature = self._index.get(key)
        if signature is None:
            signature = Signature(len(self.all), pool, requirements, taints, labels)
            self._index[key] = signature
            self.all.append(signature)
        return signature

    def narrowed_by_term(self, signature: Signature, variant: Variant, term_index: int) -> Signature | None:
        """A claim signature merged with node-affinity term `term_index` of a pod group's variant; None
        when they conflict or no instance type is left."""
        key = ("t", variant.profile, term_index)
        narrowed = signature.narrowed
        if key in narrowed:
            return narrowed[key]
        term = variant.terms[term_index]
        pool = signature.pool
        assert pool is not None
        out: Signature | None = None
        if signature.requirements.compatible(term, L.WELL_KNOWN) is None:
            merged = self.for_pool(pool, signature.requirements.merge(term))
            out = merged if merged.type_mask else None
        narrowed[key] = out
        return out

    def narrowed_to_domain(self, signature: Signature, key: str, domain: str) -> Signature | None:
        """A claim signature pinned to one value of a topology key; None when no instance type is left."""
        cache_key = ("d", key, domain)
        narrowed = signature.narrowed
        if cache_key in narrowed:
            return narrowed[cache_key]
        pool = signature.pool
        assert pool is not None
        merged = self.for_pool(pool, signature.requirements.add(Requirement.in_(key, domain)))
        out = merged if merged.type_mask else None
        narrowed[cache_key] = out
        return out
