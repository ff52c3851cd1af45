"""Offline planning (`carpool plan`): typed manifests + instance types -> scheduler inputs -> a plan.

Why separate from `app/pools.py` (the Lambda path): the CLI runs without AWS, so it cannot resolve AMIs
or read the state tables. Instance types come either from a synthetic JSON list (benchmarks, what-ifs) or
from the shipped catalog snapshot sized with `carpool.sizing` for each pool's EC2NodeClass (AMI family,
kubelet settings, prefix-delegation/custom-networking annotations); every type the pool's requirements
admit is assumed bootable (the AMI mapping needs SSM).

Pods given with `spec.nodeName` set to a node present in the manifests run on it (they use its room and
count for topology); every other pod (including expanded workloads) is pending. DaemonSets give the
per-pool overhead; Nodes carrying `karpenter.sh/nodepool` count towards that pool's limits (every resource
of their capacity, and one node). StorageClasses, PersistentVolumes and PersistentVolumeClaims confine a
pending pod to its volumes' zones; a pod whose claims are not ready to schedule is reported unschedulable.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from pathlib import Path
from typing import Any

from carpool import labels as L
from carpool import lifecycle
from carpool.amis import map_instance_types
from carpool.amis.offline import placeholder_amis
from carpool.api.k8s import Node, Pod
from carpool.api.loader import Manifests
from carpool.app import offline_limits, pools
from carpool.catalog import Catalog
from carpool.coexistence import Coexistence, Verdict
from carpool.quantity import MIB
from carpool.requirements import Requirements
from carpool.resources import CPU, MEMORY, PODS, Resources, add
from carpool.resources import parse as parse_resources
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.scheduling.result import SchedulingResult
from carpool.scheduling.scheduler import ScheduleOptions, schedule
from carpool.scheduling.volumetopology import VolumeTopology
from carpool.state.models import CapacityRecord

Unavailable = frozenset[tuple[str, str, str]]


class PlanInputError(ValueError):
    """Bad planning input, naming the file/field at fault."""


@dataclass
class PlanInputs:
    """Everything `schedule` takes, plus per-pool notes for the person reading the plan."""

    pods: list[si.PodSpec] = field(default_factory=list)
    pools: list[si.PoolSpec] = field(default_factory=list)
    daemonsets: list[si.PodSpec] = field(default_factory=list)
    existing: list[si.ExistingNode] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: pod key -> who serves it: carpool, a node group (Cluster Autoscaler), or nobody, with the reason
    servers: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: pool -> instance type -> "learned" | "extrapolated" | "default" (where its memory figure came from)
    capacity_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    #: pod key -> why it is left out of scheduling (its persistent volume claims cannot be satisfied yet)
    rejected: dict[str, str] = field(default_factory=dict)


# -- instance types -----------------------------------------------------------------------------------
def load_synthetic_types(path: Path | str) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanInputError(f"{path}: cannot read instance types: {exc}") from None
    if not isinstance(data, list):
        raise PlanInputError(f"{path}: expected a JSON list of instance types")
    return data


def synthetic_options(entries: Sequence[Mapping[str, Any]], unavailable: Unavailable = frozenset(),
                      source: str = "instance types") -> list[si.InstanceOption]:
    """`[{name, cpu, memoryMiB, pods, arch?, labels?, requirements?, resources?, overhead?: {cpuMillis,
    memoryMiB}, offerings: [{zone, capacityType, price, available?}]}]` as instance options (allocatable =
    capacity - overhead)."""
    out = []
    for i, e in enumerate(entries):
        where = f"{source}[{i}]"
        try:
            name = str(e["name"])
            cpu, memory_mib, pods = int(e["cpu"]), int(e["memoryMiB"]), int(e["pods"])
            overhead = e.get("overhead") or {}
            offerings = tuple(
                si.Offering(str(o["zone"]), str(o["capacityType"]), float(o["price"]),
                            bool(o.get("available", True)) and (name, o["zone"], o["capacityType"]) not in unavailable)
                for o in e["offerings"]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanInputError(f"{where}: {exc.__class__.__name__}: {exc} (fields: name, cpu, memoryMiB, pods, offerings)") from None
        extended = _extended_resources(e.get("resources"), where)
        capacity = {CPU: cpu * 1000, MEMORY: memory_mib * MIB, PODS: pods, **extended}
        allocatable = {
            CPU: capacity[CPU] - int(overhead.get("cpuMillis", 0)),
            MEMORY: capacity[MEMORY] - int(overhead.get("memoryMiB", 0)) * MIB,
            PODS: pods,
            **extended,
        }
        family, _, size = name.partition(".")
        labels = {
            L.INSTANCE_TYPE: name,
            L.ARCH: str(e.get("arch", "amd64")),
            L.OS: "linux",
            L.INSTANCE_CPU: str(cpu),
            L.INSTANCE_MEMORY: str(memory_mib),
            **({L.INSTANCE_FAMILY: family, L.INSTANCE_SIZE: size} if size else {}),
            **{str(k): str(v) for k, v in (e.get("labels") or {}).items()},
        }
        out.append(si.InstanceOption(name, _type_requirements(labels, e.get("requirements"), where), allocatable,
                                     offerings, capacity))
    return out


def _extended_resources(raw: Any, where: str) -> dict[str, int]:
    """`resources: {nvidia.com/gpu: 4}`: resources beyond cpu/memory/pods that the type offers (capacity
    and allocatable alike, as the kubelet reserves none of them)."""
    try:
        return parse_resources(raw) if raw else {}
    except (TypeError, ValueError) as exc:
        raise PlanInputError(f"{where}.resources: {exc}") from None


def _type_requirements(labels: Mapping[str, str], specs: Any, where: str) -> Requirements:
    """The type's labels as single values, with `requirements: [{key, operator, values}]` replacing a key's
    label: a type may offer several values of one key (an image that boots several OSes) or state that a
    label is absent (`DoesNotExist`), which a single label value cannot say."""
    if not specs:
        return Requirements.from_labels(labels)
    try:
        given = Requirements.from_specs(specs)
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanInputError(f"{where}.requirements: {exc}") from None
    return Requirements.from_labels({k: v for k, v in labels.items() if k not in given}).merge(given)


# -- assembly -----------------------------------------------------------------------------------------
def assemble(
    manifests: Manifests,
    *,
    synthetic: Sequence[Mapping[str, Any]] | None = None,
    catalog: Catalog | None = None,
    unavailable: Iterable[tuple[str, str, str]] = (),
    learned_by_type: Mapping[str, CapacityRecord] | None = None,
) -> PlanInputs:
    """Scheduler inputs from manifests and either synthetic instance types or a catalog."""
    if synthetic is None and catalog is None:
        raise PlanInputError("planning needs instance types: a catalog or a synthetic list")
    gone: Unavailable = frozenset(unavailable)
    out = PlanInputs()
    out.daemonsets = [convert.pod_spec(ds.template_pod()) for ds in manifests.daemonsets]
    nodes = {n.name: n for n in manifests.nodes}
    bound: dict[str, list[Pod]] = {name: [] for name in nodes}
    pending = []
    for pod in manifests.pods:
        if pod.is_terminal() or (pod.is_daemonset_pod() and not pod.spec.node_name):
            continue
        if pod.spec.node_name:  # bound DaemonSet pods use their node's room like any other
            if pod.spec.node_name in bound:
                bound[pod.spec.node_name].append(pod)
            continue
        pending.append(pod)
    volumes = VolumeTopology(manifests.storageclasses, manifests.persistentvolumes, manifests.persistentvolumeclaims)
    out.pods = _pending_specs(pending, Coexistence(manifests.nodepools), out.servers, volumes, out.rejected)
    usage: dict[str, Resources] = {}
    for node in nodes.values():
        owner = node.labels.get(L.NODEPOOL)
        if owner:
            cap = node.capacity() or node.allocatable()
            # every resource counts (a pool's limits may name nvidia.com/gpu or any other), plus the node
            usage[owner] = add(usage.get(owner, {}), cap, {"nodes": 1})
    _pools(out, manifests, synthetic, catalog, gone, usage, learned_by_type)
    for name, node in nodes.items():
        if node.metadata.deletion_timestamp is None:  # a node being deleted takes no new pods
            owner = node.labels.get(L.NODEPOOL)
            out.existing.append(convert.existing_node(node, bound[name], manifests.nodepool(owner) if owner else None,
                                                      _launched_allocatable(node, out.pools)))
    return out


def _launched_allocatable(node: Node, specs: Sequence[si.PoolSpec]) -> Resources | None:
    """What the claim behind a node still coming up launched: its pool's sized figure for the node's
    instance type, the allocatable carpool records on a claim at launch. None for an initialized node (its
    kubelet's report is final) and for nodes of no pool or of a type the pool does not offer."""
    owner, instance_type = node.labels.get(L.NODEPOOL), node.labels.get(L.INSTANCE_TYPE)
    if not owner or not instance_type or lifecycle.is_initialized(node):
        return None
    spec = next((p for p in specs if p.name == owner), None)
    option = next((o for o in spec.instance_types if o.name == instance_type), None) if spec else None
    return dict(option.allocatable) if option is not None else None


def _pools(out: PlanInputs, manifests: Manifests, synthetic: Sequence[Mapping[str, Any]] | None,
           catalog: Catalog | None, gone: Unavailable, usage: Mapping[str, Resources],
           learned_by_type: Mapping[str, CapacityRecord] | None) -> None:
    """The pools' scheduler specs (with their instance types) and notes, into `out`."""
    if synthetic is not None:
        options = synthetic_options(synthetic, gone)
        for pool in manifests.nodepools:
            out.notes.setdefault(pool.name, [])
            if not options:
                out.notes[pool.name].append("no instance type is admitted by the requirements")
            out.pools.append(convert.pool_spec(pool, options, usage.get(pool.name, {})))
        return
    assert catalog is not None
    # the same assembly as the provisioner, with placeholder AMIs (no AWS offline) and the node classes'
    # CNI annotations only (no aws-node DaemonSet to read)
    learned = _offline_learned(manifests, catalog, learned_by_type or {})
    prepared = pools.prepare(manifests, catalog, placeholder_amis, {}, learned, set(gone), dict(usage))
    out.pools = prepared.specs
    out.capacity_sources = prepared.capacity_sources
    for name, notes in prepared.notes.items():
        out.notes.setdefault(name, []).extend(
            [*notes, "AMIs are not resolved offline: placeholder images stand for the alias's variants"])


def _pending_specs(pods: Sequence[Pod], classifier: Coexistence, servers: dict[str, tuple[str, str]],
                   volumes: VolumeTopology | None = None, rejected: dict[str, str] | None = None) -> list[si.PodSpec]:
    """The scheduler's view of the pending pods carpool serves; `servers` gets who serves each pod.

    A plan of many pods is mostly replicas: pods whose spec is identical get the same verdict (it depends on
    the spec alone), and those that also share namespace, labels and owner the same scheduler view but for
    their key and uid. So each distinct shape is classified and converted once, which at 100,000 pods turns
    the per-pod work into one JSON serialization of the spec (done by pydantic-core, in Rust).
    Pods with volumes are converted one by one: their claims (a generic ephemeral volume's is named after
    the pod) and so their zones differ from replica to replica. A pod whose claims cannot be satisfied
    yet goes to `rejected` with the reason, as Karpenter skips it (`ValidatePersistentVolumeClaims`).
    """
    verdicts: dict[str, Verdict] = {}
    shapes: dict[tuple[Any, ...], si.PodSpec] = {}
    out = []
    for pod in pods:
        spec_json = pod.spec.model_dump_json()
        verdict = verdicts.get(spec_json)
        if verdict is None:
            verdict = verdicts[spec_json] = classifier.serves(pod)
        servers[pod.key] = (verdict.server.value, verdict.reason)
        if verdict.leave_alone:  # as the provisioner: node-group pods are Cluster Autoscaler's
            continue
        if volumes is not None and pod.spec.volumes and any(v.claim_name(pod.name) for v in pod.spec.volumes):
            claimed = convert.pod_spec_with_volumes(pod, volumes)
            if isinstance(claimed, str):
                if rejected is not None:
                    rejected[pod.key] = claimed
            else:
                out.append(claimed)
            continue
        owners = tuple((r.kind, r.name, r.controller) for r in pod.metadata.owner_references)
        shape = (spec_json, pod.namespace, tuple(pod.labels.items()), owners)
        known = shapes.get(shape)
        if known is None:
            shapes[shape] = converted = convert.pod_spec(pod)
        else:
            converted = si.PodSpec(pod.key, dict(known.requests), dict(known.labels), known.namespace,
                                   pod.metadata.uid or pod.key, *_SHARED_FIELDS(known))
        out.append(converted)
    return out


_POD_FIELDS = tuple(f.name for f in dataclasses.fields(si.PodSpec))
assert _POD_FIELDS[:5] == ("key", "requests", "labels", "namespace", "uid"), _POD_FIELDS
#: the PodSpec fields replicas of one shape share (`dataclasses.replace` costs twice as much per pod)
_SHARED_FIELDS = attrgetter(*_POD_FIELDS[5:])


def _offline_learned(
    manifests: Manifests, catalog: Catalog, by_type: Mapping[str, CapacityRecord]
) -> dict[tuple[str, str], CapacityRecord]:
    """Offline there are no real image ids, so learned records (from `carpool capacity --json`) are matched
    by instance type and re-keyed to the placeholder AMI each node class maps that type to."""
    out: dict[tuple[str, str], CapacityRecord] = {}
    types = [catalog.types[t] for t in by_type if t in catalog.types]
    for nodeclass in manifests.nodeclasses:
        for name, ami in map_instance_types(placeholder_amis(nodeclass), types).items():
            out[(name, ami.id)] = by_type[name]
    return out


def load_capacity_rows(path: Path | str, now: datetime) -> dict[str, CapacityRecord]:
    """`carpool capacity --json` output -> learned record per instance type (newest observation wins)."""
    try:
        rows = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanInputError(f"{path}: cannot read capacity rows: {exc}") from None
    if not isinstance(rows, list):
        raise PlanInputError(f"{path}: expected the JSON list `carpool capacity --json` prints")
    out: dict[str, CapacityRecord] = {}
    for i, row in enumerate(rows):
        try:
            memory = int(row["memoryMiB"]) * MIB
            record = CapacityRecord(instance_type=row["instanceType"], image_id=row.get("imageId", ""),
                                    ami_family=row.get("amiFamily", ""), capacity={MEMORY: memory},
                                    first_seen=now, last_seen=now, expires_at=now + timedelta(days=60))
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanInputError(f"{path}: row [{i}]: {exc!r} (needs instanceType and memoryMiB)") from None
        out[record.instance_type] = record
    return out


def plan(inputs: PlanInputs, options: ScheduleOptions | None = None) -> SchedulingResult:
    """Schedule the inputs; pods a pool's limit held back are planned again once the claims launched
    (`offline_limits`, as the provisioner does); pods left out for their volume claims are reported
    unschedulable with why."""
    chosen = options or ScheduleOptions()

    def again(pods: Sequence[si.PodSpec], pools: Sequence[si.PoolSpec], in_flight: Sequence[si.InFlightClaim],
              claim_name: Callable[[str, int], str]) -> SchedulingResult:
        return schedule(pods, pools, in_flight=in_flight, existing=inputs.existing, daemonsets=inputs.daemonsets,
                        options=dataclasses.replace(chosen, claim_name=claim_name))

    result = schedule(inputs.pods, inputs.pools, existing=inputs.existing, daemonsets=inputs.daemonsets,
                      options=options)
    result = offline_limits.catch_up(result, inputs.pods, inputs.pools, again)
    for key, reason in inputs.rejected.items():
        result.unschedulable[key] = {"*": reason}
    return result
