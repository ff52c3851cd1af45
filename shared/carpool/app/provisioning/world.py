"""What one provisioning invocation reads once, before its first round, and every round uses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from carpool import together
from carpool.api.cluster_config import EC2NODECLASS_KIND, ClusterConfig
from carpool.api.k8s import Pod
from carpool.app import discovery, images
from carpool.app.provisioning.placed import Placed
from carpool.app.wiring import Dependencies
from carpool.karpenter_status import nodeclass as nodeclass_status
from carpool.launch.failures import Cause
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.scheduling.volumetopology import VolumeTopology


@dataclass
class World:
    """What one invocation reads once: config, catalog, learned capacity, unavailable offerings, the CNI
    mode and the DaemonSets, each node class's AMIs (resolved on first use), when some pod mounts a
    persistent volume claim, the storage objects that decide where such pods may run, and the pods the
    batch's spreads and affinities count (`carpool.app.provisioning.placed`)."""

    manifests: Any
    catalog: Any
    learned: dict
    unavailable: set[tuple[str, str, str]]
    cni: dict[str, str]
    daemonsets: list[si.PodSpec]
    resolve: Callable[[Any], list]
    #: None when no pod of the batch mounts a claim (nothing was read)
    volumes: VolumeTopology | None = None
    #: the pods the batch's topology constraints count, and their nodes (empty: none to count)
    placed: Placed = field(default_factory=Placed)
    #: EC2NodeClass name -> (cause, message) of each class whose status says `Ready=False` at its
    #: generation: its NodePools are not launched from (Karpenter's provisioner uses Ready NodePools only)
    unready_classes: dict[str, tuple[Cause, str]] = field(default_factory=dict)

    @classmethod
    def read(cls, deps: Dependencies, now: datetime, pods: Sequence[Pod] = ()) -> World:
        """The reads are independent, so they are made at once (`carpool.together`): the AWS ones on
        worker threads, the cluster's here meanwhile. The AMIs, subnets and security groups of the node
        classes the pools use are read too, ahead of `pools.prepare` and the launch asking for them. The
        stored catalog is read with them but decoded here afterwards: CPU work on a worker would slow
        every other worker (the interpreter lock), while here it waits for nobody."""
        config = deps.config.current()
        manifests = config.manifests
        resolved: dict[str, list | Exception] = {}

        def resolve(nc: Any) -> list:  # once per node class per invocation (its failure too)
            if nc.name not in resolved:
                try:
                    resolved[nc.name] = images.resolve(nc, deps)
                except Exception as exc:
                    resolved[nc.name] = exc
            found = resolved[nc.name]
            if isinstance(found, Exception):
                raise found
            return found

        def cluster() -> tuple[dict[str, str], list[si.PodSpec], VolumeTopology | None, Placed]:
            daemonsets = [convert.pod_spec(ds.template_pod()) for ds in deps.cluster.list_daemonsets()]
            return deps.cluster.cni_env(), daemonsets, _volume_topology(deps, pods), Placed.read(deps.cluster, pods)

        read_ahead = getattr(deps.catalog, "read_ahead", None)  # the stored catalog's read, not its decoding
        (cni, daemonsets, volumes, placed), (learned, unavailable, *_ahead) = together.beside(cluster, [
            lambda: deps.capacity.all(now), lambda: set(deps.offerings.unavailable(now)),
            *_ahead_of_use(manifests, deps, resolve), *([read_ahead] if read_ahead else []),
        ])
        return cls(manifests=manifests, catalog=deps.catalog.get(now), learned=learned, unavailable=unavailable,
                   cni=cni, daemonsets=daemonsets, resolve=resolve, volumes=volumes, placed=placed,
                   unready_classes=unready_classes(config))


def unready_classes(config: ClusterConfig) -> dict[str, tuple[Cause, str]]:
    """The classes whose status, as listed with the config, says `Ready=False` at their generation, with
    the cause of the condition that failed most recently (`carpool.karpenter_status.nodeclass.not_ready`).
    A class edited since (a generation its status has not seen) is not among them: it is tried again."""
    out: dict[str, tuple[Cause, str]] = {}
    for (kind, name), verdict in config.verdicts.items():
        if kind != EC2NODECLASS_KIND or not verdict.status:
            continue
        found = nodeclass_status.not_ready({"metadata": {"generation": verdict.generation}, "status": verdict.status})
        if found is not None:
            out[name] = nodeclass_status.launch_cause(*found)
    return out


def _ahead_of_use(manifests: Any, deps: Dependencies, resolve: Callable[[Any], list]) -> list[Callable[[], None]]:
    """Reads of what the pools' node classes will be asked for (AMIs, subnets, security groups), each
    kept where its user finds it (`resolve`'s table, `discovery`'s cache). A failure is left for that
    user to meet (and report) where it did before."""
    names = {pool.node_class_name for pool in manifests.nodepools}
    reads: list[Callable[[], None]] = []
    for nc in manifests.nodeclasses:
        if nc.name in names:
            reads += [partial(_quietly, resolve, nc), partial(_quietly, discovery.subnets, nc, deps),
                      partial(_quietly, discovery.security_groups, nc, deps)]
    return reads


def _quietly(read: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):
        read(*args)


def has_claims(pod: Pod) -> bool:
    """Whether the pod mounts a persistent volume claim (its own ephemeral one included)."""
    return any(v.claim_name(pod.name) is not None for v in pod.spec.volumes)


def _volume_topology(deps: Dependencies, pods: Sequence[Pod]) -> VolumeTopology | None:
    """The claims, volumes and StorageClasses of the pods that mount claims, read once per batch (and
    not at all when none does): a zonal volume decides the zone of the node its pod can use."""
    claiming = [p for p in pods if has_claims(p)]
    if not claiming:
        return None
    claims, volumes, classes = deps.cluster.storage_for(claiming)
    return VolumeTopology(classes, volumes, claims)
