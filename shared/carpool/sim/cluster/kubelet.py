"""Simulated kubelets: instances carpool launched in local EC2 become Nodes in the simulated cluster.

Each instance plays a real node's start-up with the scenario's timings:

1. *Boot* (`truth.bootSeconds`, plus a kubelet fault's `extraJoinSeconds`): the bootstrap reads the
   user data EC2 gave the instance (its launch template's), and the AMI's bootstrap turns it into a
   kubelet configuration (`carpool.sim.cluster.nodeboot`: nodeadm, Bottlerocket or bootstrap.sh defaults for
   whatever the user data leaves out). A kubelet fault may make it never join, and so does a
   configuration the real boot refuses: a NodeConfig part nodeadm cannot decode, Bottlerocket settings
   its API refuses, or a kubelet configuration the kubelet exits on at start-up (`startup_refusal`:
   `--node-labels` outside the labels a kubelet may set, soft thresholds without grace periods...).
   Ephemeral storage is the filesystem under the kubelet: the RAID0 array of the NVMe instance store when
   the bootstrap assembled one, else the root (Bottlerocket: data) volume of the launch template.
2. *Registration*: the kubelet creates the Node with exactly what a kubelet sets itself
   (pkg/kubelet/kubelet_node_status.go `initialNode`: hostname, os, arch and their deprecated beta
   twins), the user data's labels and taints, and, with the external cloud provider EKS uses,
   `node.cloudprovider.kubernetes.io/uninitialized`. The cloud node controller (AWS cloud-controller-
   manager) then initializes it: instance type, zone, region (stable and deprecated labels),
   `topology.k8s.aws/zone-id`, addresses, and it removes its own taint. Nothing else: the
   `karpenter.k8s.aws/*` labels, the NodePool's labels and `karpenter.sh/unregistered` are the
   autoscaler's business at registration.
3. *Ready* (`truth.registrationSeconds` later): the node lifecycle controller removes
   `node.kubernetes.io/not-ready`. Startup taints stay until a scenario's DaemonSet agent removes them
   (`carpool.sim.cluster.agents`). No `karpenter.sh/*` taint is ever removed here.

What the Node reports is the scenario's hidden *truth*, not carpool's estimate: memory capacity after
the AMI family's real overhead (and any `memoryShortMiB`), allocatable as the kubelet computes it:
capacity - kubeReserved - systemReserved - hard eviction thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from carpool import label_syntax, quantity
from carpool import labels as L
from carpool.sim.clock import reached
from carpool.sim.cluster import nodeboot, userdata
from carpool.sim.cluster.agents import Agents, NodeFacts
from carpool.sim.cluster.nodeboot import NodeKubelet
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import KubeletFault, Truth
from carpool.sizing.eni_limits import EKS_DEFAULT_CARD_ENIS
from carpool.taints import Taint

_MIB = 1024 * 1024
_GIB = 1024 * _MIB
_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "NoSchedule")
#: The taint the kubelet registers with under an external cloud provider, until the cloud node
#: controller has initialized the node.
UNINITIALIZED_TAINT = Taint("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", "true")
#: Labels the kubelet sets itself (beside the hostname).
LEGACY_OS, LEGACY_ARCH = "beta.kubernetes.io/os", "beta.kubernetes.io/arch"
#: Labels the cloud node controller sets: instance type, zone and region, each also under its deprecated name.
LEGACY_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
LEGACY_ZONE = "failure-domain.beta.kubernetes.io/zone"
LEGACY_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE_ID = "topology.k8s.aws/zone-id"
PRIVATE_IPV4 = "vpc.amazonaws.com/PrivateIPv4Address"
#: Share of a volume's size the filesystem offers (xfs metadata and log take the rest).
FILESYSTEM_SHARE = 0.999
#: The root (or, on Bottlerocket, data) volume size when the launch template names none.
DEFAULT_VOLUME_GIB = 20
_LT_ID, _LT_VERSION = "aws:ec2launchtemplate:id", "aws:ec2launchtemplate:version"


@dataclass(frozen=True)
class InstanceFacts:
    """The parts of DescribeInstanceTypes a node's capacity and bootstrap depend on."""

    name: str
    vcpus: int
    memory_mib: int
    arch: str
    #: ENIs of the default network card (what eni-max-pods and nodeadm count)
    max_enis: int
    ipv4_per_eni: int
    gpu_count: int = 0
    gpu_name: str = ""
    gpu_manufacturer: str = ""
    hypervisor: str = "nitro"
    #: NVMe instance store, decimal GB (what RAID0 assembles for the kubelet); 0 without one
    instance_store_gb: int = 0

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
            max_enis=EKS_DEFAULT_CARD_ENIS.get(it["InstanceType"], _default_card_enis(net)),
            ipv4_per_eni=int(net.get("Ipv4AddressesPerInterface", 10)),
            gpu_count=sum(int(g.get("Count", 0)) for g in gpus),
            gpu_name=(gpus[0].get("Name", "") if gpus else "").lower(),
            gpu_manufacturer=(gpus[0].get("Manufacturer", "") if gpus else "").lower(),
            hypervisor=it.get("Hypervisor") or "",
            instance_store_gb=_nvme_store_gb(it.get("InstanceStorageInfo") or {}),
        )

    @property
    def eni_limited_pods(self) -> int:
        return nodeboot.eni_max_pods(self.max_enis, self.ipv4_per_eni)


