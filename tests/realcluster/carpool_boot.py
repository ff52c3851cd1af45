"""One EC2 instance's boot, as the instance itself would run it: from its DescribeInstances item, the user data
it reads from IMDS and its DescribeInstanceTypes item to the `NodeSpec` its kubelet starts with.

- AL2023: the REAL nodeadm decides. `nodeadm_kubelet/` holds a small Go program overlaid onto nodeadm's own
  source (its `internal/kubelet` package; built outside this repository, see `tool`): it reads the user
  data with nodeadm's config providers, validates it as `nodeadm init` does, and runs nodeadm's `generateKubeletConfig` for a fake instance (the instance's
  type, private DNS name, IP, zone; a fake /sys with its vCPUs). What it prints is what nodeadm would write:
  config.json, the user's drop-in (config.json.d/40-nodeadm.conf) and the kubelet's command line. The merge
  of those three is the kubelet's own (`kubelet_view`): drop-ins over the file, maps per key and lists
  replaced (kubelet config-dir merging), then command-line flags over both (a map flag replaces the map).
- Bottlerocket: its kubelet-config template and pluto as bottlerocket-core-kit writes them
  (packages/kubernetes-1.31/kubelet-config, kubelet-env, kubelet-exec-start-conf; sources/api/pluto;
  schnauzer's kube_reserve_cpu / kube_reserve_memory), in `bottlerocket_kubelet`.

The machine is the instance type's: vCPUs, and memory as `SizeInMiB` less what the kernel and hypervisor
keep (`MEMORY_OVERHEAD_PERCENT`, 64 MiB of CMA on arm64; no public table gives the real figures per type, so
these are the simulation's own `Truth` defaults, the numbers carpool is tested against, not carpool's 7.5 %
estimate). The ephemeral storage is the nominal size of the volume the kubelet's root directory lives on
(a real filesystem reports a little less: its metadata, not modelled).
"""

from __future__ import annotations

import email
import email.policy
import json
import math
import os
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from tests.realcluster.node_spec import Machine, NodeSpec, Taint

#: where build.sh put nodeadm's source and Go (/work/shared/nodeadm/build.sh)
NODEADM_HOME = Path(os.environ.get("NODEADM_HOME", Path.home() / ".cache" / "carpool-nodeadm"))
#: where this tier keeps what it builds
REALCLUSTER_HOME = Path(os.environ.get("CARPOOL_REALCLUSTER_HOME", Path.home() / ".cache" / "carpool-realcluster"))
TOOL = REALCLUSTER_HOME / "bin" / "carpool-kubelet-config"
_GO_SOURCES = Path(__file__).parent / "nodeadm_kubelet"
#: the kubelet version nodeadm is told the node runs (its version toggles: feature gates, grace periods)
KUBELET_VERSION = "v1.31.0"
#: memory the kernel and hypervisor keep, per family (carpool.sim.cluster.specs.Truth's defaults)
MEMORY_OVERHEAD_PERCENT = {"al2023": 6.0, "bottlerocket": 9.5}
#: arm64 kernels reserve a 64 MiB CMA area that MemTotal does not count
ARM64_CMA_MIB = 64
#: the volume the kubelet's root directory (/var/lib/kubelet) is on: AL2023 the root device of the EKS AMIs
#: (the instance's RootDeviceName on EC2; moto reports /dev/sda1 whatever the image); Bottlerocket its data
#: volume (Karpenter's Bottlerocket EphemeralBlockDevice)
AL2023_ROOT_DEVICE = "/dev/xvda"
BOTTLEROCKET_DATA_DEVICE = "/dev/xvdb"
#: a volume whose size the caller did not give: the EKS AMIs' default root volume (Karpenter's default BDM)
DEFAULT_VOLUME_GIB = 20
NODEADM_CONTENT_TYPE = "application/node.eks.aws"
_GIB = 2**30
_MIB = 2**20


class BootError(RuntimeError):
    """The node's boot stops before its kubelet starts (nodeadm refuses the config, Bottlerocket's API refuses
    the settings, or the user data is no format the image reads): on EC2 the instance never becomes a node."""


class NodeadmUnavailable(RuntimeError):
    """The real nodeadm's source or Go is absent: the message says what to build."""


