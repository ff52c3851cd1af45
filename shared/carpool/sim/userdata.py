"""Reading what a node's user data tells its kubelet: labels, taints, max pods, kube-reserved.

The simulated kubelet registers a node the way the real bootstrap would, from the user data carpool put
in the launch template, so a wrong label or max-pods value in carpool's user data shows up as a wrong
node in the simulation instead of being papered over. Three formats: AL2023 (MIME multipart with a nodeadm
`NodeConfig`), Bottlerocket (TOML settings) and AL2 (`bootstrap.sh` flags).
"""

from __future__ import annotations

import base64
import binascii
import email
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from typing import Any

import yaml

from carpool.taints import Taint


@dataclass
class BootConfig:
    """What the node bootstrap would configure the kubelet with."""

    family: str = "custom"
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    max_pods: int | None = None
    kube_reserved: dict[str, str] = field(default_factory=dict)


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
    if "node.eks.aws" in text or "NodeConfig" in text:
        return _al2023(text)
    if "[settings.kubernetes" in text or "settings.kubernetes" in text:
        return _bottlerocket(text)
    if "/etc/eks/bootstrap.sh" in text:
        return _al2(text)
    return BootConfig()


def _node_configs(text: str) -> list[dict[str, Any]]:
    if text.lstrip().startswith(("apiVersion", "---")):
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    docs: list[dict[str, Any]] = []
    for part in email.message_from_string(text).walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        body = payload.decode() if isinstance(payload, bytes) else str(part.get_payload())
        if "NodeConfig" in body:
            docs.extend(d for d in yaml.safe_load_all(body) if isinstance(d, dict))
    return docs


def _al2023(text: str) -> BootConfig:
    cfg = BootConfig(family="al2023")
    for doc in _node_configs(text):
        kubelet = (doc.get("spec") or {}).get("kubelet") or {}
        config = kubelet.get("config") or {}
        if config.get("maxPods") is not None:
            cfg.max_pods = int(config["maxPods"])
        for t in config.get("registerWithTaints") or []:
            cfg.taints.append(Taint(t["key"], t.get("effect", "NoSchedule"), t.get("value") or ""))
        cfg.kube_reserved.update({k: str(v) for k, v in (config.get("kubeReserved") or {}).items()})
        _read_flags(cfg, kubelet.get("flags") or [])
    return cfg


def _read_flags(cfg: BootConfig, flags: list[str]) -> None:
    """`--node-labels=a=b,c=d`, `--register-with-taints=k=v:Effect`, `--max-pods=N` kubelet flags."""
    for flag in flags:
        name, _, value = flag.partition("=")
        if name == "--node-labels":
            for pair in filter(None, value.split(",")):
                k, _, v = pair.partition("=")
                cfg.labels[k] = v
        elif name == "--register-with-taints":
            cfg.taints.extend(_taint(t) for t in filter(None, value.split(",")))
        elif name == "--max-pods":
            cfg.max_pods = int(value)


def _taint(text: str) -> Taint:
    kv, _, effect = text.rpartition(":")
    key, _, value = kv.partition("=")
    return Taint(key, effect, value)


def _bottlerocket(text: str) -> BootConfig:
    cfg = BootConfig(family="bottlerocket")
    k8s = (tomllib.loads(text).get("settings") or {}).get("kubernetes") or {}
    if k8s.get("max-pods") is not None:
        cfg.max_pods = int(k8s["max-pods"])
    cfg.labels.update({k: str(v) for k, v in (k8s.get("node-labels") or {}).items()})
    for key, values in (k8s.get("node-taints") or {}).items():
        for v in [values] if isinstance(values, str) else values:
            value, _, effect = str(v).rpartition(":")
            cfg.taints.append(Taint(key, effect, value))
    cfg.kube_reserved.update({k: str(v) for k, v in (k8s.get("kube-reserved") or {}).items()})
    return cfg


def _al2(text: str) -> BootConfig:
    cfg = BootConfig(family="al2")
    match = re.search(r"--kubelet-extra-args\s+(['\"])(.*?)\1", text, re.S)
    if match:
        _read_flags(cfg, shlex.split(match.group(2)))
    return cfg