def _nvme_store_gb(storage: Mapping[str, Any]) -> int:
    """nodeadm's and bootstrap.sh's RAID0 takes the NVMe instance store disks only."""
    if not storage or storage.get("NvmeSupport") == "unsupported":
        return 0
    return int(storage.get("TotalSizeInGB") or 0)


def _default_card_enis(net: Mapping[str, Any]) -> int:
    """nodeadm's InstanceInfo.DefaultMaxENIs: the default network card's ENIs, not the instance's total.
    (nodeadm reads its embedded instance-info table first: `EKS_DEFAULT_CARD_ENIS` holds where it differs.)"""
    index = int(net.get("DefaultNetworkCardIndex", 0) or 0)
    for card in net.get("NetworkCards") or []:
        if int(card.get("NetworkCardIndex", 0)) == index and card.get("MaximumNetworkInterfaces"):
            return int(card["MaximumNetworkInterfaces"])
    return int(net.get("MaximumNetworkInterfaces", 3))


# -- what the node reports --------------------------------------------------------------------------------
def memory_capacity_mib(facts: InstanceFacts, family: str, truth: Truth, short_mib: int = 0) -> int:
    """Memory the kernel leaves the kubelet: SizeInMiB, less 64 MiB CMA on arm64, less the family's real
    overhead, less any shortfall a kubelet fault adds."""
    mib = facts.memory_mib - (64 if facts.arch == "arm64" else 0)
    return mib - math.ceil(mib * truth.overhead_percent(family) / 100) - short_mib


