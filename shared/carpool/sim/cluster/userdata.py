"""Reading what a node's user data tells its bootstrap: labels, taints, max pods, reserved resources.

The simulated kubelet registers a node the way the real bootstrap would, from the user data EC2 hands
the instance, so a wrong label or max-pods value in carpool's user data shows up as a wrong node in the
simulation instead of being papered over. Three formats:

- AL2023: a MIME multi-part archive whose `application/node.eks.aws` parts are nodeadm `NodeConfig`s
  (or one bare NodeConfig). nodeadm decodes each part with apimachinery's YAML decoder, which reads the
  part's *first* YAML document only (internal/configprovider/mime.go, api/bridge/decode.go); a part whose
  first document is not a NodeConfig fails `nodeadm init`, and the node never joins. It merges the parts in
  order: maps deep-merged, later values winning, and `kubelet.flags` appended (internal/api/merge.go).
- Bottlerocket: TOML `[settings.kubernetes]`.
- AL2: a script calling `/etc/eks/bootstrap.sh` (alone or as a MIME part) with `--kubelet-extra-args`
  and `--use-max-pods`.

Only what the user data *says* is read here; what the AMI's bootstrap adds when it says nothing (default
max pods, kube-reserved, eviction thresholds) is `carpool.sim.cluster.nodeboot`'s business. A setting absent
from the user data stays None, which is different from an empty one.
"""

from __future__ import annotations

import base64
import binascii
import email
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from carpool.taints import Taint

NODEADM_CONTENT_TYPE = "application/node.eks.aws"


@dataclass
class BootConfig:
    """What the user data configures, per field None when it does not say."""

    family: str = "custom"
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: dict[str, str] | None = None
    system_reserved: dict[str, str] | None = None
    eviction_hard: dict[str, str] | None = None
    #: nodeadm `spec.kubelet.maxPodsExpression` (a CEL expression over default_enis, ips_per_eni, max_pods)
    max_pods_expression: str | None = None
    #: AL2 `bootstrap.sh --use-max-pods` (false: bootstrap.sh leaves maxPods to the kubelet's flags/default)
    use_max_pods: bool = True
    #: the reserved/eviction maps set by command-line flags, which replace the bootstrap's map outright
    #: (a config-file map is merged over it per key)
    flag_maps: set[str] = field(default_factory=set)
    #: other kubelet configuration the user data sets, by KubeletConfiguration field name (clusterDNS,
    #: evictionSoft, evictionSoftGracePeriod, evictionMaxPodGracePeriod, imageGC*ThresholdPercent, cpuCFSQuota)
    settings: dict[str, Any] = field(default_factory=dict)
    #: the instance store is assembled as RAID0 for the kubelet (nodeadm localStorage, bootstrap.sh
    #: --local-disks raid0, Bottlerocket `apiclient ephemeral-storage`)
    raid0: bool = False
    #: the service CIDR the NodeConfig gives (nodeadm derives the default cluster DNS from it)
    service_cidr: str | None = None
    #: nodeadm's `InstanceIdNodeName` feature gate: the node is named by its instance ID, not its private
    #: DNS name (internal/kubelet/config.go withCloudProvider)
    name_by_instance_id: bool = False
    #: why the bootstrap fails before the kubelet starts ("" when it does not)
    refusal: str = ""


def decode(value: str | bytes | None) -> str:
    """User data as EC2 returns it (base64, sometimes twice over) to text."""
    if not value:
        return ""
    data = value.encode() if isinstance(value, str) else value
    for _ in range(2):
        try:
            decoded = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            break
        data = decoded
    return data.decode("utf-8", errors="replace")


def parse(text: str) -> BootConfig:
    """Recognise the format and read it; unknown formats give an empty config (family `custom`)."""
    parts = mime_parts(text)
    if any(ctype == NODEADM_CONTENT_TYPE for ctype, _body in parts):
        return _al2023(text)  # nodeadm reads only its own content type; a script mentioning it does not count
    if any(ctype in ("", "text/x-shellscript") and _bootstrap_call(body) for ctype, body in parts):
        return _al2(text)
    if len(parts) == 1 and "NodeConfig" in text:
        return _al2023(text)  # a bare NodeConfig document (no MIME archive)
    if "settings.kubernetes" in text:
        return _bottlerocket(text)
    return BootConfig()


# -- AL2023 (nodeadm) ----------------------------------------------------------------------------------
def mime_parts(text: str) -> list[tuple[str, str]]:
    """(content type, decoded body) of each part of a MIME archive; a plain document is one part."""
    head = text.lstrip()
    if not head.startswith(("MIME-Version:", "Content-Type:")):
        return [("", text)]
    out = []
    for part in email.message_from_string(text).walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        body = payload.decode(errors="replace") if isinstance(payload, bytes) else str(part.get_payload())
        out.append((part.get_content_type(), body))
    return out


def _node_configs(text: str, cfg: BootConfig) -> list[dict[str, Any]]:
    """NodeConfig documents in archive order: the first YAML document of each `application/node.eks.aws`
    part (of the whole user data when it is not an archive), as nodeadm decodes them. A part whose first
    document is no NodeConfig fails nodeadm: `cfg.refusal` says why."""
    docs: list[dict[str, Any]] = []
    for i, (content_type, body) in enumerate(mime_parts(text)):
        if content_type not in ("", NODEADM_CONTENT_TYPE):
            continue
        try:
            first = next(iter(yaml.safe_load_all(body)), None)
        except yaml.YAMLError as exc:
            cfg.refusal = f"nodeadm: part {i + 1}: failed to decode node config: {' '.join(str(exc).split())}"
            return []
        if not (isinstance(first, dict) and first.get("kind") == "NodeConfig"
                and str(first.get("apiVersion", "")).startswith("node.eks.aws/")):
            cfg.refusal = f"nodeadm: part {i + 1}: failed to decode node config (its first YAML document is no NodeConfig)"
            return []
        docs.append(first)
    return docs


