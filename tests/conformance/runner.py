"""Runs a Karpenter conformance case (a YAML file, schema in README.md) through `carpool plan`'s path.

A case describes the cluster a Karpenter Go test builds and what the test asserts. The runner turns it into
the manifests a user would hand `carpool plan` (NodePools, EC2NodeClasses, Nodes, DaemonSets, Pods) plus a
synthetic instance-type list, and calls the same library functions as the CLI: `load` -> `assemble` ->
`plan`. Where a Go test provisions more than once, each round's claims are "launched" the way Karpenter's
fake cloud provider launches them (`fake.CloudProvider.Create`: the cheapest option, the first available
offering the claim admits, reserved capacity first) and become Nodes for the next round.

Instance types follow Karpenter's fake provider (`pkg/cloudprovider/fake/instancetype.go`): `NewInstanceType`
defaults, `InstanceTypes(n)`, `InstanceTypesAssorted()` and the default cloud provider's six types.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from carpool import labels as L
from carpool import quantity
from carpool.api.loader import ManifestErrors, load
from carpool.app.offline_planning import assemble, plan
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.scheduling.scheduler import ScheduleOptions

HERE = Path(__file__).parent
CASES = HERE / "cases"
DIFFERENCES = HERE.parents[1] / "docs" / "conformance.md"

GI = 2**30
MI = 2**20
VENDOR_A = "fake.com/vendor-a"
VENDOR_B = "fake.com/vendor-b"
#: fake.NewInstanceType's kube-reserved (every fake type's only overhead)
FAKE_OVERHEAD = {"cpu": "100m", "memory": "10Mi"}
FAKE_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
DEFAULT_OFFERINGS = (("spot", "test-zone-1"), ("spot", "test-zone-2"), ("on-demand", "test-zone-1"),
                     ("on-demand", "test-zone-2"), ("on-demand", "test-zone-3"))
#: the fake provider registers three labels of its own as well-known (`size`, `special`, `integer`); carpool
#: is the AWS provider, whose well-known instance labels play the same roles: a size every type has, a
#: label only some types have (GPU name), and an integer (the vCPU count, exactly what `integer` holds)
SIZE_LABEL = L.INSTANCE_SIZE
EXOTIC_LABEL = L.INSTANCE_GPU_NAME
INTEGER_LABEL = L.INSTANCE_CPU
NODECLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


class CaseError(Exception):
    """The case file itself is malformed (not a carpool failure)."""


# -- instance types ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FakeType:
    """One instance type as the fake provider builds it; `labels` are what a launched node carries."""

    name: str
    capacity: dict[str, int]
    allocatable: dict[str, int]
    requirements: list[dict[str, Any]]
    labels: dict[str, str]
    offerings: list[dict[str, Any]]
    arch: str

    def synthetic(self) -> dict[str, Any]:
        """The `carpool plan --instance-types` entry for this type."""
        extended = {k: v for k, v in self.capacity.items() if k not in ("cpu", "memory", "pods")}
        cpu = self.capacity["cpu"]
        if cpu % 1000:
            raise CaseError(f"{self.name}: the synthetic list takes whole cpus")
        overhead = {k: self.capacity[k] - self.allocatable[k] for k in ("cpu", "memory")}
        return {
            "name": self.name,
            "cpu": cpu // 1000,
            "memoryMiB": self.capacity["memory"] // MI,
            "pods": self.capacity["pods"],
            "arch": self.arch,
            "labels": {k: v for k, v in self.labels.items() if k not in (L.INSTANCE_TYPE, L.ARCH)},
            "requirements": self.requirements,
            "resources": {k: str(v) for k, v in extended.items()},
            "overhead": {"cpuMillis": overhead["cpu"], "memoryMiB": overhead["memory"] // MI},
            "offerings": self.offerings,
        }


def _qty(name: str, value: Any) -> int:
    return quantity.resource_value(name, value)


def price_from_resources(capacity: Mapping[str, int]) -> float:
    """fake.PriceFromResources: 0.1 per cpu, 0.1 per GB of memory, 1.0 per GPU vendor resource present."""
    price = 0.0
    for name, value in capacity.items():
        if name == "cpu":
            price += 0.1 * value / 1000
        elif name == "memory":
            price += 0.1 * value / 1e9
        elif name in (VENDOR_A, VENDOR_B):
            price += 1.0
    return price


def new_instance_type(spec: Mapping[str, Any]) -> FakeType:
    """fake.NewInstanceType with the options a case gives (`resources`, `arch`, `os`, `offerings`,
    `requirements`, `overhead`)."""
    name = str(spec["name"])
    given = {str(k): _qty(str(k), v) for k, v in (spec.get("resources") or {}).items()}
    capacity = {"cpu": 4000, "memory": 4 * GI, "pods": 5}
    capacity.update({k: v for k, v in given.items() if v})
    # price: what the type was given (PriceFromResources runs on cfg.Resources after the defaults fill in)
    price = price_from_resources(capacity)
    # `addedCapacity`: resources a Go test adds to `Capacity` after NewInstanceType (the price stays)
    capacity.update({str(k): _qty(str(k), v) for k, v in (spec.get("addedCapacity") or {}).items()})
    offerings = [
        {"zone": o["zone"], "capacityType": o["capacityType"], "price": float(o.get("price", price)),
         "available": bool(o.get("available", True))}
        for o in (spec.get("offerings") or [])
    ] or [{"zone": z, "capacityType": ct, "price": price, "available": True} for ct, z in DEFAULT_OFFERINGS]
    arch = str(spec.get("arch", "amd64"))
    oses = sorted(spec.get("os") or ["linux", "windows", "darwin"])
    large = capacity["cpu"] > 4000 and capacity["memory"] > 8 * GI
    requirements: list[dict[str, Any]] = [
        {"key": L.OS, "operator": "In", "values": oses},
        {"key": SIZE_LABEL, "operator": "In", "values": ["large" if large else "small"]},
        ({"key": EXOTIC_LABEL, "operator": "In", "values": ["optional"]} if large
         else {"key": EXOTIC_LABEL, "operator": "DoesNotExist"}),
        {"key": INTEGER_LABEL, "operator": "In", "values": [str(capacity["cpu"] // 1000)]},
    ]
    extra = [dict(r) for r in spec.get("requirements") or []]
    merged = Requirements.from_specs(requirements).merge(Requirements.from_specs(extra))
    requirements = merged.specs()
    overhead = {k: _qty(k, v) for k, v in (spec.get("overhead") or FAKE_OVERHEAD).items()}
    allocatable = {k: v - overhead.get(k, 0) for k, v in capacity.items()}
    labels = {L.INSTANCE_TYPE: name, L.ARCH: arch}
    for key, req in merged.items():  # a launched node carries the first value of each In requirement
        if not req.complement and req.order:
            labels[key] = sorted(req.values)[0]
    return FakeType(name, capacity, allocatable, requirements, labels, offerings, arch)


def _default_types() -> list[dict[str, Any]]:
    """fake.CloudProvider.GetInstanceTypes without overrides."""
    return [
        {"name": "default-instance-type"},
        {"name": "small-instance-type", "resources": {"cpu": "2", "memory": "2Gi"}},
        {"name": "gpu-vendor-instance-type", "resources": {VENDOR_A: "2"}},
        {"name": "gpu-vendor-b-instance-type", "resources": {VENDOR_B: "2"}},
        {"name": "arm-instance-type", "arch": "arm64", "os": ["ios", "linux", "windows", "darwin"],
         "resources": {"cpu": "16", "memory": "128Gi"}},
        {"name": "single-pod-instance-type", "resources": {"pods": "1"}},
    ]


def _fake_types(n: int) -> list[dict[str, Any]]:
    """fake.InstanceTypes(n): fake-it-i with i+1 cpus, 2(i+1)Gi memory, 10(i+1) pods."""
    return [{"name": f"fake-it-{i}", "resources": {"cpu": str(i + 1), "memory": f"{(i + 1) * 2}Gi",
                                                   "pods": str((i + 1) * 10)}} for i in range(n)]


def _assorted_types() -> list[dict[str, Any]]:
    """fake.InstanceTypesAssorted(): one offering each, over cpu x memory x zone x capacity type x os x arch."""
    out = []
    for cpu, mem, zone, ct, os_, arch in itertools.product(
        (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8, 16, 32, 64, 128), FAKE_ZONES, ("spot", "on-demand"),
        ("linux", "windows"), ("amd64", "arm64"),
    ):
        out.append({"name": f"{cpu}-cpu-{mem}-mem-{arch}-{os_}-{zone}-{ct}", "arch": arch, "os": [os_],
                    "resources": {"cpu": str(cpu), "memory": f"{mem}Gi"},
                    "offerings": [{"zone": zone, "capacityType": ct}]})
    return out


def instance_types(spec: Any) -> list[FakeType]:
    """The case's `instanceTypes` (a list, or a generator with optional `extra` types)."""
    if spec is None:
        spec = {"generator": "default"}
    if isinstance(spec, list):
        return [new_instance_type(s) for s in spec]
    gen = spec.get("generator", "default")
    if gen == "default":
        raw = _default_types()
    elif gen == "assorted":
        raw = _assorted_types()
    elif isinstance(gen, Mapping) and "fake" in gen:
        raw = _fake_types(int(gen["fake"]))
    else:
        raise CaseError(f"unknown instance type generator {gen!r}")
    patches = spec.get("patch") or {}  # type name -> fields merged into that generated type's options
    raw = [{**s, **patches.get(s["name"], {})} for s in raw]
    return [new_instance_type(s) for s in [*raw, *(spec.get("extra") or [])]]