def node_resources(facts: InstanceFacts, kubelet: NodeKubelet, memory_mib: int,
                   volume_gib: int = DEFAULT_VOLUME_GIB) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as the kubelet reports them (pkg/kubelet/cm GetNodeAllocatableReservation:
    capacity - kubeReserved - systemReserved - hard eviction thresholds, never below zero). The
    ephemeral-storage capacity is the filesystem under the kubelet's root directory: the RAID0 array of
    the NVMe instance store when the bootstrap assembled one (and there is one), else the volume."""
    pods = kubelet.max_pods
    if kubelet.pods_per_core:
        pods = min(pods, kubelet.pods_per_core * facts.vcpus)
    disk = facts.instance_store_gb * 10**9 if kubelet.raid0 and facts.instance_store_gb else volume_gib * _GIB
    capacity = {"cpu": facts.vcpus * 1000, "memory": memory_mib * _MIB, "pods": pods,
                "ephemeral-storage": int(disk * FILESYSTEM_SHARE) // 1024 * 1024}
    reserved = reservation(kubelet, capacity)
    allocatable = {name: max(0, value - reserved.get(name, 0)) for name, value in capacity.items()}
    cap_json, alloc_json = _as_json(capacity), _as_json(allocatable)
    if facts.gpu_count and facts.gpu_manufacturer == "nvidia":
        cap_json["nvidia.com/gpu"] = alloc_json["nvidia.com/gpu"] = str(facts.gpu_count)
    if kubelet.family == nodeboot.WINDOWS:
        # the VPC resource controller advertises the primary ENI's secondary IPs for Windows pods
        cap_json[PRIVATE_IPV4] = alloc_json[PRIVATE_IPV4] = str(max(facts.ipv4_per_eni - 1, 0))
    return cap_json, alloc_json


def reservation(kubelet: NodeKubelet, capacity: Mapping[str, int]) -> dict[str, int]:
    """What the kubelet holds back per resource (cpu in millicores, bytes otherwise)."""
    out: dict[str, int] = {}
    for reserved in (kubelet.kube_reserved, kubelet.system_reserved):
        for name, raw in reserved.items():
            if name in ("cpu", "memory", "ephemeral-storage"):
                out[name] = out.get(name, 0) + quantity.resource_value(name, raw)
    for signal, resource in (("memory.available", "memory"), ("nodefs.available", "ephemeral-storage")):
        threshold = kubelet.eviction_hard.get(signal)
        if threshold is not None:
            out[resource] = out.get(resource, 0) + _threshold(str(threshold), capacity.get(resource, 0))
    return out


def _threshold(raw: str, capacity: int) -> int:
    text = raw.strip().lstrip("<").strip()
    if text.endswith("%"):
        return math.ceil(capacity * float(text[:-1]) / 100)
    return quantity.resource_value("memory", text)


def _as_json(rl: Mapping[str, int]) -> dict[str, str]:
    """Exact quantities, as the kubelet reports them (Ki when whole, else plain bytes)."""
    return {"cpu": f"{rl['cpu']}m", "memory": _bytes(rl["memory"]), "pods": str(rl["pods"]),
            "ephemeral-storage": _bytes(rl["ephemeral-storage"])}


def _bytes(value: int) -> str:
    return f"{value // 1024}Ki" if value % 1024 == 0 else str(value)


def truth_resources(facts: InstanceFacts, family: str, max_pods: int, truth: Truth,
                    kube_reserved: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of a node of `facts` whose bootstrap set `max_pods` (and `kube_reserved`)
    and left the rest to the AMI family's defaults."""
    boot = userdata.BootConfig(family=family, max_pods=max_pods,
                               kube_reserved=dict(kube_reserved) if kube_reserved else None)
    kubelet = nodeboot.resolve(boot, family, facts.vcpus, facts.max_enis, facts.ipv4_per_eni)
    return node_resources(facts, kubelet, memory_capacity_mib(facts, family, truth))


# -- what the kubelet refuses at start-up ------------------------------------------------------------------
def startup_refusal(kubelet: NodeKubelet) -> str:
    """Why the kubelet exits at start-up with this configuration ("" when it starts), as the real one does:
    `--node-labels` outside the labels a kubelet may set or not valid labels (cmd/kubelet/app/options
    ValidateKubeletFlags), a soft eviction threshold without a grace period, image GC thresholds out of
    order (pkg/kubelet/apis/config/validation, pkg/kubelet/eviction ParseThresholdConfig)."""
    unknown = sorted(k for k in kubelet.labels if not L.kubelet_may_set(k))
    if unknown:
        return (f"kubelet: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: {unknown}; "
                "--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix "
                f"({', '.join(L.KUBELET_LABEL_NAMESPACES)}) or be in the specifically allowed set")
    for key, value in sorted(kubelet.labels.items()):
        problem = label_syntax.key_problem(key) or label_syntax.value_problem(value)
        if problem:
            return f"kubelet: invalid node labels: {problem}"
    soft = kubelet.settings.get("evictionSoft") or {}
    grace = kubelet.settings.get("evictionSoftGracePeriod") or {}
    for signal in sorted(soft):
        if signal not in grace:
            return f"kubelet: grace period must be specified for the soft eviction threshold {signal}"
    high = kubelet.settings.get("imageGCHighThresholdPercent")
    low = kubelet.settings.get("imageGCLowThresholdPercent")
    for setting, percent in (("imageGCHighThresholdPercent", high), ("imageGCLowThresholdPercent", low)):
        if percent is not None and not 0 <= int(percent) <= 100:
            return f"kubelet: invalid configuration: {setting} ({percent}) must be between 0 and 100"
    if high is not None and low is not None and int(low) >= int(high):
        return (f"kubelet: invalid configuration: imageGCLowThresholdPercent ({low}) must be less than "
                f"imageGCHighThresholdPercent ({high})")
    return ""


