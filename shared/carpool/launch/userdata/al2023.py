"""AL2023 user data: a MIME archive whose `application/node.eks.aws` part is a nodeadm `NodeConfig`.

Order follows current Karpenter (pkg/providers/amifamily/bootstrap/nodeadm.go): the user's parts come
first and carpool's NodeConfig last. nodeadm merges every NodeConfig in archive order with later values
overriding earlier ones, so the settings carpool must own (cluster identity, max pods, reserved
resources, taints the scheduler planned for) win, while any field carpool leaves unset stays the
user's. The user's shell parts also run before the node joins, which is what they are usually for.
"""

from __future__ import annotations

from typing import Any

import yaml

from carpool.launch.userdata.bootstrap import NodeBootstrap, quantities
from carpool.launch.userdata.mime import NODE_CONFIG, SHELL_SCRIPT, MimePart, UserDataError, looks_like_mime
from carpool.launch.userdata.mime import parse_archive as _parse_archive
from carpool.launch.userdata.mime import serialize as _serialize

API_VERSION = "node.eks.aws/v1alpha1"


def render(b: NodeBootstrap) -> str:
    """The whole archive, as plain text (base64 is the launch template's business)."""
    return _serialize([*user_parts(b.user_data), MimePart(NODE_CONFIG, node_config_yaml(b))])


def user_parts(user_data: str | None) -> list[MimePart]:
    """The user's archive parts; a bare document becomes one part, NodeConfig if YAML, else a script."""
    if not user_data or not user_data.strip():
        return []
    if looks_like_mime(user_data):
        return _parse_archive(user_data)
    return [MimePart(NODE_CONFIG if _is_yaml_mapping(user_data) else SHELL_SCRIPT, user_data)]


def _is_yaml_mapping(text: str) -> bool:
    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def node_config(b: NodeBootstrap) -> dict[str, Any]:
    """The NodeConfig as a dict (handy for tests and `carpool plan --explain`)."""
    if not b.cluster_cidr:
        raise UserDataError("AL2023: the cluster service CIDR is required by nodeadm (spec.cluster.cidr)")
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": b.cluster_name,
                "apiServerEndpoint": b.endpoint,
                "certificateAuthority": b.ca_bundle,
                "cidr": b.cluster_cidr,
            },
            "kubelet": _kubelet(b),
        },
    }


def _kubelet(b: NodeBootstrap) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if b.max_pods is not None:
        config["maxPods"] = b.max_pods
    if b.cluster_dns:
        config["clusterDNS"] = [b.cluster_dns]
    if b.kube_reserved:
        config["kubeReserved"] = quantities(b.kube_reserved)
    if b.system_reserved:
        config["systemReserved"] = quantities(b.system_reserved)
    if b.eviction_hard:
        config["evictionHard"] = dict(sorted(b.eviction_hard.items()))
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
    body = yaml.safe_dump(node_config(b), sort_keys=False, default_flow_style=False, width=2**31 - 1)
    return "# carpool generated NodeConfig\n" + body.rstrip("\n")