# -- the entry point ------------------------------------------------------------------------------------
def node_spec(instance: Mapping[str, Any], user_data: bytes, instance_type: Mapping[str, Any], *,
              volume_gib: Mapping[str, int] | None = None, kubelet_version: str = KUBELET_VERSION,
              ec2_endpoint: str | None = None) -> NodeSpec:
    """The kubelet the instance's boot starts. `volume_gib` maps device names (`/dev/xvda`) to their size, as
    the launch template or DescribeVolumes gives them. `ec2_endpoint`: local EC2's URL (loopback), which
    nodeadm asks for an instance type its embedded table lacks."""
    family = user_data_family(user_data)
    if family == "al2023":
        start = nodeadm_kubelet(instance, user_data, instance_type, kubelet_version, ec2_endpoint)
        device = AL2023_ROOT_DEVICE
    else:
        start = bottlerocket_kubelet(instance, user_data, instance_type)
        device = BOTTLEROCKET_DATA_DEVICE
    gib = (volume_gib or {}).get(device, DEFAULT_VOLUME_GIB)
    # the kubelet's name and IP are its --hostname-override and --node-ip (nodeadm: the private DNS name, or
    # the instance ID under its InstanceIdNodeName gate); without them, the host's name and address
    return NodeSpec(
        name=start.identity.get("hostname-override") or str(instance["PrivateDnsName"]),
        provider_id=str(start.config.get("providerID") or provider_id(instance)),
        node_ip=start.identity.get("node-ip") or str(instance["PrivateIpAddress"]),
        machine=machine(instance_type, family, gib),
        kubelet_config=start.config, node_labels=start.labels, register_with_taints=start.taints,
    )


class KubeletStart(NamedTuple):
    """What a boot hands the kubelet: its configuration, `--node-labels`, `--register-with-taints`, and the
    identity flags that are no configuration field (`hostname-override`, `node-ip`), by name."""

    config: dict[str, Any]
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    identity: dict[str, str]


def user_data_family(user_data: bytes) -> str:
    """nodeadm reads MIME parts of its own content type (or a bare NodeConfig); Bottlerocket a TOML document."""
    text = user_data.decode("utf-8", errors="replace")
    message = email.message_from_string(text, policy=email.policy.compat32)
    if message.is_multipart():
        if any(part.get_content_type() == NODEADM_CONTENT_TYPE for part in message.walk()):
            return "al2023"
    elif "node.eks.aws/" in text and "NodeConfig" in text:
        return "al2023"
    try:
        settings = tomllib.loads(text).get("settings") or {}
    except tomllib.TOMLDecodeError as err:
        raise BootError(f"user data is neither a NodeConfig nor Bottlerocket settings: {err}") from err
    if "kubernetes" not in settings:
        raise BootError("Bottlerocket settings without [settings.kubernetes]: the node joins no cluster")
    return "bottlerocket"


def provider_id(instance: Mapping[str, Any]) -> str:
    """`aws:///ZONE/ID`, as nodeadm (getProviderId) and pluto (generate_provider_id) write it."""
    return f"aws:///{instance['Placement']['AvailabilityZone']}/{instance['InstanceId']}"


def machine(instance_type: Mapping[str, Any], family: str, volume_gib: int) -> Machine:
    """What cAdvisor reports: the vCPUs, MemTotal (SizeInMiB less the kernel's share), the volume's size."""
    mib = int(instance_type["MemoryInfo"]["SizeInMiB"])
    if "arm64" in instance_type.get("ProcessorInfo", {}).get("SupportedArchitectures", []):
        mib -= ARM64_CMA_MIB
    mib -= math.ceil(mib * MEMORY_OVERHEAD_PERCENT[family] / 100)
    return Machine(cpu_millis=vcpus(instance_type) * 1000, memory_bytes=mib * _MIB,
                   ephemeral_storage_bytes=volume_gib * _GIB)


def vcpus(instance_type: Mapping[str, Any]) -> int:
    return int(instance_type["VCpuInfo"]["DefaultVCpus"])


def eni_max_pods(instance_type: Mapping[str, Any]) -> int:
    """The eni-max-pods value (nodeadm calculateStandardMaxPods, Bottlerocket's eni-max-pods file): the
    default network card's ENIs x (IPv4 addresses per ENI - 1) + 2."""
    net = instance_type["NetworkInfo"]
    index = int(net.get("DefaultNetworkCardIndex") or 0)
    cards = [c for c in net.get("NetworkCards") or [] if int(c.get("NetworkCardIndex", 0)) == index]
    enis = int(cards[0]["MaximumNetworkInterfaces"]) if cards else int(net["MaximumNetworkInterfaces"])
    return enis * (int(net["Ipv4AddressesPerInterface"]) - 1) + 2


# -- AL2023: the real nodeadm -----------------------------------------------------------------------------
def nodeadm_kubelet(instance: Mapping[str, Any], user_data: bytes, instance_type: Mapping[str, Any],
                    kubelet_version: str = KUBELET_VERSION, ec2_endpoint: str | None = None) -> KubeletStart:
    """The kubelet nodeadm would start."""
    return kubelet_view(nodeadm_boot(instance, user_data, instance_type, kubelet_version, ec2_endpoint))


def nodeadm_boot(instance: Mapping[str, Any], user_data: bytes, instance_type: Mapping[str, Any],
                 kubelet_version: str = KUBELET_VERSION, ec2_endpoint: str | None = None) -> dict[str, Any]:
    """What nodeadm's kubelet step writes: {config, dropIn, flags, userFlags} (see nodeadm_kubelet/main.go)."""
    zone = str(instance["Placement"]["AvailabilityZone"])
    fake = {"id": instance["InstanceId"], "region": zone[:-1], "type": instance["InstanceType"],
            "availabilityZone": zone, "privateDnsName": instance["PrivateDnsName"],
            "privateIp": instance["PrivateIpAddress"], "vcpus": vcpus(instance_type), "kubeletVersion": kubelet_version}
    with tempfile.NamedTemporaryFile(suffix=".mime") as f:
        f.write(user_data)
        f.flush()
        done = subprocess.run([str(tool()), f.name, json.dumps(fake)], capture_output=True, text=True,
                              timeout=60, env=_aws_env(ec2_endpoint, zone[:-1]))
    if done.returncode != 0:
        raise BootError(done.stderr.strip() or f"nodeadm exited {done.returncode}")
    return json.loads(done.stdout)


def _aws_env(ec2_endpoint: str | None, region: str) -> dict[str, str]:
    """nodeadm asks EC2 for an instance type missing from its embedded table: local EC2 when given, else a
    closed loopback port, so the call fails at once and nodeadm falls back to 110 pods, as on a node whose
    call fails. Never the real AWS."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home()), "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_ENDPOINT_URL": ec2_endpoint or "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1",
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": region}


def tool() -> Path:
    """The built carpool-kubelet-config (`CARPOOL_KUBELET_CONFIG` overrides its place). This repository keeps
    only its Go sources: it is built outside the repository, from nodeadm's source with
    `nodeadm_kubelet/*.go` overlaid (`go build -overlay`), by a recipe kept with the team's other build
    recipes in /work/shared, as the nodeadm sources it compiles are not ours to ship."""
    path = Path(os.environ.get("CARPOOL_KUBELET_CONFIG", TOOL))
    if not path.exists():
        raise NodeadmUnavailable(
            f"{path} absent: build the real nodeadm (MIRROR=<git dir of awslabs/amazon-eks-ami> "
            "/work/shared/nodeadm/build.sh), then carpool-kubelet-config from its source with "
            f"{_GO_SOURCES}/*.go overlaid (go build -overlay, package ./cmd/carpool-kubelet-config; "
            "see tests/realcluster/nodeadm_kubelet/main.go)")
    return path


def kubelet_view(boot: Mapping[str, Any]) -> KubeletStart:
    """The configuration the kubelet runs with: config.json, the drop-in over it, then its command line
    (nodeadm's flags, then the user's: the later occurrence of a flag wins)."""
    config = json_merge(boot["config"], boot.get("dropIn") or {})
    args = [f"--{k}={v}" for k, v in sorted((boot.get("flags") or {}).items())] + list(boot.get("userFlags") or [])
    labels, identity = apply_flags(config, args)
    return KubeletStart(config, labels, taints_of(config), identity)


def json_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """kubelet config-dir merging: a drop-in's fields override, maps merge per key, lists are replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = json_merge(out[key], value)
        else:
            out[key] = value
    return out


def _pairs(value: str, sep: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        key, _, val = item.partition(sep)
        out[key.strip()] = val.strip()
    return out


def _taint_dicts(value: str) -> list[dict[str, str]]:
    out = []
    for item in filter(None, (p.strip() for p in value.split(","))):
        kv, _, effect = item.rpartition(":")
        key, _, val = kv.partition("=")
        out.append({"key": key, "value": val, "effect": effect} if val else {"key": key, "effect": effect})
    return out


#: kubelet flag -> (KubeletConfiguration field, reader). A map flag's first occurrence starts a fresh map
#: (cliflag.MapStringString), so a flag replaces the config's map; later occurrences add to it.
_MAP_FLAGS = {"--kube-reserved": ("kubeReserved", "="), "--system-reserved": ("systemReserved", "="),
              "--eviction-hard": ("evictionHard", "<"), "--eviction-soft": ("evictionSoft", "<"),
              "--eviction-soft-grace-period": ("evictionSoftGracePeriod", "=")}
_SCALAR_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {"--max-pods": ("maxPods", int), "--pods-per-core": ("podsPerCore", int),
                 "--provider-id": ("providerID", str),
                 "--eviction-max-pod-grace-period": ("evictionMaxPodGracePeriod", int),
                 "--image-gc-high-threshold": ("imageGCHighThresholdPercent", int),
                 "--image-gc-low-threshold": ("imageGCLowThresholdPercent", int),
                 "--cpu-cfs-quota": ("cpuCFSQuota", lambda v: v.lower() in ("true", "1", "t")),
                 "--cluster-dns": ("clusterDNS", lambda v: [a.strip() for a in v.split(",") if a.strip()]),
                 # RegisterWithTaintsVar.Set replaces the list: a repeated flag keeps its last value
                 "--register-with-taints": ("registerWithTaints", _taint_dicts)}


#: flags that are no KubeletConfiguration field but name the node (the last occurrence wins)
_IDENTITY_FLAGS = ("--hostname-override", "--node-ip")


def apply_flags(config: dict[str, Any], args: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Command-line flags over the configuration (flags win); returns (`--node-labels`, a map flag too;
    the identity flags by name without dashes)."""
    labels: dict[str, str] = {}
    identity: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in _split(args):
        first = name not in seen
        seen.add(name)
        if name == "--node-labels":
            labels.update(_pairs(value, "="))
        elif name in _MAP_FLAGS:
            field, sep = _MAP_FLAGS[name]
            config[field] = {**({} if first else config.get(field, {})), **_pairs(value, sep)}
        elif name in _SCALAR_FLAGS:
            field, read = _SCALAR_FLAGS[name]
            config[field] = read(value)
        elif name in _IDENTITY_FLAGS:
            identity[name[2:]] = value
    return labels, identity


def _split(args: list[str]) -> list[tuple[str, str]]:
    """`--name=value`, or `--name value` as two words."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if not eq and i + 1 < len(args) and not args[i + 1].startswith("--"):
            value, i = args[i + 1], i + 1
        out.append((name, value))
        i += 1
    return out


def taints_of(config: Mapping[str, Any]) -> tuple[Taint, ...]:
    return tuple(Taint(t["key"], str(t.get("value") or ""), t["effect"]) for t in config.get("registerWithTaints") or [])


# -- Bottlerocket: its kubelet-config template and pluto --------------------------------------------------
#: schnauzer's kube_cpu_helper: millicores for 1-4 cores, then 2.5 per further core (floored)
_BR_CPU = {0: 0.0, 1: 60.0, 2: 70.0, 3: 75.0, 4: 80.0}
#: the kubelet's built-in hard eviction thresholds, which apply when Bottlerocket writes no evictionHard
KUBELET_DEFAULT_EVICTION = {"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%",
                            "nodefs.inodesFree": "5%"}
#: settings.kubernetes key -> KubeletConfiguration field, written only when set (the template's {{#if}})
_BR_OPTIONAL = {"eviction-soft": "evictionSoft", "eviction-soft-grace-period": "evictionSoftGracePeriod",
                "eviction-max-pod-grace-period": "evictionMaxPodGracePeriod",
                "image-gc-high-threshold-percent": "imageGCHighThresholdPercent",
                "image-gc-low-threshold-percent": "imageGCLowThresholdPercent"}
_BR_RESERVED_KEYS = {"cpu", "memory", "ephemeral-storage"}


def bottlerocket_cpu_reserved(cores: int) -> str:
    millis = _BR_CPU[cores] if cores in _BR_CPU else 80.0 + (cores - 4) * 2.5
    return f"{math.floor(millis)}m"


def bottlerocket_kubelet(instance: Mapping[str, Any], user_data: bytes, instance_type: Mapping[str, Any]
                         ) -> KubeletStart:
    """The kubelet Bottlerocket starts: pluto fills max-pods (eni-max-pods), provider-id and cluster-dns-ip
    when the settings lack them; the kubelet-config template writes the file; kubelet-env the labels and
    taints (`--node-labels`, `--register-with-taints`)."""
    k8s = dict((tomllib.loads(user_data.decode()).get("settings") or {}).get("kubernetes") or {})
    for name in ("kube-reserved", "system-reserved"):
        bad = sorted(set(k8s.get(name) or {}) - _BR_RESERVED_KEYS)
        if bad:  # KubernetesReservedResourceKey: the API refuses the settings, the node never configures
            raise BootError(f"Bottlerocket settings: invalid key {bad[0]!r} in settings.kubernetes.{name}")
    k8s.setdefault("max-pods", eni_max_pods(instance_type))
    k8s.setdefault("provider-id", provider_id(instance))
    # pluto: from EKS's service CIDR, else 10.100.0.10 for a VPC in 10/8, else 172.20.0.10
    k8s.setdefault("cluster-dns-ip", "10.100.0.10" if str(instance["PrivateIpAddress"]).startswith("10.") else "172.20.0.10")
    reserved = dict(k8s.get("kube-reserved") or {})
    config: dict[str, Any] = {
        "kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "clusterDomain": str(k8s.get("cluster-domain", "cluster.local")),
        "clusterDNS": [str(a) for a in k8s["cluster-dns-ip"]] if isinstance(k8s["cluster-dns-ip"], list)
        else [str(k8s["cluster-dns-ip"])],
        "kubeReserved": {"cpu": str(reserved.get("cpu") or bottlerocket_cpu_reserved(vcpus(instance_type))),
                         "memory": str(reserved.get("memory") or f"{int(k8s['max-pods']) * 11 + 255}Mi"),
                         "ephemeral-storage": str(reserved.get("ephemeral-storage") or "1Gi")},
        "kubeReservedCgroup": "/runtime", "cpuCFSQuota": bool(k8s.get("cpu-cfs-quota-enforced", True)),
        "podPidsLimit": int(k8s.get("pod-pids-limit", 1048576)), "maxPods": int(k8s["max-pods"]),
        "providerID": str(k8s["provider-id"]), "cgroupDriver": "systemd", "cgroupRoot": "/",
        "protectKernelDefaults": True, "serializeImagePulls": False, "readOnlyPort": 0,
    }
    if k8s.get("eviction-hard"):
        config["evictionHard"] = {str(k): str(v) for k, v in k8s["eviction-hard"].items()}
    if k8s.get("system-reserved"):
        config["systemReserved"] = {str(k): str(v) for k, v in k8s["system-reserved"].items()}
        config["systemReservedCgroup"] = "/system"
    for key, field in _BR_OPTIONAL.items():
        if k8s.get(key) is not None:
            value = k8s[key]
            config[field] = {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else int(value)
    labels = {str(k): str(v) for k, v in (k8s.get("node-labels") or {}).items()}
    taints = []
    for key, values in (k8s.get("node-taints") or {}).items():
        for item in [values] if isinstance(values, str) else values:
            value, _, effect = str(item).rpartition(":")
            taints.append(Taint(str(key), value, effect))
    if taints:
        config["registerWithTaints"] = [{"key": t.key, "value": t.value, "effect": t.effect} if t.value
                                        else {"key": t.key, "effect": t.effect} for t in taints]
    # kubelet-exec-start-conf: --hostname-override only when set (pluto sets it only for a hostname source)
    identity = {"hostname-override": str(k8s["hostname-override"])} if k8s.get("hostname-override") else {}
    if k8s.get("node-ip"):
        identity["node-ip"] = str(k8s["node-ip"])
    return KubeletStart(config, labels, tuple(taints), identity)


def nodeadm_available() -> str:
    """"" when the real nodeadm can be used here, else what to build (for a test's skip)."""
    try:
        tool()
    except NodeadmUnavailable as err:
        return str(err)
    return ""