# -- one instance's life ---------------------------------------------------------------------------------
@dataclass
class Boot:
    """An instance from first seen running to Ready: what its bootstrap configured and what it reports."""

    instance: dict[str, Any]
    seen_at: float
    kubelet: NodeKubelet | None = None
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    join_at: float = 0.0
    #: why the node will never join (a kubelet fault, user data its bootstrap cannot read), or ""
    no_join: str = ""
    node_name: str | None = None
    registered_at: float | None = None
    ready_at: float | None = None


@dataclass
class Kubelets:
    """All simulated kubelets of the cluster; `tick()` advances each instance's boot."""

    ec2: Any
    cluster: SimulatedCluster
    cluster_name: str
    region: str
    truth: Truth
    elapsed: Callable[[], float]
    faults: Sequence[KubeletFault] = ()
    agents: Agents | None = None
    #: seconds from the request that launched an instance to it running (CreateFleet's own answer time):
    #: an instance seen right after the invocation that asked for it starts booting that much later
    launch_seconds: float = 0.0
    #: instance id -> its boot (every instance ever seen, joined or not)
    boots: dict[str, Boot] = field(default_factory=dict)
    _facts: dict[str, InstanceFacts] = field(default_factory=dict)
    _image_names: dict[str, str] = field(default_factory=dict)
    _zone_ids: dict[str, str] = field(default_factory=dict)
    _fault_hits: dict[int, int] = field(default_factory=dict)
    #: instance id -> node name, for every node ever registered (a deleted node does not come back)
    registered: dict[str, str] = field(default_factory=dict)
    #: instance id -> (simulated time first seen, DescribeInstances entry), for every instance EC2 launched
    launched: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    #: instance id -> simulated time it was first seen gone
    terminated: dict[str, float] = field(default_factory=dict)
    fresh: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    #: (node, agent, taint) removed by DaemonSet agents this tick
    lifted: list[tuple[str, str, str]] = field(default_factory=list)
    #: instances that ran and joined before the run began (a cluster Karpenter built,
    #: `carpool.sim.run.karpenter_cluster`): known as booted, watched by id until carpool's tag names them
    prebuilt: set[str] = field(default_factory=set)

    def tick(self) -> list[str]:
        """Poll EC2 and move every instance along; returns the names of nodes registered this tick.

        Newly seen instances land in `launched` (with the time they were first seen; an instance
        already gone when first seen is recorded too), instances no longer running in `terminated`;
        `fresh`/`gone` list this tick's ones."""
        instances = self._instances()
        now = self.elapsed()
        self.fresh, self.gone = [], []
        for iid, inst in instances.items():
            if iid not in self.launched:
                self.launched[iid] = (now, inst)
                self.fresh.append(iid)
                self.boots[iid] = self._boot(inst, now + self.launch_seconds)
        for iid in [i for i in self.launched if i not in self.terminated]:
            state = ((instances.get(iid) or {}).get("State") or {}).get("Name", "terminated")
            if state not in ("pending", "running"):
                self.terminated[iid] = now
                self.gone.append(iid)
                self._gone(iid)
        new = []
        for iid, boot in self.boots.items():
            if iid in self.terminated or boot.no_join:
                continue
            if boot.node_name is None and reached(now, boot.join_at):
                boot.node_name, boot.registered_at = self._register(boot), now
                self.registered[iid] = boot.node_name
                new.append(boot.node_name)
            if (boot.registered_at is not None and boot.ready_at is None
                    and reached(now, boot.registered_at + self.truth.registration_seconds)):
                self._make_ready(boot, now)
        self.lifted = self.agents.tick() if self.agents else []
        return new

    def next_due(self) -> float | None:
        """The simulated time of the next boot step of any instance (a node registering, a node becoming
        Ready, an agent lifting a startup taint): the loop wakes the kubelets then, not on a tick."""
        due: list[float] = []
        for iid, boot in self.boots.items():
            if iid in self.terminated or boot.no_join:
                continue
            if boot.node_name is None:
                due.append(boot.join_at)
            elif boot.registered_at is not None and boot.ready_at is None:
                due.append(boot.registered_at + self.truth.registration_seconds)
        now = self.elapsed()
        due.extend(t for t in self.cluster.binding_from.values() if t > now)  # the kube-scheduler binds then
        agent = self.agents.next_due() if self.agents else None
        if agent is not None:
            due.append(agent)
        return min(due, default=None)

    def _instances(self) -> dict[str, dict[str, Any]]:
        """Every instance carpool's cluster tag marks, whatever its state (moto keeps terminated ones), and
        the `prebuilt` ones it does not mark yet."""
        out: dict[str, dict[str, Any]] = {}
        pages = self.ec2.get_paginator("describe_instances").paginate(Filters=[
            {"Name": f"tag:{L.TAG_MANAGED_BY}", "Values": [self.cluster_name]}])
        unmarked = [iid for iid in sorted(self.prebuilt) if iid not in self.terminated]
        if unmarked:
            pages = [*pages, *self.ec2.get_paginator("describe_instances").paginate(InstanceIds=unmarked)]
        for page in pages:
            for reservation in page.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    out[inst["InstanceId"]] = inst
        return out

    def _gone(self, iid: str) -> None:
        """The instance is terminated: the cloud node lifecycle controller deletes its Node."""
        name = self.registered.get(iid)
        if name is not None:
            self.cluster.remove_node(name)
            if self.agents:
                self.agents.forget(name)

    # -- reference data ---------------------------------------------------------------------------------
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

    def _zone_id(self, zone: str) -> str:
        if not self._zone_ids:
            zones = self.ec2.describe_availability_zones().get("AvailabilityZones") or []
            self._zone_ids = {z["ZoneName"]: z.get("ZoneId", "") for z in zones}
        return self._zone_ids.get(zone, "")

    # -- boot ---------------------------------------------------------------------------------------------
    def _boot(self, inst: dict[str, Any], now: float) -> Boot:
        """Read the user data and work out the kubelet configuration and what the node will report."""
        boot = Boot(inst, now)
        text, volumes = self._launch_data(inst)
        config = nodeboot.parse_windows(text) if nodeboot.is_windows_user_data(text) else userdata.parse(text)
        facts = self.facts(inst["InstanceType"])
        fault = self._fault(inst)
        boot.join_at = now + self.truth.boot_seconds + (fault.extra_join_seconds if fault else 0.0)
        family = config.family
        if config.refusal:
            boot.no_join = config.refusal
        elif family == "custom":
            boot.no_join = "the user data is not a format the image's bootstrap reads (no NodeConfig, " \
                           "Bottlerocket settings or bootstrap.sh call): the kubelet never gets a cluster to join"
            family = self._image_family(inst["ImageId"])
        if fault is not None and fault.fail_to_join:
            boot.no_join = "kubelet fault: fails to join"
        kubelet = nodeboot.resolve(config, family, facts.vcpus, facts.max_enis, facts.ipv4_per_eni)
        refusal = startup_refusal(kubelet)
        if refusal and not boot.no_join:
            boot.no_join = refusal
        memory = memory_capacity_mib(facts, family, self.truth, fault.memory_short_mib if fault else 0)
        boot.kubelet = kubelet
        boot.capacity, boot.allocatable = node_resources(facts, kubelet, memory, _volume_gib(volumes, family))
        if family == nodeboot.WINDOWS and facts.arch != "amd64" and not boot.no_join:
            boot.no_join = f"Windows does not boot on {facts.arch} ({facts.name})"
        return boot

    def _fault(self, inst: Mapping[str, Any]) -> KubeletFault | None:
        """The first kubelet fault selecting this instance that still has hits left."""
        tags = _tags(inst)
        for i, fault in enumerate(self.faults):
            if not fault.matches(tags.get(L.NODEPOOL, ""), inst["InstanceType"],
                                 inst["Placement"]["AvailabilityZone"], _capacity_type(inst)):
                continue
            if fault.count is not None and self._fault_hits.get(i, 0) >= fault.count:
                continue
            self._fault_hits[i] = self._fault_hits.get(i, 0) + 1
            return fault
        return None

    def _launch_data(self, inst: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """The user data EC2 gave the instance and its launch template's block devices.

        An instance launched by CreateFleet from a template gets that template version's user data; the
        instance attribute is what IMDS serves, and when it disagrees with the template the template wins
        (that is what EC2 would have served)."""
        attr = self.ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
        text = userdata.decode((attr.get("UserData") or {}).get("Value"))
        tags = _tags(inst)
        if not tags.get(_LT_ID):
            return text, []
        try:
            versions = self.ec2.describe_launch_template_versions(
                LaunchTemplateId=tags[_LT_ID], Versions=[tags.get(_LT_VERSION) or "$Default"])
        except Exception:  # the template is gone: the instance keeps the user data it was given
            return text, []
        data = (versions.get("LaunchTemplateVersions") or [{}])[0].get("LaunchTemplateData") or {}
        template_text = userdata.decode(data.get("UserData"))
        return (template_text or text), list(data.get("BlockDeviceMappings") or [])

    def _image_family(self, image_id: str) -> str:
        name = self.image_name(image_id).lower()
        return ("bottlerocket" if "bottlerocket" in name else "al2023" if "al2023" in name
                else "al2" if "amazon-eks" in name else "custom")

    # -- registration -----------------------------------------------------------------------------------
    def _register(self, boot: Boot) -> str:
        inst, kubelet = boot.instance, boot.kubelet
        assert kubelet is not None
        facts = self.facts(inst["InstanceType"])
        name = inst["InstanceId"] if kubelet.name_by_instance_id else inst.get("PrivateDnsName") or inst["InstanceId"]
        zone = inst["Placement"]["AvailabilityZone"]
        os_name = "windows" if kubelet.family == nodeboot.WINDOWS else "linux"
        labels = {L.HOSTNAME: name, L.OS: os_name, L.ARCH: facts.arch, LEGACY_OS: os_name, LEGACY_ARCH: facts.arch,
                  **kubelet.labels}
        if os_name == "windows":  # the Windows kubelet reports its OS build (pkg/kubelet/kubelet_node_status.go)
            labels[L.WINDOWS_BUILD] = nodeboot.windows_build(self.image_name(inst["ImageId"]))
        taints = list(dict.fromkeys([*kubelet.taints, UNINITIALIZED_TAINT, NOT_READY_TAINT]))
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"alpha.kubernetes.io/provided-node-ip": inst.get("PrivateIpAddress", ""),
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"providerID": f"aws:///{zone}/{inst['InstanceId']}",
                     "taints": [_taint_json(t) for t in taints]},
            "status": {"capacity": dict(boot.capacity), "allocatable": dict(boot.allocatable),
                       "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": kubelet.family,
                                    "operatingSystem": os_name, "architecture": facts.arch}},
        }
        created = self.cluster.add_node(node)
        self._initialize(created, inst, facts)
        if self.agents:
            self.agents.node_registered(self._node_facts(created, inst))
        return created

    def _initialize(self, name: str, inst: Mapping[str, Any], facts: InstanceFacts) -> None:
        """The cloud node controller's part (k8s.io/cloud-provider node controller with the AWS provider)."""
        zone = inst["Placement"]["AvailabilityZone"]
        cloud_labels = {L.INSTANCE_TYPE: facts.name, LEGACY_INSTANCE_TYPE: facts.name, L.ZONE: zone,
                        LEGACY_ZONE: zone, L.REGION: self.region, LEGACY_REGION: self.region}
        zone_id = self._zone_id(zone)
        if zone_id:
            cloud_labels[ZONE_ID] = zone_id
        addresses = [{"type": "InternalIP", "address": inst.get("PrivateIpAddress", "")},
                     {"type": "InternalDNS", "address": inst.get("PrivateDnsName", "")},
                     {"type": "Hostname", "address": inst.get("PrivateDnsName", "")}]

        def initialize(node: dict[str, Any]) -> bool:
            node["metadata"].setdefault("labels", {}).update(cloud_labels)
            node["spec"]["taints"] = [t for t in node["spec"].get("taints") or []
                                      if t.get("key") != UNINITIALIZED_TAINT.key]
            node["status"]["addresses"] = addresses
            return True

        self.cluster.update_node(name, initialize)

    def _make_ready(self, boot: Boot, now: float) -> None:
        """The kubelet reports Ready; the node lifecycle controller removes its not-ready taint."""
        assert boot.node_name is not None
        boot.ready_at = now
        if self.cluster.node_raw(boot.node_name) is None:
            return

        def ready(node: dict[str, Any]) -> bool:
            node["spec"]["taints"] = [t for t in node["spec"].get("taints") or []
                                      if t.get("key") != NOT_READY_TAINT.key]
            node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
            return True

        if self.truth.bind_seconds:
            self.cluster.binding_from[boot.node_name] = now + self.truth.bind_seconds
        self.cluster.update_node(boot.node_name, ready)
        if self.agents:
            self.agents.node_ready(self._node_facts(boot.node_name, boot.instance))

    def _node_facts(self, name: str, inst: Mapping[str, Any]) -> NodeFacts:
        raw = self.cluster.node_raw(name) or {}
        labels = (raw.get("metadata") or {}).get("labels") or {}
        pool = labels.get(L.NODEPOOL) or _tags(inst).get(L.NODEPOOL, "")
        return NodeFacts(name, pool, inst["InstanceType"], inst["Placement"]["AvailabilityZone"], _capacity_type(inst))