def merge_node_configs(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """nodeadm's merge: maps deep-merged with later values winning; `spec.kubelet.flags` appended."""
    merged: dict[str, Any] = {}
    flags: list[str] = []
    for doc in docs:
        kubelet = (doc.get("spec") or {}).get("kubelet") or {}
        flags += [str(f) for f in kubelet.get("flags") or []]
        _deep_merge(merged, doc)
    merged.setdefault("spec", {}).setdefault("kubelet", {})["flags"] = flags
    return merged


def _deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _deep_merge(dst[key], value)
        elif value is not None:
            dst[key] = value


def _al2023(text: str) -> BootConfig:
    cfg = BootConfig(family="al2023")
    merged = merge_node_configs(_node_configs(text, cfg))
    spec = merged.get("spec") or {}
    if not cfg.refusal:
        cfg.refusal = _nodeadm_validation(spec.get("cluster") or {})
    kubelet = spec["kubelet"]
    config = kubelet.get("config") or {}
    cfg.service_cidr = str((spec.get("cluster") or {}).get("cidr") or "") or None
    cfg.name_by_instance_id = (spec.get("featureGates") or {}).get("InstanceIdNodeName") is True
    cfg.raid0 = str(((spec.get("instance") or {}).get("localStorage") or {}).get("strategy", "")) == "RAID0"
    cfg.settings.update({k: config[k] for k in SETTINGS if config.get(k) is not None})
    if config.get("maxPods") is not None:
        cfg.max_pods = int(config["maxPods"])
    if config.get("podsPerCore") is not None:
        cfg.pods_per_core = int(config["podsPerCore"])
    for t in config.get("registerWithTaints") or []:
        cfg.taints.append(Taint(t["key"], t.get("effect", "NoSchedule"), t.get("value") or ""))
    cfg.kube_reserved = _str_map(config.get("kubeReserved"))
    cfg.system_reserved = _str_map(config.get("systemReserved"))
    cfg.eviction_hard = _str_map(config.get("evictionHard"))
    if kubelet.get("maxPodsExpression"):
        cfg.max_pods_expression = str(kubelet["maxPodsExpression"])
    read_flags(cfg, kubelet.get("flags") or [])
    return cfg


def _nodeadm_validation(cluster: dict[str, Any]) -> str:
    """nodeadm init's ValidateNodeConfig (internal/api/validation.go) on the merged NodeConfig: a cluster
    without a name, endpoint, certificate authority or service CIDR stops the boot before the kubelet
    starts (found by comparing with the real nodeadm: tests/realcluster/test_carpool_boot.py)."""
    for key, missing in (("name", "Name"), ("apiServerEndpoint", "Apiserver endpoint")):
        if not cluster.get(key):
            return f"nodeadm: {missing} is missing in cluster configuration"
    if cluster.get("certificateAuthority") is None:  # a nil []byte; an empty string decodes to a non-nil one
        return "nodeadm: Certificate authority is missing in cluster configuration"
    if not cluster.get("cidr"):
        return "nodeadm: CIDR is missing in cluster configuration"
    if cluster.get("enableOutpost") is True and not cluster.get("id"):
        return "nodeadm: cluster ID must be provided for outposts"
    return ""


def _str_map(value: Any) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else None


# -- kubelet flags -------------------------------------------------------------------------------------
#: KubeletConfiguration fields beyond sizing that the simulated kubelet keeps (its /configz view).
SETTINGS = ("clusterDNS", "evictionSoft", "evictionSoftGracePeriod", "evictionMaxPodGracePeriod",
            "imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "cpuCFSQuota")
#: kubelet flag -> (KubeletConfiguration field, how its value reads)
_SETTING_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--cluster-dns": ("clusterDNS", lambda v: [a.strip() for a in v.split(",") if a.strip()]),
    "--eviction-soft": ("evictionSoft", lambda v: _pairs(v, "<")),
    "--eviction-soft-grace-period": ("evictionSoftGracePeriod", lambda v: _pairs(v, "=")),
    "--eviction-max-pod-grace-period": ("evictionMaxPodGracePeriod", int),
    "--image-gc-high-threshold": ("imageGCHighThresholdPercent", int),
    "--image-gc-low-threshold": ("imageGCLowThresholdPercent", int),
    "--cpu-cfs-quota": ("cpuCFSQuota", lambda v: v.strip().lower() in ("true", "1", "t")),
}

def read_flags(cfg: BootConfig, flags: list[str]) -> None:
    """Kubelet command-line flags over the config file: a flag replaces the file's value, and a repeated
    map flag (`--node-labels`, `--kube-reserved`...) merges its occurrences, later ones winning (kubelet's
    pflag map flags start a fresh value at their first occurrence); a repeated `--register-with-taints`
    keeps its last value only (RegisterWithTaintsVar.Set replaces the list)."""
    seen: set[str] = set()
    for flag in _split_flags(flags):
        name, _, value = flag.partition("=")
        first = name not in seen
        seen.add(name)
        if name == "--node-labels":
            cfg.labels.update(_pairs(value, "="))
        elif name == "--register-with-taints":
            # RegisterWithTaintsVar.Set replaces the list: a repeated flag keeps only its last value
            cfg.taints = [_taint(t) for t in filter(None, value.split(","))]
        elif name == "--max-pods":
            cfg.max_pods = int(value)
        elif name == "--pods-per-core":
            cfg.pods_per_core = int(value)
        elif name in ("--kube-reserved", "--system-reserved", "--eviction-hard"):
            attr = name[2:].replace("-", "_")
            sep = "<" if name == "--eviction-hard" else "="
            current = {} if first else dict(getattr(cfg, attr) or {})
            setattr(cfg, attr, {**current, **_pairs(value, sep)})
            cfg.flag_maps.add(attr)
        elif name in _SETTING_FLAGS:
            setting, read = _SETTING_FLAGS[name]
            parsed = read(value)
            if isinstance(parsed, dict) and not first:  # a map flag merges its occurrences
                parsed = {**cfg.settings.get(setting, {}), **parsed}
            cfg.settings[setting] = parsed


def _split_flags(flags: list[str]) -> list[str]:
    """`--name=value` items; `--name value` pairs are joined."""
    out: list[str] = []
    items = list(flags)
    i = 0
    while i < len(items):
        item = items[i]
        if item.startswith("--") and "=" not in item and i + 1 < len(items) and not items[i + 1].startswith("--"):
            out.append(f"{item}={items[i + 1]}")
            i += 2
            continue
        out.append(item)
        i += 1
    return out


def _pairs(value: str, sep: str) -> dict[str, str]:
    out = {}
    for pair in filter(None, value.split(",")):
        k, _, v = pair.partition(sep)
        out[k.strip()] = v.strip()
    return out


def _taint(text: str) -> Taint:
    kv, _, effect = text.rpartition(":")
    key, _, value = kv.partition("=")
    return Taint(key, effect, value)


# -- Bottlerocket --------------------------------------------------------------------------------------
def _bottlerocket(text: str) -> BootConfig:
    cfg = BootConfig(family="bottlerocket")
    settings = tomllib.loads(text).get("settings") or {}
    k8s = settings.get("kubernetes") or {}
    if k8s.get("max-pods") is not None:
        cfg.max_pods = int(k8s["max-pods"])
    cfg.labels.update({k: str(v) for k, v in (k8s.get("node-labels") or {}).items()})
    for key, values in (k8s.get("node-taints") or {}).items():
        for v in [values] if isinstance(values, str) else values:
            value, _, effect = str(v).rpartition(":")
            cfg.taints.append(Taint(key, effect, value))
    cfg.kube_reserved = _str_map(k8s.get("kube-reserved"))
    cfg.system_reserved = _str_map(k8s.get("system-reserved"))
    cfg.eviction_hard = _str_map(k8s.get("eviction-hard"))
    for name in ("kube-reserved", "system-reserved"):
        bad = sorted(set(k8s.get(name) or {}) - {"cpu", "memory", "ephemeral-storage"})
        if bad:  # KubernetesReservedResourceKey: the settings API refuses the whole user data
            cfg.refusal = f"Bottlerocket settings: invalid Reserved sources key {bad[0]!r} in settings.kubernetes.{name}"
    for key, setting, read in _BOTTLEROCKET_SETTINGS:
        if k8s.get(key) is not None:
            cfg.settings[setting] = read(k8s[key])
    commands = (settings.get("bootstrap-commands") or {}).values()
    cfg.raid0 = any(["apiclient", "ephemeral-storage", "init"] in (c.get("commands") or []) for c in commands
                    if isinstance(c, dict))
    return cfg


#: Bottlerocket settings.kubernetes key -> KubeletConfiguration field (the kubelet-config template)
_BOTTLEROCKET_SETTINGS = (
    ("cluster-dns-ip", "clusterDNS", lambda v: [str(a) for a in v] if isinstance(v, list) else [str(v)]),
    ("eviction-soft", "evictionSoft", lambda v: {str(k): str(x) for k, x in v.items()}),
    ("eviction-soft-grace-period", "evictionSoftGracePeriod", lambda v: {str(k): str(x) for k, x in v.items()}),
    ("eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", int),
    ("image-gc-high-threshold-percent", "imageGCHighThresholdPercent", int),
    ("image-gc-low-threshold-percent", "imageGCLowThresholdPercent", int),
    ("cpu-cfs-quota-enforced", "cpuCFSQuota", bool),
)


# -- AL2 (bootstrap.sh) --------------------------------------------------------------------------------
def _al2(text: str) -> BootConfig:
    cfg = BootConfig(family="al2")
    # cloud-init runs the shell parts in order; the first that invokes bootstrap.sh joins the node
    calls = (_bootstrap_call(body) for ctype, body in mime_parts(text) if ctype in ("", "text/x-shellscript"))
    call = next(filter(None, calls), "")
    try:
        words = shlex.split(call)
    except ValueError:
        return cfg
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word == "--use-max-pods":
            cfg.use_max_pods = nxt.lower() != "false"
        elif word == "--dns-cluster-ip":  # bootstrap.sh: `.clusterDNS=($DNS_CLUSTER_IP|split(","))`
            cfg.settings["clusterDNS"] = nxt.split(",")
        elif word == "--local-disks":
            cfg.raid0 = nxt == "raid0"
        elif word == "--kubelet-extra-args":
            read_flags(cfg, shlex.split(nxt))
    return cfg


def _bootstrap_call(text: str) -> str:
    """The `/etc/eks/bootstrap.sh ...` command, with its backslash line continuations joined."""
    joined = re.sub(r"\\\r?\n", " ", text)
    # an invocation: the script at the start of a command line (after optional `exec`/`sudo`), not a
    # mention in a comment or a string
    match = re.search(r"^[ \t]*(?:(?:exec|sudo)[ \t]+)?(/etc/eks/bootstrap\.sh(?:[ \t][^\n]*)?)$", joined, re.M)
    return match.group(1) if match else ""
