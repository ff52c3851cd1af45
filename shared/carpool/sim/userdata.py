"""Reading what a node's user data tells its bootstrap: labels, taints, max pods, reserved resources.

The simulated kubelet registers a node the way the real bootstrap would, from the user data EC2 hands
the instance, so a wrong label or max-pods value in carpool's user data shows up as a wrong node in the
simulation instead of being papered over. Three formats:

- AL2023: a MIME multi-part archive whose `application/node.eks.aws` parts are nodeadm `NodeConfig`s
  (or one bare NodeConfig). nodeadm merges them in order: maps deep-merged, later values winning, and
  `kubelet.flags` appended (internal/api/merge.go).
- Bottlerocket: TOML `[settings.kubernetes]`.
- AL2: a script calling `/etc/eks/bootstrap.sh` (alone or as a MIME part) with `--kubelet-extra-args`
  and `--use-max-pods`.

Only what the user data *says* is read here; what the AMI's bootstrap adds when it says nothing (default
max pods, kube-reserved, eviction thresholds) is `carpool.sim.nodeboot`'s business. A setting absent
from the user data stays None, which is different from an empty one.
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


def _node_configs(text: str) -> list[dict[str, Any]]:
    """NodeConfig documents in archive order: nodeadm reads the `application/node.eks.aws` parts only."""
    docs: list[dict[str, Any]] = []
    for content_type, body in mime_parts(text):
        if content_type in ("", NODEADM_CONTENT_TYPE):
            docs.extend(d for d in yaml.safe_load_all(body) if isinstance(d, dict) and d.get("kind") == "NodeConfig")
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
    kubelet = merge_node_configs(_node_configs(text))["spec"]["kubelet"]
    config = kubelet.get("config") or {}
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


def _str_map(value: Any) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else None


# -- kubelet flags -------------------------------------------------------------------------------------
def read_flags(cfg: BootConfig, flags: list[str]) -> None:
    """Kubelet command-line flags over the config file: a flag replaces the file's value, and a repeated
    map or list flag (`--node-labels`, `--kube-reserved`...) merges its occurrences, later ones winning
    (kubelet's pflag map/slice flags start a fresh value at their first occurrence)."""
    seen: set[str] = set()
    for flag in _split_flags(flags):
        name, _, value = flag.partition("=")
        first = name not in seen
        seen.add(name)
        if name == "--node-labels":
            cfg.labels.update(_pairs(value, "="))
        elif name == "--register-with-taints":
            cfg.taints = ([] if first else cfg.taints) + [_taint(t) for t in filter(None, value.split(","))]
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
    k8s = (tomllib.loads(text).get("settings") or {}).get("kubernetes") or {}
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
    return cfg


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