def _tags(inst: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}


def _capacity_type(inst: Mapping[str, Any]) -> str:
    return L.CAPACITY_SPOT if inst.get("InstanceLifecycle") == "spot" else L.CAPACITY_ON_DEMAND


def _volume_gib(volumes: Iterable[Mapping[str, Any]], family: str) -> int:
    """The size of the volume that holds pod storage: Bottlerocket's data volume, others' root volume."""
    device = {"bottlerocket": "/dev/xvdb", nodeboot.WINDOWS: "/dev/sda1"}.get(family, "/dev/xvda")
    for v in volumes:
        if v.get("DeviceName") == device and (v.get("Ebs") or {}).get("VolumeSize"):
            return int(v["Ebs"]["VolumeSize"])
    return DEFAULT_VOLUME_GIB


def _taint_json(t: Taint) -> dict[str, str]:
    out = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def static_node(name: str, facts: InstanceFacts, zone: str, region: str, capacity_type: str, family: str,
                extra_labels: Mapping[str, str], taints: Iterable[Mapping[str, str]], truth: Truth,
                instance_id: str) -> dict[str, Any]:
    """A Ready node that exists before carpool starts (a managed node group's), in Node JSON: the AMI's
    bootstrap defaults, initialized by the cloud node controller."""
    kubelet = nodeboot.resolve(userdata.BootConfig(family=family), family, facts.vcpus, facts.max_enis,
                               facts.ipv4_per_eni)
    capacity, allocatable = node_resources(facts, kubelet, memory_capacity_mib(facts, family, truth))
    labels = {L.HOSTNAME: name, L.ARCH: facts.arch, L.OS: "linux", LEGACY_OS: "linux", LEGACY_ARCH: facts.arch,
              L.INSTANCE_TYPE: facts.name, LEGACY_INSTANCE_TYPE: facts.name, L.ZONE: zone, LEGACY_ZONE: zone,
              L.REGION: region, LEGACY_REGION: region,
              "eks.amazonaws.com/capacityType": capacity_type.upper().replace("-", "_"), **dict(extra_labels)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"aws:///{zone}/{instance_id}", "taints": [dict(t) for t in taints]},
        "status": {"capacity": capacity, "allocatable": allocatable,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }
