"""Bottlerocket user data: the user's TOML with carpool's `[settings.kubernetes]` merged in.

Merge rules (Karpenter pkg/providers/amifamily/bootstrap/bottlerocket.go, with one documented change):
- carpool owns cluster identity (`cluster-name`, `api-server`, `cluster-certificate`), `cluster-dns-ip`
  and `max-pods`: they are overwritten, because a node that disagrees with the plan breaks scheduling;
- `kube-reserved`, `system-reserved`, `eviction-hard`: merged per key, carpool's keys win (they are what
  allocatable was computed from), the user's other keys stay;
- `node-labels`: merged, carpool wins on a key conflict (the scheduler relies on its labels);
- `node-taints`: merged. Karpenter drops the user's node-taints; carpool keeps them, adding its own
  values to each key. Note the scheduler does not see taints written only in userData: pods must
  tolerate them or they will not run on such nodes (declare them on the NodePool instead).
Every other user setting is kept as written.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from carpool.launch.userdata import toml_writer
from carpool.launch.userdata.bootstrap import NodeBootstrap, quantities
from carpool.launch.userdata.mime import UserDataError


def render(b: NodeBootstrap) -> str:
    return toml_writer.dumps(merged_settings(b))


def merged_settings(b: NodeBootstrap) -> dict[str, Any]:
    doc = _user_toml(b.user_data)
    settings = _subtable(doc, "settings", "settings")
    k8s = _subtable(settings, "kubernetes", "settings.kubernetes")
    k8s["cluster-name"] = b.cluster_name
    k8s["api-server"] = b.endpoint
    k8s["cluster-certificate"] = b.ca_bundle
    if b.cluster_dns:
        k8s["cluster-dns-ip"] = b.cluster_dns
    if b.max_pods is not None:
        k8s["max-pods"] = b.max_pods
    _merge_map(k8s, "kube-reserved", quantities(b.kube_reserved))
    _merge_map(k8s, "system-reserved", quantities(b.system_reserved))
    _merge_map(k8s, "eviction-hard", dict(sorted(b.eviction_hard.items())))
    _merge_map(k8s, "node-labels", dict(b.sorted_labels()))
    _merge_taints(k8s, b)
    return doc


def _user_toml(text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserDataError(f"spec.userData: Bottlerocket user data must be TOML: {exc}") from exc


def _subtable(parent: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    table = parent.setdefault(name, {})
    if not isinstance(table, dict):
        raise UserDataError(f"spec.userData: {where} must be a table")
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
        entry = f"{t.value}:{t.effect}"
        if entry not in values:
            values.append(entry)
