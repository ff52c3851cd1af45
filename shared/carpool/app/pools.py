"""Turns NodePools + EC2NodeClasses + the catalog into what the scheduler packs with (`PoolSpec`) and what
the launcher needs (`PoolContext`), in one pass, so both see the same instance types, AMIs and sizes.

Per pool: the catalog types its requirements admit -> those some AMI of its node class can boot (strict
mapping; others are not offered) -> each sized for the node class and the cluster's CNI mode, with learned
(or extrapolated) memory where the capacity cache has it -> offerings marked unavailable where a capacity
error was recorded.

All but the last step depend only on inputs that change rarely (the pool's requirements, the catalog, the
node class's AMI family, resolved AMIs and kubelet settings, the CNI mode, the learned capacity), yet every
provisioner and disruption run needs them: they are kept per process (`_Admitted`), found by the catalog
object (immutable, replaced on refresh) and keyed by the *content* of the rest, so an edited NodePool, a
new AMI or a newly learned capacity is a new key, never a stale hit. Offerings (capacity errors, subnet
zones) are applied on every call.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from carpool import amis as ami_mapping
from carpool import capacity, labels
from carpool.amis import AmiSelectionError, ResolvedAmi, node_os
from carpool.amis.model import preference_key
from carpool.api.loader import Manifests
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.app.launching import PoolContext
from carpool.catalog import Catalog, InstanceType
from carpool.launch import failures
from carpool.launch.failures import Cause
from carpool.requirements import Requirements
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.sizing import (
    KubeletSettings,
    LearnedCapacity,
    NetworkSettings,
    NodeSize,
    StorageSettings,
    network_settings,
    size_node,
)
from carpool.state.models import CapacityRecord

log = logging.getLogger(__name__)
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

@dataclass
class Prepared:
    specs: list[si.PoolSpec] = field(default_factory=list)
    contexts: dict[str, PoolContext] = field(default_factory=dict)
    #: pool -> instance type -> "learned" | "extrapolated" | "default" (for `plan` and metrics)
    capacity_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    #: pool -> why it offers nothing / what was dropped
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: pool -> (cause, message) of its node class selecting no AMI or no subnet: it offers nothing
    not_ready: dict[str, tuple[Cause, str]] = field(default_factory=dict)


def prepare(
    manifests: Manifests,
    catalog: Catalog,
    resolve_amis: Callable[[EC2NodeClass], list[ResolvedAmi]],
    cni_env: Mapping[str, str],
    learned: Mapping[tuple[str, str], CapacityRecord],
    unavailable: set[tuple[str, str, str]],
    usage: Mapping[str, Mapping[str, int]],
    zones_of: Callable[[EC2NodeClass], set[str] | None] = lambda _nc: None,
) -> Prepared:
    """`zones_of` gives the zones a node class has subnets in (None: any zone); offerings elsewhere cannot
    be launched, so the scheduler must not plan on them. A pool whose node class selects no AMI or no
    subnet offers nothing and says why (`Prepared.not_ready`); the other pools are prepared as ever."""
    out = Prepared()
    classes = {c.name: c for c in manifests.nodeclasses}
    for pool in manifests.nodepools:
        nodeclass = classes.get(pool.node_class_name)
        if nodeclass is None:
            out.notes[pool.name] = [f"EC2NodeClass {pool.node_class_name!r} not found"]
            continue
        resolved = _amis(nodeclass, resolve_amis)
        zones = zones_of(nodeclass) if not isinstance(resolved, AmiSelectionError) and resolved else None
        unready = failures.before_launch(nodeclass, resolved, zones)
        if unready is not None:
            out.not_ready[pool.name] = unready
            out.notes[pool.name] = [f"not launched from: {unready[0]}: {unready[1]}"]
            out.specs.append(convert.pool_spec(pool, [], usage.get(pool.name, {})))
            continue
        assert not isinstance(resolved, AmiSelectionError)
        _prepare_pool(pool, nodeclass, catalog, resolved, cni_env, learned, unavailable,
                      usage.get(pool.name, {}), zones, out)
    return out


def _amis(nodeclass: EC2NodeClass, resolve_amis: Callable[[EC2NodeClass], list[ResolvedAmi]],
          ) -> list[ResolvedAmi] | AmiSelectionError:
    """The node class's AMIs, or why its terms select none it can use (the node class's fault, not the
    call's: other pools go on); any other failure (a read) is raised."""
    try:
        return resolve_amis(nodeclass)
    except AmiSelectionError as exc:
        return exc


def offered_resources(pool: NodePool, catalog: Catalog) -> set[str]:
    """Every resource some instance type the pool's requirements admit has (cpu, memory, pods,
    ephemeral-storage, GPUs, accelerators), as sizing counts them: what its `spec.limits` can bind."""
    out: set[str] = set()
    for it in admitted_types(catalog, pool.requirements(), None):
        out.update(size_node(it).capacity)
    return out