# -- manifests ----------------------------------------------------------------------------------------------
def nodepool_doc(doc: Mapping[str, Any]) -> dict[str, Any]:
    out = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", **copy.deepcopy(dict(doc))}
    out.setdefault("metadata", {}).setdefault("name", "default")
    spec = out.setdefault("spec", {})
    tspec = spec.setdefault("template", {}).setdefault("spec", {})
    tspec.setdefault("nodeClassRef", dict(NODECLASS_REF))
    tspec.setdefault("requirements", [])
    return out


DEFAULT_NODEPOOL = {"metadata": {"name": "default"}, "spec": {"template": {"spec": {"requirements": [
    {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand", "reserved"]}]}}}}


def nodeclass_docs(docs: Sequence[Mapping[str, Any]], pools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The case's node classes plus a minimal EC2NodeClass for every class a pool names and none defines."""
    out = [{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", **d} for d in docs]
    named = {d["metadata"]["name"] for d in out}
    for pool in pools:
        ref = pool["spec"]["template"]["spec"]["nodeClassRef"]
        if ref.get("kind") == "EC2NodeClass" and ref["name"] not in named:
            named.add(ref["name"])
            out.append({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                        "metadata": {"name": ref["name"]},
                        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "conformance"}}],
                                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "conformance"}}]}})
    return out


_POD_KEYS = {"name", "namespace", "labels", "annotations", "requests", "limits", "nodeSelector", "nodeRequirements",
             "nodeRequirementTerms", "nodePreferences", "weightedNodePreferences", "tolerations",
             "topologySpreadConstraints", "podAffinity", "podAntiAffinity", "podAffinityPreferences",
             "podAntiAffinityPreferences", "hostPorts", "priority", "nodeName", "batch", "count", "ownerReferences",
             "phase", "uid", "deletionTimestamp"}


def _affinity(p: Mapping[str, Any]) -> dict[str, Any] | None:
    aff: dict[str, Any] = {}
    terms = p.get("nodeRequirementTerms") or ([p["nodeRequirements"]] if p.get("nodeRequirements") else [])
    node: dict[str, Any] = {}
    if terms:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}
    # test.PodOptions.NodePreferences: one preferred term of weight 1 holding every expression
    prefs = [{"weight": 1, "preference": {"matchExpressions": list(p["nodePreferences"])}}] if p.get("nodePreferences") else []
    prefs += [{"weight": w["weight"], "preference": {"matchExpressions": list(w["requirements"])}}
              for w in p.get("weightedNodePreferences") or []]
    if prefs:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = prefs
    if node:
        aff["nodeAffinity"] = node
    for key, kind in (("podAffinity", "podAffinity"), ("podAntiAffinity", "podAntiAffinity")):
        block: dict[str, Any] = {}
        if p.get(key):
            block["requiredDuringSchedulingIgnoredDuringExecution"] = list(p[key])
        if p.get(key + "Preferences"):
            block["preferredDuringSchedulingIgnoredDuringExecution"] = list(p[key + "Preferences"])
        if block:
            aff[kind] = block
    return aff or None


def pod_template(p: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pod shorthand (test.PodOptions) -> (metadata, spec)."""
    resources = {k: dict(p[k]) for k in ("requests", "limits") if p.get(k)}
    container: dict[str, Any] = {"name": "app", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9"}
    if resources:
        container["resources"] = resources
    if p.get("hostPorts"):
        container["ports"] = [{"containerPort": 80, "hostPort": int(hp), "protocol": "TCP"} for hp in p["hostPorts"]]
    spec: dict[str, Any] = {"containers": [container]}
    for key in ("nodeSelector", "tolerations", "topologySpreadConstraints", "priority", "nodeName"):
        if p.get(key) is not None:
            spec[key] = p[key]
    aff = _affinity(p)
    if aff:
        spec["affinity"] = aff
    for key, value in p.items():
        if key not in _POD_KEYS:
            spec[key] = value
    meta: dict[str, Any] = {"labels": dict(p.get("labels") or {})}
    if p.get("annotations"):
        meta["annotations"] = dict(p["annotations"])
    if p.get("ownerReferences"):
        meta["ownerReferences"] = list(p["ownerReferences"])
    if p.get("deletionTimestamp"):
        meta["deletionTimestamp"] = p["deletionTimestamp"]
    return meta, spec


@dataclass
class CasePod:
    """One pod of the case: its name ("namespace/name" key), round and document."""

    key: str
    name: str
    batch: int
    doc: dict[str, Any]


def case_pods(entries: Sequence[Mapping[str, Any]]) -> list[CasePod]:
    out: list[CasePod] = []
    for e in entries:
        if "spec" in e:  # a full Pod document
            doc = {"apiVersion": "v1", "kind": "Pod", **{k: v for k, v in e.items() if k != "batch"}}
            meta = doc.setdefault("metadata", {})
            meta.setdefault("namespace", "default")
            out.append(CasePod(f"{meta['namespace']}/{meta['name']}", meta["name"], int(e.get("batch", 1)), doc))
            continue
        count = e.get("count")
        names = [f"{e['name']}-{i}" for i in range(int(count))] if count is not None else [e["name"]]
        for name in names:
            meta, spec = pod_template(e)
            ns = e.get("namespace", "default")
            meta.update({"name": name, "namespace": ns, "uid": e.get("uid") or f"uid-{ns}-{name}"})
            doc = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                   "status": {"phase": e.get("phase", "Pending"), "conditions": [
                       {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
            out.append(CasePod(f"{ns}/{name}", name, int(e.get("batch", 1)), doc))
    return out


def daemonset_doc(e: Mapping[str, Any], index: int) -> dict[str, Any]:
    if "spec" in e:
        return {"apiVersion": "apps/v1", "kind": "DaemonSet", **e}
    meta, spec = pod_template(e)
    name = e.get("name", f"daemonset-{index}")
    meta["labels"] = meta["labels"] or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": e.get("namespace", "default")},
            "spec": {"selector": {"matchLabels": meta["labels"]}, "template": {"metadata": meta, "spec": spec}}}


@dataclass
class Node:
    """A node of the simulated cluster: a case's existing node or a claim launched in an earlier round."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, str]
    capacity: dict[str, str]
    taints: list[dict[str, str]]
    new: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)  # other metadata (deletionTimestamp, finalizers)

    def doc(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {**self.metadata, "name": self.name, "labels": self.labels},
                "spec": {"taints": self.taints} if self.taints else {},
                "status": {"allocatable": self.allocatable, "capacity": self.capacity}}


def _resource_strings(rl: Mapping[str, int]) -> dict[str, str]:
    return {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in rl.items()}


def node_from_case(e: Mapping[str, Any], types: Mapping[str, FakeType]) -> Node:
    if "metadata" in e:  # a full Node document
        status = e.get("status") or {}
        meta = {k: v for k, v in e["metadata"].items() if k not in ("name", "labels")}
        return Node(e["metadata"]["name"], dict(e["metadata"].get("labels") or {}),
                    dict(status.get("allocatable") or {}), dict(status.get("capacity") or status.get("allocatable") or {}),
                    list((e.get("spec") or {}).get("taints") or []), metadata=meta)
    labels: dict[str, str] = {}
    allocatable = {k: str(v) for k, v in (e.get("allocatable") or {}).items()}
    capacity = {k: str(v) for k, v in (e.get("capacity") or {}).items()}
    if e.get("instanceType"):
        t = types[e["instanceType"]]
        labels.update(t.labels)
        offering = t.offerings[0]
        labels.update({L.ZONE: offering["zone"], L.CAPACITY_TYPE: offering["capacityType"]})
        allocatable = allocatable or _resource_strings(t.allocatable)
        capacity = capacity or _resource_strings(t.capacity)
    labels.update({k: str(v) for k, v in (e.get("labels") or {}).items()})
    labels.setdefault(L.HOSTNAME, e["name"])
    return Node(e["name"], labels, allocatable, capacity or dict(allocatable), list(e.get("taints") or []))


# -- launching (fake.CloudProvider.Create) -----------------------------------------------------------------
def _admits(claim: PlannedClaim, key: str, value: str) -> bool:
    req: Requirement | None = claim.requirements.get(key)
    return req is None or req.has(value)


def launch(claim: PlannedClaim, types: Mapping[str, FakeType], pool_doc: Mapping[str, Any], name: str) -> Node:
    """The node Karpenter's fake cloud provider creates for a claim: the cheapest option, its first available
    offering the claim admits (reserved first), labels from the type, the offering and the claim."""
    if not claim.instance_types:
        raise CaseError(f"claim {claim.name} has no instance type")
    t = types[claim.instance_types[0].name]
    offers = [o for o in t.offerings if o["available"] and _admits(claim, L.ZONE, o["zone"])
              and _admits(claim, L.CAPACITY_TYPE, o["capacityType"])]
    if not offers:
        raise CaseError(f"claim {claim.name}: {t.name} has no offering the claim admits")
    offer = next((o for o in offers if o["capacityType"] == "reserved"), offers[0])
    labels = dict(t.labels)
    labels.update({L.ZONE: offer["zone"], L.CAPACITY_TYPE: offer["capacityType"]})
    labels.update(claim.labels)
    labels.update({L.NODEPOOL: claim.pool, L.HOSTNAME: name, "karpenter.sh/registered": "true"})
    tspec = pool_doc["spec"]["template"]["spec"]
    taints = [*tspec.get("taints", []), *tspec.get("startupTaints", [])]
    return Node(name, labels, _resource_strings(t.allocatable), _resource_strings(t.capacity),
                [dict(x) for x in taints], new=True)


# -- running ----------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """The simulated cluster after every round."""

    pods: dict[str, CasePod]
    nodes: dict[str, Node]
    bound: dict[str, str]  # pod key -> node name
    pending: list[str]  # keys of the pods carpool was asked to place (every round)
    last: SchedulingResult
    claims: list[PlannedClaim] = field(default_factory=list)  # every round's claims
    last_claims: list[PlannedClaim] = field(default_factory=list)
    claim_of: dict[str, PlannedClaim] = field(default_factory=dict)  # pod key -> claim it went to
    launched: list[Node] = field(default_factory=list)  # the final round's new nodes
    names: dict[str, str] = field(default_factory=dict)  # short name -> key
    type_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # instance type -> its node labels

    def key(self, name: str) -> str:
        if name in self.pods:
            return name
        if name in self.names:
            return self.names[name]
        raise CaseError(f"no pod named {name!r}")

    def keys(self, names: Any) -> list[str]:
        if names == "all":
            return list(self.pending)
        return [self.key(str(n)) for n in names]


def run_case(case: Mapping[str, Any]) -> Outcome:
    types = {t.name: t for t in instance_types(case.get("instanceTypes"))}
    synthetic = [t.synthetic() for t in types.values()]
    pools = [nodepool_doc(d) for d in case.get("nodePools", [DEFAULT_NODEPOOL])]
    pool_by_name = {p["metadata"]["name"]: p for p in pools}
    static = [*pools, *nodeclass_docs(case.get("nodeClasses") or [], pools), *(case.get("objects") or []),
              *(daemonset_doc(d, i) for i, d in enumerate(case.get("daemonSets") or []))]
    nodes = {n.name: n for n in (node_from_case(e, types) for e in case.get("nodes") or [])}
    pods = case_pods(case.get("pods") or [])
    by_key = {p.key: p for p in pods}
    if len(by_key) != len(pods):
        raise CaseError("duplicate pod names")
    names = {}
    for p in pods:
        names.setdefault(p.name, p.key)
    bound = {p.key: p.doc["spec"]["nodeName"] for p in pods if p.doc["spec"].get("nodeName")}
    outcome = Outcome(by_key, nodes, bound, [], SchedulingResult(), names=names,
                      type_labels={t.name: t.labels for t in types.values()})
    for batch in sorted({p.batch for p in pods if p.key not in bound} or {1}):
        round_pods = [p for p in pods if p.batch == batch and p.key not in bound]
        docs = [*static, *(n.doc() for n in nodes.values())]
        docs += [_bound_doc(p.doc, bound[p.key]) for p in pods if p.key in bound]
        docs += [p.doc for p in round_pods]
        manifests = load(docs)
        inputs = assemble(manifests, synthetic=synthetic)
        result = plan(inputs, ScheduleOptions(max_instance_types=None))
        outcome.pending += [p.key for p in round_pods]
        outcome.last = result
        outcome.last_claims = list(result.claims)
        outcome.claims += result.claims
        launched = {}
        for claim in result.claims:
            # each round names its claims from 1 again: the node's name carries the round
            node = launch(claim, types, pool_by_name[claim.pool], f"round{batch}-{claim.name}")
            nodes[node.name] = launched[claim.name] = node
            for key in claim.pods:
                outcome.claim_of[key] = claim
        for key, placement in result.placements.items():
            bound[key] = launched[placement.target].name if placement.kind == "claim" else placement.target
        outcome.launched = list(launched.values())
    return outcome


def _bound_doc(doc: Mapping[str, Any], node: str) -> dict[str, Any]:
    spec = {**doc["spec"], "nodeName": node}
    phase = (doc.get("status") or {}).get("phase")
    return {**doc, "spec": spec, "status": {"phase": phase if phase in ("Succeeded", "Failed") else "Running"}}


# -- expectations ---------------------------------------------------------------------------------------
Check = Callable[[Mapping[str, Any], Outcome], list[str]]
EXPECTATIONS: dict[str, Check] = {}


def expectation(name: str) -> Callable[[Check], Check]:
    """Register an expectation kind: `(check, outcome) -> failures` where `check[name]` is its argument."""

    def register(fn: Check) -> Check:
        EXPECTATIONS[name] = fn
        return fn

    return register


def _names(keys: Iterable[str]) -> list[str]:
    return sorted(k.split("/", 1)[1] if k.startswith("default/") else k for k in keys)


def _reason(out: Outcome, key: str) -> str:
    reasons = out.last.unschedulable.get(key)
    return f" ({'; '.join(f'{p}: {r}' for p, r in reasons.items())})" if reasons else ""


@expectation("scheduled")
def _scheduled(check: Mapping[str, Any], out: Outcome) -> list[str]:
    return [f"{_names([k])[0]} not scheduled{_reason(out, k)}" for k in out.keys(check["scheduled"]) if k not in out.bound]


@expectation("unschedulable")
def _unschedulable(check: Mapping[str, Any], out: Outcome) -> list[str]:
    return [f"{_names([k])[0]} scheduled on {out.bound[k]}, expected unschedulable"
            for k in out.keys(check["unschedulable"]) if k in out.bound]


@expectation("rejected")
def _rejected(check: Mapping[str, Any], out: Outcome) -> list[str]:
    """`rejected: <text>`: loading the manifests fails with an error containing the text (checked in
    `check_case`; reaching this function means they loaded)."""
    return [f"manifests accepted, expected a rejection saying {check['rejected']!r}"]


@expectation("nodeClaims")
def _node_claims(check: Mapping[str, Any], out: Outcome) -> list[str]:
    n = len(out.last_claims)
    return [] if n == check["nodeClaims"] else [f"{n} new claims, expected {check['nodeClaims']}: {_claims(out.last_claims)}"]


@expectation("nodeClaimsTotal")
def _node_claims_total(check: Mapping[str, Any], out: Outcome) -> list[str]:
    n = len(out.claims)
    return [] if n == check["nodeClaimsTotal"] else [f"{n} claims over all rounds, expected {check['nodeClaimsTotal']}"]


def _claims(claims: Sequence[PlannedClaim]) -> str:
    return "; ".join(f"{c.name}[{c.pool}]: {len(c.pods)} pods, {c.instance_types[0].name if c.instance_types else '-'}"
                     for c in claims)


@expectation("nodes")
def _nodes(check: Mapping[str, Any], out: Outcome) -> list[str]:
    keys = out.keys(check["pods"]) if "pods" in check else [k for k in out.pending if k in out.bound]
    used = {out.bound[k] for k in keys if k in out.bound}
    return [] if len(used) == check["nodes"] else [f"pods on {len(used)} nodes {sorted(used)}, expected {check['nodes']}"]


@expectation("sameNode")
def _same_node(check: Mapping[str, Any], out: Outcome) -> list[str]:
    keys = out.keys(check["sameNode"])
    where = {_names([k])[0]: out.bound.get(k) for k in keys}
    return [] if len(set(where.values())) == 1 and None not in where.values() else [f"not on one node: {where}"]


@expectation("differentNodes")
def _different_nodes(check: Mapping[str, Any], out: Outcome) -> list[str]:
    keys = out.keys(check["differentNodes"])
    where = [out.bound.get(k) for k in keys]
    if None in where or len(set(where)) != len(where):
        return [f"not on distinct nodes: { {_names([k])[0]: out.bound.get(k) for k in keys} }"]
    return []


def _label_failures(labels: Mapping[str, str], check: Mapping[str, Any], what: str) -> list[str]:
    failures = []
    for k, v in (check.get("labels") or {}).items():
        if labels.get(k) != str(v):
            failures.append(f"{what}: label {k}={labels.get(k)!r}, expected {v!r}")
    for k, vs in (check.get("labelsIn") or {}).items():
        if labels.get(k) not in [str(v) for v in vs]:
            failures.append(f"{what}: label {k}={labels.get(k)!r}, expected one of {vs}")
    for k, vs in (check.get("labelsNotIn") or {}).items():
        if labels.get(k) in [str(v) for v in vs]:
            failures.append(f"{what}: label {k}={labels.get(k)!r}, expected none of {vs}")
    for k in check.get("labelsAbsent") or []:
        if k in labels:
            failures.append(f"{what}: label {k}={labels[k]!r}, expected absent")
    return failures


@expectation("differentTypes")
def _different_types(check: Mapping[str, Any], out: Outcome) -> list[str]:
    """`differentTypes: [a, b]`: the pods' nodes have pairwise different instance types."""
    keys = out.keys(check["differentTypes"])
    types = [out.nodes[out.bound[k]].labels.get(L.INSTANCE_TYPE) if k in out.bound else None for k in keys]
    if None in types or len(set(types)) != len(types):
        return [f"instance types not distinct: {dict(zip(_names(keys), types, strict=True))}"]
    return []


@expectation("differentZones")
def _different_zones(check: Mapping[str, Any], out: Outcome) -> list[str]:
    """`differentZones: [a, b]`: the pods' nodes are in pairwise different zones."""
    keys = out.keys(check["differentZones"])
    zones = [out.nodes[out.bound[k]].labels.get(L.ZONE) if k in out.bound else None for k in keys]
    if None in zones or len(set(zones)) != len(zones):
        return [f"zones not distinct: {dict(zip(_names(keys), zones, strict=True))}"]
    return []


@expectation("scheduledCount")
def _scheduled_count(check: Mapping[str, Any], out: Outcome) -> list[str]:
    """`scheduledCount: n`: how many of the pending pods got a place."""
    n = sum(1 for k in out.pending if k in out.bound)
    return [] if n == check["scheduledCount"] else [f"{n} pods scheduled, expected {check['scheduledCount']}"]


@expectation("podNode")
def _pod_node(check: Mapping[str, Any], out: Outcome) -> list[str]:
    c = check["podNode"]
    key = out.key(c["pod"])
    node_name = out.bound.get(key)
    if node_name is None:
        return [f"{c['pod']} not scheduled{_reason(out, key)}"]
    node = out.nodes[node_name]
    failures = _label_failures(node.labels, c, f"{c['pod']} on {node_name}")
    if "existing" in c and node_name != c["existing"]:
        failures.append(f"{c['pod']} on {node_name}, expected existing node {c['existing']}")
    if "new" in c and node.new != bool(c["new"]):
        failures.append(f"{c['pod']} on {node_name}: new={node.new}, expected {c['new']}")
    return failures


@expectation("nodeLabels")
def _node_labels(check: Mapping[str, Any], out: Outcome) -> list[str]:
    c = check["nodeLabels"]
    failures = [f for node in out.launched for f in _label_failures(node.labels, c, node.name)]
    return failures if out.launched else ["no node launched"]


@expectation("claimOptions")
def _claim_options(check: Mapping[str, Any], out: Outcome) -> list[str]:
    c = check["claimOptions"]
    if "pod" in c:
        key = out.key(c["pod"])
        if key not in out.claim_of:
            return [f"{c['pod']} is on no new claim"]
        claims = [out.claim_of[key]]
    else:
        claims = out.last_claims
    if not claims:
        return ["no claim"]
    failures: list[str] = []
    for claim in claims:
        names = [t.name for t in claim.instance_types]
        failures += [f"{claim.name}: {t} not an option" for t in c.get("include") or [] if t not in names]
        failures += [f"{claim.name}: {t} is an option" for t in c.get("exclude") or [] if t in names]
        if "exactly" in c and sorted(names) != sorted(c["exactly"]):
            failures.append(f"{claim.name}: options {sorted(names)}, expected {sorted(c['exactly'])}")
        if "count" in c and claim.option_count != c["count"]:
            failures.append(f"{claim.name}: {claim.option_count} options, expected {c['count']}")
        for k, vs in (c.get("allLabels") or {}).items():
            allowed = {str(v) for v in vs}
            bad = [n for n in names if out.type_labels.get(n, {}).get(k) not in allowed]
            if bad:
                failures.append(f"{claim.name}: options {bad} lack {k} in {sorted(allowed)}")
    return failures


@expectation("skew")
def _skew(check: Mapping[str, Any], out: Outcome) -> list[str]:
    c = check["skew"]
    counts = _domain_counts(c, out)
    got = sorted(counts.values())
    failures = []
    if "counts" in c and got != sorted(c["counts"]):
        failures.append(f"skew {dict(sorted(counts.items()))}, expected counts {sorted(c['counts'])}")
    if "max" in c and any(n > c["max"] for n in got):
        failures.append(f"skew {dict(sorted(counts.items()))}: a domain holds more than {c['max']}")
    return failures


def _domain_counts(c: Mapping[str, Any], out: Outcome) -> dict[str, int]:
    """ExpectSkew's map: pods matching the selector in the namespace, per domain of their nodes."""
    ns = c.get("namespace", "default")
    selector = c.get("selector") or {}
    match = selector.get("matchLabels") or {}
    exprs = [(e["key"], e["operator"], set(e.get("values") or [])) for e in selector.get("matchExpressions") or []]
    counts: dict[str, int] = {}
    for key, pod in out.pods.items():
        labels = pod.doc["metadata"].get("labels") or {}
        if pod.doc["metadata"]["namespace"] != ns or key not in out.bound or _ignored_for_topology(pod):
            continue
        if any(labels.get(k) != v for k, v in match.items()) or not all(_expr(labels, e) for e in exprs):
            continue
        node = out.nodes.get(out.bound[key])
        if node is None:
            continue
        if c["topologyKey"] == L.HOSTNAME:
            domain = node.name
        elif c["topologyKey"] in node.labels:
            domain = node.labels[c["topologyKey"]]
        else:
            continue
        counts[domain] = counts.get(domain, 0) + 1
    return counts


@expectation("maxSkew")
def _max_skew(check: Mapping[str, Any], out: Outcome) -> list[str]:
    """ExpectMaxSkew: the largest difference between two domains' counts (`skew` arguments, `max`)."""
    c = check["maxSkew"]
    counts = _domain_counts(c, out)
    spread = max(counts.values()) - min(counts.values()) if counts else 0
    return [] if spread <= c["max"] else [f"max skew {spread} > {c['max']}: {dict(sorted(counts.items()))}"]


def _ignored_for_topology(pod: CasePod) -> bool:
    """Karpenter's `IgnoredForTopology`: finished and terminating pods count in no domain."""
    phase = (pod.doc.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") or bool(pod.doc["metadata"].get("deletionTimestamp"))


def _expr(labels: Mapping[str, str], e: tuple[str, str, set[str]]) -> bool:
    key, op, values = e
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    return key not in labels


from tests.conformance import provider_kinds  # noqa: E402 (the AWS provider's kinds register here)

provider_kinds.register(expectation)


def check_case(case: Mapping[str, Any]) -> list[str]:
    """Every failed expectation of a case (empty: the case passes)."""
    try:
        out = run_case(case)
    except ManifestErrors as exc:
        wanted = [str(c["rejected"]) for c in case.get("expect") or [] if "rejected" in c]
        if not wanted:
            return [f"manifests rejected: {exc}"]
        return [f"rejection does not say {w!r}: {exc}" for w in wanted if w not in str(exc)]
    failures: list[str] = []
    for check in case.get("expect") or []:
        kinds = [k for k in check if k in EXPECTATIONS]
        if len(kinds) != 1:
            raise CaseError(f"expectation {check!r}: expected one of {sorted(EXPECTATIONS)}")
        failures += EXPECTATIONS[kinds[0]](check, out)
    return failures


# -- discovery and summary ------------------------------------------------------------------------------------
def case_files(root: Path = CASES) -> list[Path]:
    return sorted(root.rglob("*.yaml"))


def case_id(path: Path) -> str:
    return str(path.relative_to(CASES).with_suffix(""))


#: libyaml's loader where PyYAML has it: each pytest worker loads all ~300 cases while collecting, and the
#: pure-Python scanner made that seconds of every `make test`. Same safe constructors, same documents.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_case(path: Path) -> dict[str, Any]:
    case = yaml.load(path.read_text(), Loader=_LOADER)  # noqa: S506  (a safe loader)
    for key in ("source", "test", "expect"):
        if not case.get(key):
            raise CaseError(f"{path}: missing {key!r}")
    return case


def difference_rows() -> set[str]:
    """Row ids of the intended-differences table in docs/conformance.md (first cell, in backquotes)."""
    rows = set()
    for line in DIFFERENCES.read_text().splitlines() if DIFFERENCES.exists() else []:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0].startswith("`") and cells[0].endswith("`"):
            rows.add(cells[0].strip("`"))
    return rows


def status(case: Mapping[str, Any], failures: Sequence[str]) -> str:
    """passed | intended | xfail | failed | xpassed (an xfail case that passes: its marker is stale)."""
    if case.get("xfail"):
        return "xpassed" if not failures else "xfail"
    if failures:
        return "failed"
    return "intended" if case.get("intendedDifference") else "passed"


def main() -> int:
    """`make conformance`: one summary line (and the failures above it)."""
    import time

    start = time.perf_counter()
    rows = difference_rows()
    counts = dict.fromkeys(("passed", "intended", "xfail", "failed", "xpassed"), 0)
    for path in case_files():
        try:
            case = load_case(path)
            failures = check_case(case)
        except Exception as exc:  # noqa: BLE001 - one broken case must not hide the others' results
            case, failures = {}, [f"{exc.__class__.__name__}: {exc}"]
        row = case.get("intendedDifference")
        if row and row not in rows:
            failures = [*failures, f"intendedDifference {row!r} is no row of docs/conformance.md"]
        st = status(case, failures)
        counts[st] += 1
        if st in ("failed", "xpassed"):
            print(f"{st.upper()} {case_id(path)}: {'; '.join(failures) or 'passes (remove xfail)'}")
    total = sum(counts.values())
    print(f"conformance: {counts['passed']} passed, {counts['intended']} intended differences, "
          f"{counts['xfail']} known library bugs (xfail), {counts['failed'] + counts['xpassed']} failed, "
          f"{total} total ({time.perf_counter() - start:.1f} s)")
    return 1 if counts["failed"] or counts["xpassed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
