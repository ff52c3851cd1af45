"""AL2023 user data: a MIME archive whose `application/node.eks.aws` part is a nodeadm `NodeConfig`.

Order follows current Karpenter (pkg/providers/amifamily/bootstrap/nodeadm.go): the user's parts come
first and carpool's NodeConfig last. nodeadm merges every NodeConfig in archive order with later values
overriding earlier ones, so the settings carpool must own (cluster identity, max pods, reserved
resources, taints the scheduler planned for) win, while any field carpool leaves unset stays the
user's. The user's shell parts also run before the node joins, which is what they are usually for.

`kubelet.config.kubeReserved` is always written: nodeadm's own default reserves memory for the
ENI-limited pod count (its CalcMaxPods), not for the `maxPods` a NodeConfig sets.

A user NodeConfig is held to what nodeadm and the kubelet accept (`user_parts`): nodeadm decodes the first
YAML document of a part, so each document gets a part; a document that is no NodeConfig, a `--node-labels`
flag the kubelet would refuse and a `--register-with-taints` flag (which would replace the taints carpool
registers the node with) are refused, naming `spec.userData`.

The NodeConfig is written by a YAML emitter, never by string formatting, and every value is checked first
(`checks`): `kubelet.flags` reach the kubelet through a whitespace-split systemd variable, which no YAML
quoting protects. nodeadm decodes with Go's YAML (sigs.k8s.io/yaml, YAML 1.1 with Go's number parsing), which
reads more plain scalars as numbers, booleans or timestamps than PyYAML does (`1e3`, `0o17`, `0x1p3`, `y`,
`2024-1-2`); the emitter is taught those forms so such strings are quoted and stay strings.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from carpool.labels import UNREGISTERED_TAINT as UNREGISTERED_KEY
from carpool.labels import kubelet_may_set
from carpool.launch.userdata import checks
from carpool.launch.userdata.bootstrap import NodeBootstrap, quantities
from carpool.launch.userdata.mime import NODE_CONFIG, SHELL_SCRIPT, MimePart, UserDataError, looks_like_mime
from carpool.launch.userdata.mime import parse_archive as _parse_archive
from carpool.launch.userdata.mime import serialize as _serialize

API_VERSION = "node.eks.aws/v1alpha1"


#: PyYAML's safe dumper on libyaml's emitter when PyYAML was built with it (its wheels are): the same
#: representer and resolver (Python), so the same decisions on what to quote, at a fifth of the time of
#: the pure-Python emitter (a cold provisioner renders a NodeConfig per launch template it needs).
_SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SAFE_DUMPER):  # type: ignore[valid-type,misc]
    """PyYAML's safe emitter, also quoting the strings Go's YAML would read as something else."""


_GO_SCALARS = {
    "tag:yaml.org,2002:bool": (r"^[yYnN]$", "yYnN"),
    "tag:yaml.org,2002:int": (r"^[-+]?0(?:[oO][0-7_]+|[bB][01_]+)$", "-+0"),
    "tag:yaml.org,2002:float": (
        r"^[-+]?(?:(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9_]+)?"
        r"|0[xX][0-9a-fA-F_]*(?:\.[0-9a-fA-F_]*)?(?:[pP][-+]?[0-9_]+)?"
        r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])$",
        "-+.0123456789iInN",
    ),
    "tag:yaml.org,2002:timestamp": (r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?$", "0123456789"),
}
for _tag, (_pattern, _first) in _GO_SCALARS.items():
    _Dumper.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))

#: What reads the emitted NodeConfig back for the round-trip check: PyYAML's safe loader on libyaml's
#: parser when PyYAML was built with it (its wheels are), the same tags and values as the pure-Python
#: parser at a tenth of the time (a launch renders one NodeConfig per launch template).
_CHECK_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def render(b: NodeBootstrap) -> str:
    """The whole archive, as plain text (base64 is the launch template's business)."""
    return _serialize([*user_parts(b.user_data), MimePart(NODE_CONFIG, node_config_yaml(b))])


def user_parts(user_data: str | None) -> list[MimePart]:
    """The user's archive parts. A bare document is a NodeConfig when its first YAML document is a mapping
    with a `kind` (sigs.k8s.io/yaml reads the first document), else a shell script: Karpenter takes any
    mapping, so `echo ok: yes` would become a NodeConfig nodeadm cannot decode. nodeadm decodes only
    the first YAML document of a NodeConfig part, so a part holding several is split into one part per
    document, in order: nodeadm then merges them all, as the user meant."""
    if not user_data or not user_data.strip():
        return []
    parts = _parse_archive(user_data) if looks_like_mime(user_data) else [_bare_part(user_data)]
    return [piece for part in parts for piece in _one_document_each(part)]


def _bare_part(text: str) -> MimePart:
    return MimePart(NODE_CONFIG if _first_document_is_an_object(text) else SHELL_SCRIPT, text)


def _first_document_is_an_object(text: str) -> bool:
    try:
        first = next(iter(yaml.compose_all(text, Loader=_CHECK_LOADER)), None)
    except (yaml.YAMLError, UnicodeError):  # not YAML (or not text EC2 can carry: refused by `render`)
        return False
    return isinstance(first, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.value == "kind" for k, _ in first.value)


def _one_document_each(part: MimePart) -> list[MimePart]:
    if part.content_type.split(";", 1)[0].strip().lower() != NODE_CONFIG:
        return [part]
    try:
        documents = [d for d in yaml.compose_all(part.body, Loader=_CHECK_LOADER) if d is not None]
    except UnicodeError:
        return [part]  # refused by the archive writer, naming the part
    except yaml.YAMLError as exc:
        raise UserDataError(f"a NodeConfig is not valid YAML: {' '.join(str(exc).split())}",
                            field="spec.userData") from None
    for i, document in enumerate(documents):
        fields = {k.value: v.value for k, v in document.value if isinstance(k, yaml.ScalarNode)
                  and isinstance(v, yaml.ScalarNode)} if isinstance(document, yaml.MappingNode) else {}
        if fields.get("kind") != "NodeConfig" or not str(fields.get("apiVersion", "")).startswith("node.eks.aws/"):
            raise UserDataError(f"YAML document {i + 1} of a NodeConfig part is not a node.eks.aws NodeConfig: "
                                "nodeadm would fail to decode it and the node would never join", field="spec.userData")
    pieces = [part.body[d.start_mark.index:d.end_mark.index].rstrip("\n") for d in documents]
    for piece in pieces:
        _check_user_flags(piece)
    if len(documents) <= 1:
        return [part]
    return [MimePart(part.content_type, piece, part.headers) for piece in pieces]


def _check_user_flags(document: str) -> None:
    """The user's `kubelet.flags` the kubelet would refuse or that would undo carpool's registration: a
    `--node-labels` label the kubelet may not set (it exits at start-up), a `--register-with-taints` (the
    flag replaces the configured list, `karpenter.sh/unregistered` with it)."""
    flags: Any = yaml.load(document, Loader=_CHECK_LOADER)
    for key in ("spec", "kubelet", "flags"):
        flags = flags.get(key) if isinstance(flags, dict) else None
    for flag in flags if isinstance(flags, list) else []:
        name, _, value = str(flag).partition("=")
        if name == "--register-with-taints":
            raise UserDataError("a --register-with-taints flag replaces the taints the node registers with "
                                f"({UNREGISTERED_KEY} among them); declare taints on the NodePool", field="spec.userData")
        if name == "--node-labels":
            keys = (pair.partition("=")[0].strip() for pair in value.split(","))
            refused = sorted(k for k in keys if k and not kubelet_may_set(k))
            if refused:
                raise UserDataError(f"--node-labels: the kubelet may not set {refused[0]!r} itself (it would refuse "
                                    "to start); set it on the NodePool: carpool sets it through the API server",
                                    field="spec.userData")


def node_config(b: NodeBootstrap) -> dict[str, Any]:
    """The NodeConfig as a dict (handy for tests and `carpool plan --explain`)."""
    checks.check(b)
    if not b.cluster_cidr:
        raise UserDataError("AL2023: the cluster service CIDR is required by nodeadm (spec.cluster.cidr)",
                            field="cluster_cidr")
    spec: dict[str, Any] = {
        "cluster": {
            "name": b.cluster_name,
            "apiServerEndpoint": b.endpoint,
            "certificateAuthority": b.ca_bundle,
            "cidr": b.cluster_cidr,
        },
        "kubelet": _kubelet(b),
    }
    if b.raid0:  # nodeadm assembles the NVMe instance store into one array for the kubelet and containerd
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    return {"apiVersion": API_VERSION, "kind": "NodeConfig", "spec": spec}


def _kubelet(b: NodeBootstrap) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if b.max_pods is not None:
        config["maxPods"] = b.max_pods
    if b.pods_per_core is not None:
        config["podsPerCore"] = b.pods_per_core
    if b.cluster_dns:
        config["clusterDNS"] = [b.cluster_dns, *b.more_cluster_dns]
    if b.kube_reserved:
        config["kubeReserved"] = quantities(b.kube_reserved)
    if b.system_reserved:
        config["systemReserved"] = quantities(b.system_reserved)
    if b.eviction_hard:
        config["evictionHard"] = dict(sorted(b.eviction_hard.items()))
    if b.eviction_soft:
        config["evictionSoft"] = dict(sorted(b.eviction_soft.items()))
    if b.eviction_soft_grace_period:
        config["evictionSoftGracePeriod"] = dict(sorted(b.eviction_soft_grace_period.items()))
    if b.eviction_max_pod_grace_period is not None:
        config["evictionMaxPodGracePeriod"] = b.eviction_max_pod_grace_period
    if b.image_gc_high_threshold_percent is not None:
        config["imageGCHighThresholdPercent"] = b.image_gc_high_threshold_percent
    if b.image_gc_low_threshold_percent is not None:
        config["imageGCLowThresholdPercent"] = b.image_gc_low_threshold_percent
    if b.cpu_cfs_quota is not None:
        config["cpuCFSQuota"] = b.cpu_cfs_quota
    config["registerWithTaints"] = [_taint(t) for t in b.register_taints()]
    kubelet: dict[str, Any] = {"config": config}
    if b.labels:
        kubelet["flags"] = ["--node-labels=" + ",".join(f"{k}={v}" for k, v in b.sorted_labels())]
    return kubelet


def _taint(t: Any) -> dict[str, str]:
    out = {"key": t.key}
    if t.value:
        out["value"] = t.value
    out["effect"] = t.effect
    return out


def node_config_yaml(b: NodeBootstrap) -> str:
    config = node_config(b)
    body = yaml.dump(config, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=2**31 - 1)
    if list(yaml.load_all(body, Loader=_CHECK_LOADER)) != [config]:  # the emitter's output must read back as exactly `config`
        raise UserDataError("the NodeConfig does not read back as written", field="NodeConfig")
    return "# carpool generated NodeConfig\n" + body.rstrip("\n")