def admitted_types(catalog: Catalog, reqs: Requirements, family: str | None) -> Sequence[InstanceType]:
    """The catalog's types (as nodes of AMI `family` are labelled; None: as catalogued) that `reqs`
    admit, in catalog order. Shared per process: treat the result as read-only."""
    return _Admitted.of(catalog).types(reqs, family)


def requirements_key(reqs: Requirements) -> Hashable:
    """The content of `reqs` as a hashable value: equal keys mean the same requirements, value order
    and minValues included (stricter than `Requirements.__eq__`, so a key never merges two that differ)."""
    return tuple(sorted((r.key, r.complement, r.order, r.excluded, r.gt, r.lt, r.min_values)
                        for r in reqs.values()))


def _amis_key(ranked: Sequence[ResolvedAmi]) -> Hashable:
    """What of the AMIs the mapping depends on: identity fields and requirements, in preference order."""
    return tuple((a.id, a.name, a.arch, a.variant, a.creation_date, a.deprecated, requirements_key(a.requirements))
                 for a in ranked)


class _Admitted:
    """Per catalog: the types each requirement set admits, which AMI each of them boots, and their sizes.

    Found by the catalog object (a catalog is immutable and a refresh makes a new one), held through a weak
    reference, so the tables of a replaced catalog go with it; each table is bounded (least recently used
    entries leave first), so pools that come and go cannot grow it without limit.
    """

    MAX_ENTRIES = 64
    MAX_CATALOGS = 4
    _by_catalog: OrderedDict[int, _Admitted] = OrderedDict()

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = weakref.ref(catalog)  # not the catalog itself: a table must not keep it alive
        self._types: dict[str, InstanceType] = catalog.types
        self._size = len(catalog.types)
        self._admitted: OrderedDict[Hashable, tuple[InstanceType, ...]] = OrderedDict()
        self._mapped: OrderedDict[Hashable, dict[str, int]] = OrderedDict()
        self._sized: OrderedDict[Hashable, tuple[_Sized, ...]] = OrderedDict()

    @classmethod
    def of(cls, catalog: Catalog) -> _Admitted:
        key = id(catalog)
        got = _lookup(cls._by_catalog, key)
        if got is None or not got._serves(catalog):
            got = _store(cls._by_catalog, key, cls(catalog), cls.MAX_CATALOGS)
            weakref.finalize(catalog, cls._forget, key, got)
        return got

    def _serves(self, catalog: Catalog) -> bool:
        """Built for this very catalog (ids are reused once an object is gone), whose types are unchanged."""
        return self._catalog() is catalog and self._types is catalog.types and self._size == len(catalog.types)

    @classmethod
    def _forget(cls, key: int, tables: _Admitted) -> None:
        if cls._by_catalog.get(key) is tables:
            del cls._by_catalog[key]

    def types(self, reqs: Requirements, family: str | None) -> tuple[InstanceType, ...]:
        key = (family, requirements_key(reqs))
        hit = _lookup(self._admitted, key)
        if hit is None:
            hit = _store(self._admitted, key, self._compute(reqs, family), self.MAX_ENTRIES)
        return hit

    def _compute(self, reqs: Requirements, family: str | None) -> tuple[InstanceType, ...]:
        if family is None:
            views: Iterable[InstanceType] = self._types.values()
        else:
            views = (node_os.for_family(it, family) for it in self._types.values() if node_os.compatible(it, family))
        return tuple(it for it in views if it.requirements.intersects(reqs) is None)

    def amis(self, reqs: Requirements, family: str, ranked: Sequence[ResolvedAmi],
             amis_key: Hashable) -> dict[str, ResolvedAmi]:
        """Type name -> the AMI of `ranked` (best first, its content `amis_key`) it boots
        (`amis.map_instance_types` over the admitted types).

        Remembered as positions in `ranked` and rebuilt from it, so the objects handed back are always this
        call's (their `source` and all)."""
        key = (family, requirements_key(reqs), amis_key)
        positions = _lookup(self._mapped, key)
        if positions is None:
            index = {id(a): i for i, a in enumerate(ranked)}
            mapping = ami_mapping.map_instance_types(ranked, self.types(reqs, family))
            positions = _store(self._mapped, key, {n: index[id(a)] for n, a in mapping.items()}, self.MAX_ENTRIES)
        return {name: ranked[i] for name, i in positions.items()}

    def offered(self, reqs: Requirements, family: str, resolved: Sequence[ResolvedAmi], network: NetworkSettings,
                kubelet: KubeletSettings, learned: Mapping[tuple[str, str], CapacityRecord],
                storage: StorageSettings,
                ) -> tuple[int, dict[str, ResolvedAmi], tuple[_Sized, ...]]:
        """How many types `reqs` admit, which AMI each boots, and those some AMI boots sized (`_size`), in
        catalog order. The sizes are the same for the same requirements, AMIs, network and kubelet
        settings and learned capacity, and are kept for them."""
        ranked = sorted(resolved, key=preference_key)
        amis_key = _amis_key(ranked)
        mapping = self.amis(reqs, family, ranked, amis_key)
        admitted = self.types(reqs, family)
        key = (family, requirements_key(reqs), amis_key, network, _kubelet_key(kubelet), _learned_key(learned), storage)
        sized = _lookup(self._sized, key)
        if sized is None:
            sized = tuple(_size(it, mapping[it.name], family, network, kubelet, learned, self._types, storage)
                          for it in admitted if it.name in mapping)
            _store(self._sized, key, sized, self.MAX_ENTRIES)
        return len(admitted), mapping, sized


