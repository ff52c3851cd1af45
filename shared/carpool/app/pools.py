"""Turns NodePools + EC2NodeClasses + the catalog into what the scheduler packs with (`PoolSpec`) and what
the launcher needs (`PoolContext`), in one pass, so both see the same instance types, AMIs and sizes.

Per pool: the catalog types its requirements admit -> those some AMI of its node class can boot (strict
mapping; others are not offered) -> each sized for the node class and the cluster's CNI mode, with learned
(or extrapolated) memory where the capacity cache has it -> offerings marked unavailable where a capacity
error was recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from carpool import amis as ami_mapping
from carpool import capacity, labels
from carpool.amis import ResolvedAmi, node_os
from carpool.api.loader import Manifests
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.app.launching import PoolContext
from carpool.catalog import Catalog
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.sizing import KubeletSettings, LearnedCapacity, NodeSize, network_settings, size_node
from carpool.state.models import CapacityRecord

log = logging.getLogger(__name__)

@dataclass
class Prepared:
    specs: list[si.PoolSpec] = field(default_factory=list)
    contexts: dict[str, PoolContext] = field(default_factory=dict)
    #: pool -> instance type -> "learned" | "extrapolated" | "default" (for `plan` and metrics)
    capacity_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    #: pool -> why it offers nothing / what was dropped
    notes: dict[str, list[str]] = field(default_factory=dict)


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
    be launched, so the scheduler must not plan on them."""
    out = Prepared()
    classes = {c.name: c for c in manifests.nodeclasses}
    for pool in manifests.nodepools:
        nodeclass = classes.get(pool.node_class_name)
        if nodeclass is None:
            out.notes[pool.name] = [f"EC2NodeClass {pool.node_class_name!r} not found"]
            continue
        _prepare_pool(pool, nodeclass, catalog, resolve_amis(nodeclass), cni_env, learned, unavailable,
                      usage.get(pool.name, {}), zones_of(nodeclass), out)
    return out


def offered_resources(pool: NodePool, catalog: Catalog) -> set[str]:
    """Every resource some instance type the pool's requirements admit has (cpu, memory, pods,
    ephemeral-storage, GPUs, accelerators), as sizing counts them: what its `spec.limits` can bind."""
    reqs = pool.requirements()
    out: set[str] = set()
    for it in catalog.types.values():
        if it.requirements.intersects(reqs) is None:
            out.update(size_node(it).capacity)
    return out


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
    reqs = pool.requirements()
    family = nodeclass.ami_family()
    views = (node_os.for_family(it, family) for it in catalog.types.values() if node_os.compatible(it, family))
    candidates = [it for it in views if it.requirements.intersects(reqs) is None]
    mapping = ami_mapping.map_instance_types(resolved, candidates)
    network = network_settings(cni_env, nodeclass.metadata.annotations or {})
    kubelet = KubeletSettings.from_spec(nodeclass.spec.kubelet)
    sizes: dict[str, NodeSize] = {}
    sources: dict[str, str] = {}
    options: list[si.InstanceOption] = []
    for it in candidates:
        ami = mapping.get(it.name)
        if ami is None:
            continue
        estimate = capacity.estimate_memory(
            it.name, it.labels.get(labels.INSTANCE_FAMILY, ""), it.memory_mib, it.arch, ami.id, family, learned,
            lambda name: catalog.types[name].memory_mib if name in catalog.types else None,
        )
        sources[it.name] = estimate.source
        lc = LearnedCapacity(memory_bytes=estimate.memory_bytes) if estimate.source != "default" else None
        size = size_node(it, family, network, kubelet, learned=lc)
        sizes[it.name] = size
        offerings = it.offerings if zones is None else [o for o in it.offerings if o.zone in zones]
        options.append(convert.instance_option(it.name, it.requirements, offerings, size.allocatable,
                                               size.capacity, unavailable))
    dropped = len(candidates) - len(options)
    out.notes[pool.name] = ([f"{dropped} instance types have no compatible AMI and are not offered"] if dropped else [])
    out.notes[pool.name].extend(pool.limit_warnings(k for o in options for k in o.limit_capacity))
    if not options:
        out.notes[pool.name].append("no instance type is both admitted by the requirements and bootable by an AMI")
    out.capacity_sources[pool.name] = sources
    out.contexts[pool.name] = PoolContext(pool, nodeclass, family, {n: mapping[n] for n in sizes}, sizes,
                                          {it.name: it for it in candidates if it.name in sizes})
    out.specs.append(convert.pool_spec(pool, options, usage))
