"""Bottlerocket user data: the user's TOML with carpool's `[settings.kubernetes]` merged in.

Merge rules (Karpenter pkg/providers/amifamily/bootstrap/bottlerocket.go, with one documented change):
- carpool owns cluster identity (`cluster-name`, `api-server`, `cluster-certificate`), `cluster-dns-ip`
  and `max-pods`: they are overwritten, because a node that disagrees with the plan breaks scheduling;
- `kube-reserved`, `system-reserved`, `eviction-hard`: merged per key, carpool's keys win (they are what
  allocatable was computed from), the user's other keys stay. kube-reserved cpu, memory and
  ephemeral-storage are always written, so the node does not fall back to Bottlerocket's own defaults;
- `node-labels`: merged, carpool wins on a key conflict (the scheduler relies on its labels);
- `node-taints`: merged. Karpenter drops the user's node-taints; carpool keeps them, adding its own
  values to each key. Note the scheduler does not see taints written only in userData: pods must
  tolerate them or they will not run on such nodes (declare them on the NodePool instead).
Every other user setting is kept as written.

The user's TOML is parsed and written again by `toml_writer`, never spliced as text, so nothing in it can
open a table or end a string in carpool's settings; carpool's own values are checked first (`checks`), as
Bottlerocket's API would refuse a bad label or taint and leave the node without settings. The written
document is read back and must equal the merged settings.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from typing import Any

from carpool.labels import kubelet_may_set
from carpool.launch.userdata import checks, toml_writer
from carpool.launch.userdata.bootstrap import NodeBootstrap, quantities
from carpool.launch.userdata.mime import UserDataError


def render(b: NodeBootstrap) -> str:
    doc = merged_settings(b)
    text = toml_writer.dumps(doc)
    if not _same(tomllib.loads(text), doc):
        raise UserDataError("the merged settings do not read back as written", field="spec.userData")
    return text


def _same(a: Any, b: Any) -> bool:
    """Equality that counts `nan` equal to itself (TOML can hold it)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


#: Karpenter's bootstrap command for `instanceStorePolicy: RAID0`: Bottlerocket's API assembles the
#: instance store into an array and binds the kubelet's and containerd's directories to it.
RAID0_COMMAND = "000-mount-instance-storage"
RAID0_COMMANDS = [["apiclient", "ephemeral-storage", "init"],
                  ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
                   "/var/log/pods"]]


def merged_settings(b: NodeBootstrap) -> dict[str, Any]:
    checks.check(b)
    if b.pods_per_core is not None:
        raise UserDataError("Bottlerocket has no pods-per-core setting (Karpenter ignores it there); use maxPods",
                            field="spec.kubelet.podsPerCore")
    for name, reserved in (("kubeReserved", b.kube_reserved), ("systemReserved", b.system_reserved)):
        if "pid" in reserved:  # its model takes cpu, memory and ephemeral-storage only: the settings are refused
            raise UserDataError("Bottlerocket reserves only cpu, memory and ephemeral-storage",
                                field=f"spec.kubelet.{name}.pid")
    doc = _user_toml(b.user_data)
    settings = _subtable(doc, "settings", "settings")
    k8s = _subtable(settings, "kubernetes", "settings.kubernetes")
    k8s["cluster-name"] = b.cluster_name
    k8s["api-server"] = b.endpoint
    k8s["cluster-certificate"] = b.ca_bundle
    if b.cluster_dns:  # an address, or a list of them (KubernetesClusterDnsIp takes either)
        k8s["cluster-dns-ip"] = [b.cluster_dns, *b.more_cluster_dns] if b.more_cluster_dns else b.cluster_dns
    if b.max_pods is not None:
        k8s["max-pods"] = b.max_pods
    _merge_map(k8s, "kube-reserved", quantities(b.kube_reserved))
    _merge_map(k8s, "system-reserved", quantities(b.system_reserved))
    _merge_map(k8s, "eviction-hard", dict(sorted(b.eviction_hard.items())))
    _merge_map(k8s, "eviction-soft", dict(sorted(b.eviction_soft.items())))
    _merge_map(k8s, "eviction-soft-grace-period", dict(sorted(b.eviction_soft_grace_period.items())))
    if b.eviction_max_pod_grace_period is not None:
        k8s["eviction-max-pod-grace-period"] = b.eviction_max_pod_grace_period
    if b.image_gc_high_threshold_percent is not None:  # Bottlerocket's model takes these as strings
        k8s["image-gc-high-threshold-percent"] = str(b.image_gc_high_threshold_percent)
    if b.image_gc_low_threshold_percent is not None:
        k8s["image-gc-low-threshold-percent"] = str(b.image_gc_low_threshold_percent)
    if b.cpu_cfs_quota is not None:
        k8s["cpu-cfs-quota-enforced"] = b.cpu_cfs_quota
    if b.raid0:
        commands = _subtable(settings, "bootstrap-commands", "settings.bootstrap-commands")
        commands[RAID0_COMMAND] = {"commands": RAID0_COMMANDS, "essential": True, "mode": "always"}
    _merge_map(k8s, "node-labels", dict(b.sorted_labels()))
    refused = sorted(k for k in k8s.get("node-labels") or {} if not kubelet_may_set(str(k)))
    if refused:  # Bottlerocket hands node-labels to the kubelet's --node-labels, which refuses to start
        raise UserDataError(f"settings.kubernetes.node-labels: the kubelet may not set {refused[0]!r} itself (set it "
                            "on the NodePool: carpool sets it through the API server)", field="spec.userData")
    _merge_taints(k8s, b)
    return doc


def _user_toml(text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"Bottlerocket user data must be TOML: {exc}", field="spec.userData") from exc


def _subtable(parent: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    table = parent.setdefault(name, {})
    if not isinstance(table, dict):
        raise UserDataError(f"{where} must be a table", field="spec.userData")
    return table


def _merge_map(k8s: dict[str, Any], name: str, ours: Mapping[str, Any]) -> None:
    if not ours:
        return
    table = _subtable(k8s, name, f"settings.kubernetes.{name}")
    table.update(ours)


def _merge_taints(k8s: dict[str, Any], b: NodeBootstrap) -> None:
    """Bottlerocket's shape: `key = ["value:Effect", ...]` (an empty value gives `":Effect"`)."""
    table = _subtable(k8s, "node-taints", "settings.kubernetes.node-taints")
    for t in b.register_taints():
        values = table.setdefault(t.key, [])
        if isinstance(values, str):
            values = table[t.key] = [values]
        if not isinstance(values, list):
            raise UserDataError(f"settings.kubernetes.node-taints.{t.key} must be a string or an array of strings",
                                field="spec.userData")
        entry = f"{t.value}:{t.effect}"
        if entry not in values:
            values.append(entry)
