"""Simulated kubelets: instances carpool launched in local EC2 become Nodes in the simulated cluster.

The real sequence is played with the scenario's timings: an instance is running, after `bootSeconds` its
kubelet registers the Node (NotReady, with the taints from the user data), after `registrationSeconds`
the Node is Ready and startup taints are lifted (in real clusters a DaemonSet such as a CNI agent does
that). What the Node reports is the scenario's hidden *truth*, not carpool's estimate: memory capacity
after the AMI family's real overhead, max pods from the user data. That is what lets the simulation show
carpool learning capacity and catching wrong user data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import labels as L
from carpool.sim import userdata
from carpool.sim.cluster import SimulatedCluster
from carpool.sim.scenario import Truth
from carpool.taints import Taint

_MIB = 1024 * 1024
_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "NoSchedule")
_TAG_LABELS = (L.NODEPOOL, L.CLAIM, L.EC2NODECLASS, L.OWNED_BY)


@dataclass(frozen=True)
class InstanceFacts:
    """The parts of DescribeInstanceTypes a node's capacity and labels depend on."""

    name: str
    vcpus: int
    memory_mib: int
    arch: str
    max_enis: int
    ipv4_per_eni: int
    gpu_count: int = 0
    gpu_name: str = ""
    gpu_manufacturer: str = ""
    hypervisor: str = "nitro"

    @classmethod
    def from_ec2(cls, it: Mapping[str, Any]) -> InstanceFacts:
        gpus = (it.get("GpuInfo") or {}).get("Gpus") or []
        arches = (it.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
        net = it.get("NetworkInfo") or {}
        return cls(
            name=it["InstanceType"],
            vcpus=int((it.get("VCpuInfo") or {}).get("DefaultVCpus", 2)),
            memory_mib=int((it.get("MemoryInfo") or {}).get("SizeInMiB", 4096)),
            arch=_ARCH.get(arches[0], arches[0]),
            max_enis=int(net.get("MaximumNetworkInterfaces", 3)),
            ipv4_per_eni=int(net.get("Ipv4AddressesPerInterface", 10)),
            gpu_count=sum(int(g.get("Count", 0)) for g in gpus),
            gpu_name=(gpus[0].get("Name", "") if gpus else "").lower(),
            gpu_manufacturer=(gpus[0].get("Manufacturer", "") if gpus else "").lower(),
            hypervisor=it.get("Hypervisor") or "",
        )

    @property
    def eni_limited_pods(self) -> int:
        return self.max_enis * (self.ipv4_per_eni - 1) + 2

    def labels(self) -> dict[str, str]:
        """The `karpenter.k8s.aws/instance-*` labels a node of this type carries."""
        family, _, size = self.name.partition(".")
        match = [i for i, ch in enumerate(family) if ch.isdigit()]
        category = family[: match[0]] if match else family
        generation = family[match[0]] if match else ""
        out = {
            L.INSTANCE_FAMILY: family,
            L.INSTANCE_CATEGORY: category,
            L.INSTANCE_SIZE: size,
            L.INSTANCE_CPU: str(self.vcpus),
            L.INSTANCE_MEMORY: str(self.memory_mib),
            L.INSTANCE_HYPERVISOR: self.hypervisor,
        }
        if generation:
            out[L.INSTANCE_GENERATION] = generation
        if "-flex" in family:
            out[L.CAPABILITY_FLEX] = "true"
        if self.gpu_count:
            out.update({L.INSTANCE_GPU_COUNT: str(self.gpu_count), L.INSTANCE_GPU_NAME: self.gpu_name,
                        L.INSTANCE_GPU_MANUFACTURER: self.gpu_manufacturer})
        return out


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """6 % of the first core, 1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest (EKS AMIs)."""
    millis = 0.0
    for core in range(1, vcpus + 1):
        millis += 1000 * (0.06 if core == 1 else 0.01 if core == 2 else 0.005 if core <= 4 else 0.0025)
    return int(round(millis))


def truth_resources(facts: InstanceFacts, family: str, max_pods: int, truth: Truth,
                    kube_reserved: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as the node would really report them."""
    from carpool import quantity

    mib = facts.memory_mib - (64 if facts.arch == "arm64" else 0)
    memory_mib = mib - math.ceil(mib * truth.overhead_percent(family) / 100)
    reserved_pods = max_pods if family == "bottlerocket" else min(max_pods, facts.eni_limited_pods)
    reserved_mem = 11 * reserved_pods + 255
    reserved_cpu = kube_reserved_cpu_millis(facts.vcpus)
    if kube_reserved:
        if "memory" in kube_reserved:
            reserved_mem = quantity.resource_value("memory", kube_reserved["memory"]) // _MIB
        if "cpu" in kube_reserved:
            reserved_cpu = quantity.cpu_millis(kube_reserved["cpu"])
    capacity = {"cpu": str(facts.vcpus), "memory": f"{memory_mib * 1024}Ki", "pods": str(max_pods),
                "ephemeral-storage": "20Gi"}
    allocatable = {"cpu": f"{facts.vcpus * 1000 - reserved_cpu}m",
                   "memory": f"{(memory_mib - reserved_mem - 100) * 1024}Ki",
                   "pods": str(max_pods), "ephemeral-storage": f"{int(20 * 1024 * 0.9) - 1024}Mi"}
    if facts.gpu_count and facts.gpu_manufacturer == "nvidia":
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(facts.gpu_count)
    return capacity, allocatable


@dataclass
class _Boot:
    """An instance's progress from running to a Ready node."""

    instance: dict[str, Any]
    seen_at: float
    node_name: str | None = None
    registered_at: float | None = None
    ready: bool = False


@dataclass
class Kubelets:
    """All simulated kubelets of the cluster; `tick()` advances each instance's boot."""

    ec2: Any
    cluster: SimulatedCluster
    cluster_name: str
    region: str
    truth: Truth
    elapsed: Callable[[], float]
    #: NodePool name -> taint keys lifted once the node is Ready (the pool's startupTaints)
    startup_taints: Callable[[str], Iterable[str]] = lambda _pool: ()
    _boots: dict[str, _Boot] = field(default_factory=dict)
    _facts: dict[str, InstanceFacts] = field(default_factory=dict)
    _image_names: dict[str, str] = field(default_factory=dict)
    #: instance id -> node name, for every node ever registered (a deleted node does not come back)
    registered: dict[str, str] = field(default_factory=dict)
    #: instance id -> (simulated time first seen running, DescribeInstances entry)
    launched: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    #: instance id -> simulated time it was first seen gone
    terminated: dict[str, float] = field(default_factory=dict)
    fresh: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def tick(self) -> list[str]:
        """Poll EC2 and move every instance along; returns the names of nodes registered this tick.

        Newly seen instances land in `launched` (with the time they were first seen), instances no
        longer running in `terminated`; `fresh`/`gone` list this tick's ones."""
        running = self._running()
        now = self.elapsed()
        self.fresh, self.gone = [], []
        for iid, inst in running.items():
            if iid not in self.launched:
                self.launched[iid] = (now, inst)
                self._boots[iid] = _Boot(inst, now)
                self.fresh.append(iid)
        for iid in [i for i in self.launched if i not in running and i not in self.terminated]:
            self.terminated[iid] = now
            self.gone.append(iid)
            self._gone(iid)
        new = []
        for iid, boot in list(self._boots.items()):
            if boot.node_name is None and now - boot.seen_at >= self.truth.boot_seconds:
                boot.node_name, boot.registered_at = self._register(boot.instance), now
                self.registered[iid] = boot.node_name
                new.append(boot.node_name)
            if boot.registered_at is not None and not boot.ready and now - boot.registered_at >= self.truth.registration_seconds:
                self._make_ready(boot)
                del self._boots[iid]
        return new

    def _running(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        pages = self.ec2.get_paginator("describe_instances").paginate(Filters=[
            {"Name": f"tag:{L.TAG_MANAGED_BY}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ])
        for page in pages:
            for reservation in page.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    out[inst["InstanceId"]] = inst
        return out

    def _gone(self, iid: str) -> None:
        """The instance is terminated: the cloud node lifecycle controller deletes its Node."""
        self._boots.pop(iid, None)
        name = self.registered.get(iid)
        if name is not None:
            self.cluster.remove_node(name)

    def facts(self, instance_type: str) -> InstanceFacts:
        if instance_type not in self._facts:
            it = self.ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
            self._facts[instance_type] = InstanceFacts.from_ec2(it)
        return self._facts[instance_type]

    def image_name(self, image_id: str) -> str:
        if image_id not in self._image_names:
            images = self.ec2.describe_images(ImageIds=[image_id]).get("Images") or [{}]
            self._image_names[image_id] = images[0].get("Name") or ""
        return self._image_names[image_id]

    def _image_family(self, image_id: str) -> str:
        name = self.image_name(image_id).lower()
        return ("bottlerocket" if "bottlerocket" in name else "al2023" if "al2023" in name
                else "al2" if "amazon-eks" in name else "custom")

    def _register(self, inst: Mapping[str, Any]) -> str:
        iid = inst["InstanceId"]
        raw = self.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData").get("UserData") or {}
        boot = userdata.parse(userdata.decode(raw.get("Value")))
        family = boot.family if boot.family != "custom" else self._image_family(inst["ImageId"])
        facts = self.facts(inst["InstanceType"])
        name = inst.get("PrivateDnsName") or iid
        max_pods = boot.max_pods or min(facts.eni_limited_pods, 110)
        capacity, allocatable = truth_resources(facts, family, max_pods, self.truth, boot.kube_reserved)
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": self._labels(inst, facts, name, boot),
                         "annotations": {"alpha.kubernetes.io/provided-node-ip": inst.get("PrivateIpAddress", "")}},
            "spec": {"providerID": f"aws:///{inst['Placement']['AvailabilityZone']}/{iid}",
                     "taints": [_taint_json(t) for t in [*boot.taints, NOT_READY_TAINT]]},
            "status": {"capacity": capacity, "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": family, "architecture": facts.arch}},
        }
        return self.cluster.add_node(node)

    def _labels(self, inst: Mapping[str, Any], facts: InstanceFacts, name: str, boot: userdata.BootConfig) -> dict[str, str]:
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
        labels = {
            L.HOSTNAME: name, L.ARCH: facts.arch, L.OS: "linux", L.INSTANCE_TYPE: facts.name,
            L.ZONE: inst["Placement"]["AvailabilityZone"], L.REGION: self.region,
            L.CAPACITY_TYPE: L.CAPACITY_SPOT if inst.get("InstanceLifecycle") == "spot" else L.CAPACITY_ON_DEMAND,
            L.IMAGE_ID: inst["ImageId"],
            **facts.labels(),
        }
        labels.update({k: tags[k] for k in _TAG_LABELS if k in tags})
        if L.TAG_NODECLAIM in tags:
            labels.setdefault(L.CLAIM, tags[L.TAG_NODECLAIM])
        labels.update(boot.labels)
        return labels

    def _make_ready(self, boot: _Boot) -> None:
        assert boot.node_name is not None
        raw = self.cluster.node_raw(boot.node_name)
        if raw is None:
            boot.ready = True
            return
        pool = (raw["metadata"].get("labels") or {}).get(L.NODEPOOL, "")
        lifted = {NOT_READY_TAINT.key, L.UNREGISTERED_TAINT, *self.startup_taints(pool)}

        def ready(node: dict[str, Any]) -> bool:
            node["spec"]["taints"] = [t for t in node["spec"].get("taints") or [] if t["key"] not in lifted]
            node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
            return True

        self.cluster.update_node(boot.node_name, ready)
        boot.ready = True


def _taint_json(t: Taint) -> dict[str, str]:
    out = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def static_node(name: str, facts: InstanceFacts, zone: str, region: str, capacity_type: str, family: str,
                extra_labels: Mapping[str, str], taints: Iterable[Mapping[str, str]], truth: Truth,
                instance_id: str) -> dict[str, Any]:
    """A Ready node that exists before carpool starts (a managed node group's), in Node JSON."""
    max_pods = min(facts.eni_limited_pods, 110)
    capacity, allocatable = truth_resources(facts, family, max_pods, truth)
    labels = {L.HOSTNAME: name, L.ARCH: facts.arch, L.OS: "linux", L.INSTANCE_TYPE: facts.name, L.ZONE: zone,
              L.REGION: region, "eks.amazonaws.com/capacityType": capacity_type.upper().replace("-", "_"),
              **dict(extra_labels)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"aws:///{zone}/{instance_id}", "taints": [dict(t) for t in taints]},
        "status": {"capacity": capacity, "allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }
