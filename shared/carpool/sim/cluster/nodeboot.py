"""What an AMI's bootstrap makes of the user data: the kubelet configuration a node really runs with.

The user data rarely says everything; each AMI family fills the gaps its own way, and a node's
allocatable depends on those defaults as much as on what carpool wrote. Modelled on their sources:

- AL2023 (awslabs/amazon-eks-ami nodeadm, internal/kubelet/config.go): nodeadm writes a base config with
  `maxPods` = its own ENI computation (eni_max_pods.go: default-card ENIs x (IPv4 per ENI - 1) + 2, or
  `maxPodsExpression`), `kubeReserved` = {cpu: banded share of the cores, ephemeral-storage: 1Gi,
  memory: 11 MiB x *that* max pods + 255 MiB} and `evictionHard` = {memory.available: 100Mi,
  nodefs.available: 10%, nodefs.inodesFree: 5%}. The user's `kubelet.config` is a drop-in merged over it
  (maps per key, kubelet's config-dir rules); `kubelet.flags` are command-line flags, which replace a
  config field outright.
- Bottlerocket (bottlerocket-core-kit kubelet-config template, schnauzer helpers, pluto): `max-pods`
  defaults to the eni-max-pods value; `kube-reserved` cpu defaults to the banded share, memory to
  11 MiB x max-pods + 255 MiB, ephemeral-storage to 1Gi; `evictionHard` is written only when
  `eviction-hard` is set, otherwise the kubelet's built-in thresholds apply.
- AL2 (bootstrap.sh): the config file gets the same kubeReserved (memory from the eni-max-pods value)
  and evictionHard as nodeadm's, and `maxPods` unless `--use-max-pods false`; `--kubelet-extra-args`
  flags replace config fields.
- Windows (the EKS Windows AMI's Start-EKSBootstrap.ps1, called from a `<powershell>` block): the script
  writes a kubelet config with neither maxPods, kubeReserved nor evictionHard and appends
  `-KubeletExtraArgs` to the kubelet's command line, so the node gets exactly those flags over the
  kubelet's own defaults (110 pods, nothing reserved, the built-in eviction thresholds).
- Anything else (custom images): the kubelet's own defaults.

The kubelet's built-in `evictionHard`, used when the configuration sets none, is memory.available 100Mi,
nodefs.available 10%, imagefs.available 15%, nodefs.inodesFree 5%; a partial `evictionHard` is taken as
given (the unset signals are off).
"""

from __future__ import annotations

import ast
import ipaddress
import operator
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from carpool.sim.cluster.userdata import BootConfig, read_flags
from carpool.taints import Taint

#: The kubelet's default maxPods.
KUBELET_DEFAULT_MAX_PODS = 110
#: The kubelet's built-in hard eviction thresholds (pkg/kubelet/apis/config/v1beta1 defaults).
KUBELET_DEFAULT_EVICTION = {"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%",
                            "nodefs.inodesFree": "5%"}
#: What nodeadm's base kubelet config and AL2's bootstrap.sh write.
EKS_EVICTION = {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"}
#: kube-reserved cpu bands: (start, end) millicores and the share reserved in that band, per 10,000.
_CPU_BANDS = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, None, 25))


@dataclass(frozen=True)
class NodeKubelet:
    """The kubelet configuration a node runs with, after its AMI's bootstrap filled the gaps."""

    family: str
    max_pods: int
    pods_per_core: int | None
    kube_reserved: dict[str, str]
    system_reserved: dict[str, str]
    eviction_hard: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    #: the bootstrap's own max pods computation, for reference (what it reserves memory for on AL2/AL2023)
    eni_max_pods: int = 0
    #: other KubeletConfiguration fields, by name, as the kubelet's /configz would show them
    settings: dict[str, Any] = field(default_factory=dict)
    #: the kubelet's root directory is on the RAID0 array of the instance store
    raid0: bool = False
    #: the node is named by its instance ID (nodeadm's InstanceIdNodeName gate), not its private DNS name
    name_by_instance_id: bool = False


def cluster_dns_of(service_cidr: str) -> str:
    """nodeadm's default cluster DNS: the tenth address of the service CIDR (internal/kubelet/config.go)."""
    network = ipaddress.ip_network(service_cidr, strict=False)
    return str(network.network_address + 10)


def eni_max_pods(default_card_enis: int, ipv4_per_eni: int) -> int:
    """eni-max-pods.txt / nodeadm's standard value: ENIs x (IPv4 addresses per ENI - 1) + 2."""
    return default_card_enis * (ipv4_per_eni - 1) + 2


def kube_reserved_cpu_millis(vcpus: int) -> int:
    """nodeadm's getCPUMillicoresToReserve (integer steps): 1 vCPU 60m, 2 70m, 4 80m, 8 90m."""
    total_millis = vcpus * 1000
    reserved = 0
    for start, end, per_10k in _CPU_BANDS:
        if total_millis <= start:
            break
        top = total_millis if end is None else min(total_millis, end)
        reserved += (top - start) * per_10k // 10_000
    return reserved


def kube_reserved_memory_mib(max_pods: int) -> int:
    """11 MiB per pod + 255 MiB (nodeadm getMemoryMebibytesToReserve, Bottlerocket kube_reserve_memory)."""
    return 11 * max_pods + 255


def resolve(boot: BootConfig, family: str, vcpus: int, default_card_enis: int, ipv4_per_eni: int) -> NodeKubelet:
    """The node's kubelet configuration. `family` is the user data's format, or the image's family when
    the user data is not one the bootstrap reads (custom)."""
    standard = eni_max_pods(default_card_enis, ipv4_per_eni)
    resolver = _RESOLVERS.get(family, _custom)
    return resolver(boot, vcpus, standard, default_card_enis, ipv4_per_eni)


def _nodeadm(boot: BootConfig, vcpus: int, standard: int, enis: int, ips: int) -> NodeKubelet:
    own = standard
    if boot.max_pods_expression:
        own = evaluate_max_pods_expression(boot.max_pods_expression, enis, ips, standard) or standard
    base_reserved = {"cpu": f"{kube_reserved_cpu_millis(vcpus)}m", "ephemeral-storage": "1Gi",
                     "memory": f"{kube_reserved_memory_mib(own)}Mi"}
    settings = dict(boot.settings)
    if "clusterDNS" not in settings and boot.service_cidr:
        settings["clusterDNS"] = [cluster_dns_of(boot.service_cidr)]
    boot = replace(boot, settings=settings)
    return NodeKubelet(
        family="al2023",
        max_pods=boot.max_pods if boot.max_pods is not None else own,
        pods_per_core=boot.pods_per_core,
        kube_reserved=_layer(base_reserved, boot.kube_reserved, "kube_reserved" in boot.flag_maps),
        system_reserved=_layer({}, boot.system_reserved, "system_reserved" in boot.flag_maps),
        eviction_hard=_layer(EKS_EVICTION, boot.eviction_hard, "eviction_hard" in boot.flag_maps),
        labels=dict(boot.labels), taints=tuple(boot.taints), eni_max_pods=own, settings=dict(boot.settings), raid0=boot.raid0,
        name_by_instance_id=boot.name_by_instance_id,
    )


def _bottlerocket(boot: BootConfig, vcpus: int, standard: int, _enis: int, _ips: int) -> NodeKubelet:
    max_pods = boot.max_pods if boot.max_pods is not None else standard
    user = boot.kube_reserved or {}
    reserved = {"cpu": user.get("cpu") or f"{kube_reserved_cpu_millis(vcpus)}m",
                "memory": user.get("memory") or f"{kube_reserved_memory_mib(max_pods)}Mi",
                "ephemeral-storage": user.get("ephemeral-storage") or "1Gi"}
    return NodeKubelet(
        family="bottlerocket", max_pods=max_pods, pods_per_core=None, kube_reserved=reserved,
        system_reserved=dict(boot.system_reserved or {}),
        eviction_hard=dict(boot.eviction_hard) if boot.eviction_hard else dict(KUBELET_DEFAULT_EVICTION),
        labels=dict(boot.labels), taints=tuple(boot.taints), eni_max_pods=standard, settings=dict(boot.settings), raid0=boot.raid0,
    )


def _bootstrap_sh(boot: BootConfig, vcpus: int, standard: int, _enis: int, _ips: int) -> NodeKubelet:
    base_reserved = {"cpu": f"{kube_reserved_cpu_millis(vcpus)}m", "ephemeral-storage": "1Gi",
                     "memory": f"{kube_reserved_memory_mib(standard)}Mi"}
    if boot.max_pods is not None:
        max_pods = boot.max_pods
    else:
        max_pods = standard if boot.use_max_pods else KUBELET_DEFAULT_MAX_PODS
    return NodeKubelet(
        family="al2", max_pods=max_pods, pods_per_core=boot.pods_per_core,
        kube_reserved=_layer(base_reserved, boot.kube_reserved, True),
        system_reserved=_layer({}, boot.system_reserved, True),
        eviction_hard=_layer(EKS_EVICTION, boot.eviction_hard, True),
        labels=dict(boot.labels), taints=tuple(boot.taints), eni_max_pods=standard, settings=dict(boot.settings), raid0=boot.raid0,
    )


def _custom(boot: BootConfig, _vcpus: int, standard: int, _enis: int, _ips: int) -> NodeKubelet:
    return NodeKubelet(
        family="custom", max_pods=boot.max_pods if boot.max_pods is not None else KUBELET_DEFAULT_MAX_PODS,
        pods_per_core=boot.pods_per_core, kube_reserved=dict(boot.kube_reserved or {}),
        system_reserved=dict(boot.system_reserved or {}),
        eviction_hard=dict(boot.eviction_hard) if boot.eviction_hard else dict(KUBELET_DEFAULT_EVICTION),
        labels=dict(boot.labels), taints=tuple(boot.taints), eni_max_pods=standard, settings=dict(boot.settings), raid0=boot.raid0,
    )


def _windows(boot: BootConfig, _vcpus: int, standard: int, _enis: int, _ips: int) -> NodeKubelet:
    return NodeKubelet(
        family=WINDOWS, max_pods=boot.max_pods if boot.max_pods is not None else KUBELET_DEFAULT_MAX_PODS,
        pods_per_core=boot.pods_per_core, kube_reserved=dict(boot.kube_reserved or {}),
        system_reserved=dict(boot.system_reserved or {}),
        eviction_hard=dict(boot.eviction_hard) if boot.eviction_hard else dict(KUBELET_DEFAULT_EVICTION),
        labels=dict(boot.labels), taints=tuple(boot.taints), eni_max_pods=standard, settings=dict(boot.settings), raid0=boot.raid0,
    )


_RESOLVERS: dict[str, Callable[[BootConfig, int, int, int, int], NodeKubelet]] = {
    "al2023": _nodeadm, "bottlerocket": _bottlerocket, "al2": _bootstrap_sh, "windows": _windows,
}


# -- Windows -------------------------------------------------------------------------------------------
WINDOWS = "windows"
#: Windows Server release year in an EKS Windows AMI name -> the build its kubelet reports as
#: `node.kubernetes.io/windows-build` (major.minor.build of the OS).
WINDOWS_BUILDS = {"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}
_POWERSHELL = re.compile(r"<powershell>(.*?)</powershell>", re.IGNORECASE | re.DOTALL)
_PS_ARG = re.compile(r"-(\w+)\s+'((?:[^']|'')*)'")


def is_windows_user_data(text: str) -> bool:
    """EC2Launch runs the first `<powershell>` block of the user data."""
    return _POWERSHELL.search(text) is not None


def parse_windows(text: str) -> BootConfig:
    """What the bootstrap call in the first `<powershell>` block passes to the kubelet (`-KubeletExtraArgs`).

    Without a `Start-EKSBootstrap.ps1` call the node never joins: the family stays `custom`."""
    match = _POWERSHELL.search(text)
    block = match.group(1) if match else ""
    call = next((line for line in block.splitlines() if line.lstrip().startswith("& $EKSBootstrapScriptFile")), "")
    if "Start-EKSBootstrap.ps1" not in block or not call:
        return BootConfig()
    cfg = BootConfig(family=WINDOWS)
    args = {name: value.replace("''", "'") for name, value in _PS_ARG.findall(call)}
    try:
        read_flags(cfg, shlex.split(args.get("KubeletExtraArgs", "")))
    except ValueError:
        return BootConfig()
    if args.get("DNSClusterIP"):
        cfg.settings["clusterDNS"] = [args["DNSClusterIP"]]
    return cfg


def windows_build(image_name: str) -> str:
    """The build a Windows node reports, from its EKS AMI's name (`Windows_Server-2022-English-Core-...`)."""
    match = re.search(r"Windows_Server-(\d{4})-", image_name)
    return WINDOWS_BUILDS.get(match.group(1), "") if match else ""


def _layer(base: Mapping[str, str], user: Mapping[str, str] | None, replaces: bool) -> dict[str, str]:
    """A config-file map over the bootstrap's: merged per key; a command-line flag replaces it whole."""
    if user is None:
        return dict(base)
    return dict(user) if replaces else {**base, **user}


# -- maxPodsExpression -----------------------------------------------------------------------------------
_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: lambda a, b: int(a / b), ast.FloorDiv: lambda a, b: int(a / b), ast.Mod: operator.mod,
}


def evaluate_max_pods_expression(expression: str, default_enis: int, ips_per_eni: int, max_pods: int) -> int | None:
    """The integer arithmetic subset of nodeadm's CEL expression (`(default_enis - 1) * (ips_per_eni - 1)
    + 2`); None for anything else or a non-positive result, where nodeadm falls back to its standard value."""
    names = {"default_enis": default_enis, "ips_per_eni": ips_per_eni, "max_pods": max_pods}
    try:
        value = _eval(ast.parse(expression, mode="eval").body, names)
    except (SyntaxError, ValueError, ZeroDivisionError, KeyError):
        return None
    return value if value > 0 else None


def _eval(node: Any, names: Mapping[str, int]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    raise ValueError(f"unsupported expression element {type(node).__name__}")