@dataclass(frozen=True, slots=True)
class _Sized:
    """One offered type of a pool: the type, where its memory figure came from ("learned",
    "extrapolated", "default") and its size. Shared between runs: read-only."""

    type: InstanceType
    source: str
    size: NodeSize


def _size(it: InstanceType, ami: ResolvedAmi, family: str, network: NetworkSettings, kubelet: KubeletSettings,
          learned: Mapping[tuple[str, str], CapacityRecord], types: Mapping[str, InstanceType],
          storage: StorageSettings) -> _Sized:
    estimate = capacity.estimate_memory(
        it.name, it.labels.get(labels.INSTANCE_FAMILY, ""), it.memory_mib, it.arch, ami.id, family, learned,
        lambda name: types[name].memory_mib if name in types else None,
    )
    lc = LearnedCapacity(memory_bytes=estimate.memory_bytes) if estimate.source != "default" else None
    return _Sized(it, estimate.source, size_node(it, family, network, kubelet, learned=lc, storage=storage))


def _kubelet_key(kubelet: KubeletSettings) -> Hashable:
    return (kubelet.max_pods, kubelet.pods_per_core, tuple(sorted(kubelet.kube_reserved.items())),
            tuple(sorted(kubelet.system_reserved.items())), tuple(sorted(kubelet.eviction_hard.items())))


def _learned_key(learned: Mapping[tuple[str, str], CapacityRecord]) -> Hashable:
    """What memory estimates read of the learned capacity, in its order (estimates depend on it)."""
    return tuple((k, r.instance_type, r.image_id, r.ami_family, tuple(sorted(r.capacity.items())), r.samples)
                 for k, r in learned.items())


def _lookup(table: OrderedDict[_K, _V], key: _K) -> _V | None:
    hit = table.get(key)
    if hit is not None:
        table.move_to_end(key)
    return hit


def _store(table: OrderedDict[_K, _V], key: _K, value: _V, limit: int) -> _V:
    table[key] = value
    while len(table) > limit:
        table.popitem(last=False)
    return value


def _prepare_pool(
    pool: NodePool,
    nodeclass: EC2NodeClass,
    catalog: Catalog,
    resolved: list[ResolvedAmi],
    cni_env: Mapping[str, str],
    learned: Mapping[tuple[str, str], CapacityRecord],
    unavailable: set[tuple[str, str, str]],
    usage: Mapping[str, int],
    zones: set[str] | None,
    out: Prepared,
) -> None:
    family = nodeclass.ami_family()
    network = network_settings(cni_env, nodeclass.metadata.annotations or {})
    kubelet = KubeletSettings.from_spec(nodeclass.spec.kubelet)
    admitted, mapping, sized = _Admitted.of(catalog).offered(pool.requirements(), family, resolved, network,
                                                             kubelet, learned, StorageSettings.from_spec(nodeclass.spec))
    options: list[si.InstanceOption] = []
    for entry in sized:
        it, size = entry.type, entry.size
        offerings = it.offerings if zones is None else [o for o in it.offerings if o.zone in zones]
        options.append(convert.instance_option(it.name, it.requirements, offerings, size.allocatable,
                                               size.capacity, unavailable))
    sizes = {e.type.name: e.size for e in sized}
    dropped = admitted - len(options)
    out.notes[pool.name] = ([f"{dropped} instance types have no compatible AMI and are not offered"] if dropped else [])
    out.notes[pool.name].extend(pool.limit_warnings(k for o in options for k in o.limit_capacity))
    if not options:
        out.notes[pool.name].append("no instance type is both admitted by the requirements and bootable by an AMI")
    out.capacity_sources[pool.name] = {e.type.name: e.source for e in sized}
    out.contexts[pool.name] = PoolContext(pool, nodeclass, family, {n: mapping[n] for n in sizes}, sizes,
                                          {e.type.name: e.type for e in sized})
    out.specs.append(convert.pool_spec(pool, options, usage))
