"""No value can change the structure of a node's user data, in any AMI family.

For every field that reaches user data and every injection string, rendering either refuses with a
`UserDataError` naming the field, or the output read back (strictly: `email` for the MIME archive,
`yaml.safe_load_all` for each NodeConfig, `tomllib`, `shlex`, then the readers' own separators: systemd's
whitespace split, kubelet's `,`/`=`/`:`/`<`) and through `carpool.sim.cluster.userdata` (what the simulated kubelet
reads) holds exactly the original values in the original fields, and nothing else.
"""

from __future__ import annotations

import email
import email.message
import json
import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from carpool import labels as wk
from carpool.amis.offline import placeholder_amis
from carpool.api.loader import load
from carpool.app import launching, pools
from carpool.app.settings import Settings
from carpool.catalog import Catalog
from carpool.cli import app
from carpool.launch.userdata import NodeBootstrap, UserDataError, quantities, render
from carpool.requirements import Requirement, Requirements
from carpool.scheduling import convert
from carpool.scheduling.scheduler import schedule
from carpool.sim.cluster import userdata as sim
from carpool.taints import Taint

FAMILIES = ["al2023", "bottlerocket", "al2"]
MIB, GIB = 2**20, 2**30
EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
BOOTSTRAP_SH = "/etc/eks/bootstrap.sh"

BASE = NodeBootstrap(
    cluster_name="demo",
    endpoint="https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
    cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10",
    max_pods=29,
    kube_reserved={"cpu": 70, "memory": 574 * MIB, "ephemeral-storage": 1 * GIB},
    system_reserved={"cpu": 100, "memory": 100 * MIB},
    eviction_hard={"memory.available": "100Mi", "nodefs.available": "10%"},
    labels={wk.NODEPOOL: "default", wk.CAPACITY_TYPE: "spot", "team": "payments"},
    taints=(Taint("dedicated", "NoSchedule", "payments"),),
    startup_taints=(Taint("node.cilium.io/agent-not-ready", "NoExecute", "true"),),
)

INJECTIONS = [
    "a\nb", "a\r\nb", "a\rb", 'a"b', "a'b", "a b", "a\tb", "a\\b",
    "a,b=c --max-pods=999", "a,evil=1", "a=b", "--max-pods=999", " --max-pods=999", "a:NoSchedule", "a<1Gi",
    "x\n[settings.kubernetes]\nmax-pods = 999", "[settings]", '"]\n[settings.kubernetes]\nmax-pods = 999\n#',
    "x\n---\nkind: NodeConfig", "---", "a: b", "{a: b}", "&anchor *alias",
    "--//", "x\n--//\nContent-Type: text/x-shellscript\n\nreboot\n--//--", "--//--",
    "$(reboot)", "`reboot`", "a;reboot", "a&&reboot", "a|reboot", "a&b", "a%b", "#a",
    "a\x00b", "a\u2028b", "a\u2029b", "a\x85b", "a\x0bb", "\ufeffa",
    "a" * 64, "a-", "-a", "",
]

#: a character some reader of user data takes for syntax (separator, quote, line break, shell operator)
SYNTAX = re.compile(r"[^A-Za-z0-9._-]")

Maker = Callable[[str], NodeBootstrap]
#: field -> (bootstrap carrying the hostile text there, the `UserDataError.field` a refusal must name)
FIELDS: dict[str, tuple[Maker, str]] = {
    "cluster name": (lambda s: replace(BASE, cluster_name=s), "cluster_name"),
    "cluster name suffix": (lambda s: replace(BASE, cluster_name="demo" + s), "cluster_name"),
    "endpoint": (lambda s: replace(BASE, endpoint=s), "endpoint"),
    "endpoint suffix": (lambda s: replace(BASE, endpoint=BASE.endpoint + s), "endpoint"),
    "ca bundle": (lambda s: replace(BASE, ca_bundle=BASE.ca_bundle + s), "ca_bundle"),
    "cluster cidr": (lambda s: replace(BASE, cluster_cidr="10.100.0.0/16" + s), "cluster_cidr"),
    "cluster dns": (lambda s: replace(BASE, cluster_dns="10.100.0.10" + s), "cluster_dns"),
    "ipv6 dns zone": (lambda s: replace(BASE, cluster_dns="fe80::a%" + s), "cluster_dns"),
    "max pods": (lambda s: replace(BASE, max_pods="29" + s), "max_pods"),  # type: ignore[arg-type]
    "label key": (lambda s: replace(BASE, labels={**BASE.labels, s: "v"}), "labels["),
    "label key suffix": (lambda s: replace(BASE, labels={**BASE.labels, "team" + s: "v"}), "labels["),
    "label value": (lambda s: replace(BASE, labels={**BASE.labels, "team": s}), "labels['team']"),
    "label value suffix": (lambda s: replace(BASE, labels={**BASE.labels, "team": "a" + s}), "labels['team']"),
    "taint key": (lambda s: replace(BASE, taints=(Taint(s, "NoSchedule", "v"),)), "taints[0]"),
    "taint value": (lambda s: replace(BASE, taints=(Taint("dedicated", "NoSchedule", s),)), "taints[0]"),
    "taint value suffix": (lambda s: replace(BASE, taints=(Taint("dedicated", "NoSchedule", "a" + s),)), "taints[0]"),
    "taint effect": (lambda s: replace(BASE, taints=(Taint("dedicated", "NoSchedule" + s, "v"),)), "taints[0]"),
    "startup taint value": (
        lambda s: replace(BASE, startup_taints=(Taint("agent", "NoExecute", "a" + s),)), "startup_taints[0]"),
    "kube-reserved name": (lambda s: replace(BASE, kube_reserved={**BASE.kube_reserved, s: 1}), "kube_reserved["),
    "kube-reserved amount": (
        lambda s: replace(BASE, kube_reserved={"memory": "1Gi" + s}), "kube_reserved['memory']"),  # type: ignore[dict-item]
    "system-reserved amount": (
        lambda s: replace(BASE, system_reserved={"cpu": "100m" + s}), "system_reserved['cpu']"),  # type: ignore[dict-item]
    "eviction signal": (lambda s: replace(BASE, eviction_hard={s: "100Mi"}), "eviction_hard["),
    "eviction threshold": (
        lambda s: replace(BASE, eviction_hard={"memory.available": "100Mi" + s}), "eviction_hard['memory.available']"),
    "eviction percentage": (
        lambda s: replace(BASE, eviction_hard={"nodefs.available": "10" + s + "%"}), "eviction_hard['nodefs.available']"),
}


# -- what the user data must say, computed from the bootstrap ---------------------------------------
def expected(b: NodeBootstrap) -> dict[str, Any]:
    return {
        "labels": dict(b.labels),
        "taints": [(t.key, t.value, t.effect) for t in b.register_taints()],
        "max_pods": b.max_pods,
        "kube_reserved": quantities(b.kube_reserved),
        "system_reserved": quantities(b.system_reserved),
        "eviction_hard": dict(b.eviction_hard),
    }


# -- strict readers, one per family, written from the consumers' own rules --------------------------
def kubelet_map(value: str, sep: str = "=") -> dict[str, str]:
    """k8s.io/component-base MapStringString (and its `<` sibling): split on `,`, then on the first sep."""
    out = {}
    for pair in filter(None, value.split(",")):
        assert sep in pair, f"malformed pair {pair!r}"
        k, v = pair.split(sep, 1)
        out[k.strip()] = v.strip()
    return out


def kubelet_taints(value: str) -> list[tuple[str, str, str]]:
    """pkg/util/taints: `key=value:effect` or `key:effect`, comma separated; nothing else parses."""
    out = []
    for spec in value.split(","):
        parts = spec.split(":")
        assert len(parts) == 2 and parts[1] in EFFECTS, spec
        kv = parts[0].split("=")
        assert len(kv) <= 2, spec
        out.append((kv[0], kv[1] if len(kv) == 2 else "", parts[1]))
    return out


def kubelet_flags(words: list[str]) -> dict[str, str]:
    """`--name=value` words; every flag once (a repeated one would merge or override)."""
    flags: dict[str, str] = {}
    for word in words:
        assert word.startswith("--") and "=" in word, word
        name, value = word.split("=", 1)
        assert name not in flags, f"{name} given twice"
        flags[name] = value
    return flags


def from_flags(flags: dict[str, str]) -> dict[str, Any]:
    return {
        "labels": kubelet_map(flags.get("--node-labels", "")),
        "taints": kubelet_taints(flags["--register-with-taints"]),
        "max_pods": int(flags["--max-pods"]) if "--max-pods" in flags else None,
        "kube_reserved": kubelet_map(flags.get("--kube-reserved", "")),
        "system_reserved": kubelet_map(flags.get("--system-reserved", "")),
        "eviction_hard": kubelet_map(flags.get("--eviction-hard", ""), "<"),
    }


def body(part: email.message.Message) -> str:
    payload = part.get_payload()
    assert isinstance(payload, str)
    return payload


def archive(text: str, user_parts: int) -> list[email.message.Message]:
    """The archive as Python's email reads it, checked to hold the delimiter only where parts start/end."""
    message = email.message_from_string(text)
    boundary = message.get_param("boundary")
    assert isinstance(boundary, str)
    parts = message.get_payload()
    assert isinstance(parts, list) and len(parts) == user_parts + 1
    assert all(isinstance(p, email.message.Message) for p in parts)
    # Go's mime/multipart also ends a part at `--B ` or `--B--anything`: the delimiter must occur nowhere else
    assert text.count("--" + boundary) == len(parts) + 1
    return [p for p in parts if isinstance(p, email.message.Message)]


def strict_al2023(b: NodeBootstrap, text: str, user_parts: int = 0) -> dict[str, Any]:
    parts = archive(text, user_parts)
    ours = parts[-1]
    assert ours.get_content_type() == "application/node.eks.aws"
    docs = list(yaml.safe_load_all(body(ours)))
    assert len(docs) == 1
    [doc] = docs
    assert set(doc) == {"apiVersion", "kind", "spec"} and set(doc["spec"]) == {"cluster", "kubelet"}
    assert doc["spec"]["cluster"] == {"name": b.cluster_name, "apiServerEndpoint": b.endpoint,
                                      "certificateAuthority": b.ca_bundle, "cidr": b.cluster_cidr}
    kubelet = doc["spec"]["kubelet"]
    assert set(kubelet) <= {"config", "flags"}
    config = kubelet["config"]
    assert set(config) == {"maxPods", "clusterDNS", "kubeReserved", "systemReserved", "evictionHard",
                           "registerWithTaints"}
    assert config["clusterDNS"] == [b.cluster_dns]
    flags = kubelet.get("flags", [])
    # nodeadm: NODEADM_KUBELET_ARGS=<flags joined by spaces>, split on whitespace by systemd's ExecStart
    assert "\n" not in " ".join(flags) and " ".join(flags).split() == flags
    assert set(kubelet_flags(flags)) <= {"--node-labels"}
    return {
        "labels": kubelet_map(kubelet_flags(flags).get("--node-labels", "")),
        "taints": [(t["key"], t.get("value", ""), t["effect"]) for t in config["registerWithTaints"]],
        "max_pods": config["maxPods"],
        "kube_reserved": config["kubeReserved"],
        "system_reserved": config["systemReserved"],
        "eviction_hard": config["evictionHard"],
    }


def strict_bottlerocket(b: NodeBootstrap, text: str) -> dict[str, Any]:
    doc = tomllib.loads(text)
    assert set(doc) == {"settings"} and set(doc["settings"]) == {"kubernetes"}
    k8s = doc["settings"]["kubernetes"]
    assert set(k8s) == {"cluster-name", "api-server", "cluster-certificate", "cluster-dns-ip", "max-pods",
                        "kube-reserved", "system-reserved", "eviction-hard", "node-labels", "node-taints"}
    assert (k8s["cluster-name"], k8s["api-server"], k8s["cluster-certificate"], k8s["cluster-dns-ip"]) == (
        b.cluster_name, b.endpoint, b.ca_bundle, b.cluster_dns)
    taints = []
    for key, values in k8s["node-taints"].items():
        for v in values:  # Bottlerocket's KubernetesTaintValue: `value:Effect`, one colon
            value, effect = v.split(":")
            assert effect in EFFECTS
            taints.append((key, value, effect))
    return {"labels": k8s["node-labels"], "taints": taints, "max_pods": k8s["max-pods"],
            "kube_reserved": k8s["kube-reserved"], "system_reserved": k8s["system-reserved"],
            "eviction_hard": k8s["eviction-hard"]}


_SHELL_WORD = r"(?:--[a-z0-9-]+|false|ipv6|(?:'[^']*'|\"'\")+)"


def strict_al2(b: NodeBootstrap, text: str) -> dict[str, Any]:
    lines = text.split("\n")
    assert lines[0] == "#!/bin/bash -xe" and lines[1].startswith("exec > >(tee /var/log/user-data.log")
    call = "\n".join(lines[2:]).replace(" \\\n", " ").rstrip("\n")
    assert "\n" not in call  # one command, nothing after it
    # nothing unquoted but option names and fixed words: no shell syntax can be active
    assert re.fullmatch(rf"{re.escape(BOOTSTRAP_SH)}(?: {_SHELL_WORD})+", call), call
    words = shlex.split(call)
    # bootstrap.sh: known options take the next word; the first other word is the cluster name
    options: dict[str, str] = {}
    positional = []
    rest = words[1:]
    while rest:
        if rest[0].startswith("--"):
            assert rest[0] not in options
            options[rest[0]] = rest[1]
            rest = rest[2:]
        else:
            positional.append(rest.pop(0))
    assert positional == [b.cluster_name]
    assert options == {"--apiserver-endpoint": b.endpoint, "--b64-cluster-ca": b.ca_bundle,
                       "--dns-cluster-ip": b.cluster_dns, "--use-max-pods": "false",
                       **({"--ip-family": "ipv6"} if b.ipv6 else {}),
                       "--kubelet-extra-args": options["--kubelet-extra-args"]}
    extra = options["--kubelet-extra-args"]
    # written into Environment='KUBELET_EXTRA_ARGS=...' and split on whitespace by systemd
    assert "'" not in extra and "\n" not in extra and "\\" not in extra
    flags = kubelet_flags(extra.split())
    assert set(flags) == {"--node-labels", "--register-with-taints", "--max-pods", "--kube-reserved",
                          "--system-reserved", "--eviction-hard"}
    return from_flags(flags)


STRICT = {"al2023": strict_al2023, "bottlerocket": strict_bottlerocket, "al2": strict_al2}


def simulated(text: str) -> dict[str, Any]:
    cfg = sim.parse(text)
    return {"labels": cfg.labels, "taints": [(t.key, t.value, t.effect) for t in cfg.taints],
            "max_pods": cfg.max_pods, "kube_reserved": cfg.kube_reserved, "system_reserved": cfg.system_reserved,
            "eviction_hard": cfg.eviction_hard}


def assert_faithful(family: str, b: NodeBootstrap, text: str) -> None:
    want = expected(b)
    assert STRICT[family](b, text) == want
    assert simulated(text) == want
    assert sim.parse(text).family == family


# -- every field x every injection string x every family --------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("field", list(FIELDS))
def test_hostile_values_are_refused_naming_the_field_or_read_back_exactly(family: str, field: str) -> None:
    make, where = FIELDS[field]
    for hostile in INJECTIONS:
        b = make(hostile)
        try:
            text = render(family, b)
        except UserDataError as exc:
            assert exc.field is not None and exc.field.startswith(where), (hostile, str(exc))
            assert where.split("[")[0] in str(exc)
            continue
        # some strings are fine in some fields (`a` * 64 is a good cluster name); never one with syntax in it
        assert not SYNTAX.search(hostile), f"{hostile!r} accepted in {field}"
        assert_faithful(family, b, text)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_reported_label_injection_never_reaches_user_data(family: str) -> None:
    hostile = "a,b=c --max-pods=999"
    with pytest.raises(UserDataError, match=r"labels\['team'\]: invalid label value") as caught:
        render(family, replace(BASE, labels={**BASE.labels, "team": hostile}))
    assert caught.value.field == "labels['team']"


@pytest.mark.parametrize("family", FAMILIES)
def test_base_reads_back_exactly(family: str) -> None:
    assert_faithful(family, BASE, render(family, BASE))


#: Valid label values that a YAML reader other than PyYAML would not read as strings: Go's YAML (nodeadm
#: decodes with sigs.k8s.io/yaml) takes `1e3`, `0x1p3`, `0o17` and `1_000` for numbers, `y`/`N` for
#: booleans and `2024-1-2` for a timestamp.
NUMBER_LIKE = ["1e3", "1E5", "0x1F", "0x1p3", "0o17", "0b101", "1_000", "y", "N", "nan", "Inf", "2024-1-2", "12"]


@pytest.mark.parametrize("value", NUMBER_LIKE)
def test_number_like_strings_stay_quoted_strings_in_the_node_config(value: str) -> None:
    b = replace(BASE, cluster_name=value if value[0].isalnum() else "demo",
                taints=(Taint("dedicated", "NoSchedule", value),))
    text = render("al2023", b)
    node = yaml.compose(body(archive(text, 0)[-1]))
    assert node is not None
    scalars = {n.value: n.style for n in _scalars(node)}
    assert scalars[value] in ("'", '"'), f"{value!r} written plain"
    for family in FAMILIES:
        assert_faithful(family, b, render(family, b))


def _scalars(node: yaml.Node) -> list[yaml.ScalarNode]:
    if isinstance(node, yaml.ScalarNode):
        return [node]
    if isinstance(node, yaml.SequenceNode):
        return [s for child in node.value for s in _scalars(child)]
    return [s for k, v in node.value for s in (*_scalars(k), *_scalars(v))]


@pytest.mark.parametrize("family", FAMILIES)
def test_unusual_but_valid_values_read_back_exactly(family: str) -> None:
    b = replace(
        BASE,
        cluster_name="My_Cluster-01",
        endpoint="https://[fd00::1]:8443/k8s/api_v1~x",
        cluster_cidr="fd00:10:96::/112",
        cluster_dns="fd00:10:96::a",
        labels={"example.com/a_b.c-d": "X_y.z-0", "empty": "", "k": "v"},
        taints=(Taint("example.com/t", "PreferNoSchedule", ""), Taint("t2", "NoExecute", "A.b_c-9")),
        eviction_hard={"nodefs.inodesFree": "5.5%", "memory.available": "1.5Gi", "pid.available": "100"},
        # Bottlerocket's settings model reserves cpu, memory and ephemeral-storage only (no pid)
        kube_reserved={"cpu": 1000, "memory": 1, **({} if family == "bottlerocket" else {"pid": 100})},
    )
    assert_faithful(family, b, render(family, b))


# -- the node class's own user data ----------------------------------------------------------------
def _script(s: str) -> str:
    return f"#!/bin/bash\necho {shlex.quote(s)}\n{s}\n"


def assert_simulated(family: str, b: NodeBootstrap, text: str) -> None:
    """What the simulated node reads: the format by content type and by an actual bootstrap.sh invocation, so
    a user script that merely mentions `NodeConfig` or bootstrap.sh changes nothing."""
    assert sim.parse(text).family == family
    assert simulated(text) == expected(b)


@pytest.mark.parametrize("family", ["al2023", "al2"])
@pytest.mark.parametrize("hostile", INJECTIONS)
def test_user_script_stays_one_part_and_carpools_part_intact(family: str, hostile: str) -> None:
    user = _script(hostile)
    b = replace(BASE, user_data=user)
    text = render(family, b)
    assert text == render(family, b)  # deterministic, whatever the boundary
    parts = archive(text, 1)
    assert body(parts[0]) == user
    assert_strict(family, b, text, parts)
    assert_simulated(family, b, text)


def assert_strict(family: str, b: NodeBootstrap, text: str, parts: list[email.message.Message]) -> None:
    """carpool's part, the last, says exactly what `b` says, whatever came before it."""
    if family == "al2023":
        assert strict_al2023(b, text, user_parts=len(parts) - 1) == expected(b)
    else:
        assert parts[-1].get_content_type() == "text/x-shellscript"
        assert strict_al2(b, body(parts[-1])) == expected(b)


@pytest.mark.parametrize("family", ["al2023", "al2"])
@pytest.mark.parametrize("line", ["--//", "--//--", "--// ", "--//\t", "x--//y", "a\r--//", "\u2028--//", "--//--\r"])
def test_a_boundary_line_in_user_content_moves_the_boundary(family: str, line: str) -> None:
    user = f"#!/bin/bash\n{line}\necho after\n"
    b = replace(BASE, user_data=user)
    text = render(family, b)
    message = email.message_from_string(text)
    assert message.get_param("boundary") != "//"
    parts = archive(text, 1)
    assert body(parts[0]) == user
    assert_strict(family, b, text, parts)
    assert_simulated(family, b, text)


def test_the_boundary_is_kept_when_no_content_holds_it() -> None:
    """The golden files' `//`: URLs and paths with `//` are not delimiters, `--//` is."""
    text = render("al2023", replace(BASE, user_data="#!/bin/bash\ncurl https://example.com//x\n"))
    assert email.message_from_string(text).get_param("boundary") == "//"


@pytest.mark.parametrize("family", ["al2023", "al2"])
def test_user_mime_with_forged_parts_and_headers(family: str) -> None:
    user = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
        "--B\nContent-Type: text/x-shellscript\nX-Note: folded\n  onto two lines\n\n"
        "#!/bin/bash\necho '--//'\n--//\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n"
        "--B--\n"
    )
    b = replace(BASE, user_data=user)
    text = render(family, b)
    parts = archive(text, 1)
    assert parts[0]["X-Note"] == "folded onto two lines"
    assert body(parts[0]).endswith("--//\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig")
    assert_strict(family, b, text, parts)
    assert_simulated(family, b, text)


@pytest.mark.parametrize("family", ["al2023", "al2"])
def test_nested_multipart_is_refused(family: str) -> None:
    user = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
        '--B\nContent-Type: multipart/mixed; boundary="C"\n\n--C\nContent-Type: text/x-shellscript\n\necho\n'
        "--C--\n--B--\n"
    )
    with pytest.raises(UserDataError) as caught:
        render(family, replace(BASE, user_data=user))
    assert caught.value.field == "spec.userData part 1" and "nested multipart" in str(caught.value)


@pytest.mark.parametrize("family", ["al2023", "al2"])
def test_a_body_the_archive_cannot_carry_is_refused(family: str) -> None:
    """A trailing lone CR would be eaten with the delimiter's line break: refused, not silently changed."""
    with pytest.raises(UserDataError) as caught:
        render(family, replace(BASE, user_data="#!/bin/bash\necho hi\r"))
    assert caught.value.field == "user data part 1"


def _toml_string(s: str) -> str:
    return json.dumps(s)  # a JSON string is a TOML basic string for these characters (no DEL)


@pytest.mark.parametrize("hostile", INJECTIONS)
def test_bottlerocket_user_toml_is_reparsed_not_spliced(hostile: str) -> None:
    user = (
        f"[settings]\nmotd = {_toml_string(hostile)}\n"
        f"[settings.kubernetes]\nmax-pods = 500\n{_toml_string('x' + hostile)} = {_toml_string(hostile)}\n"
        f"[settings.kubernetes.node-labels]\n\"example.com/owner\" = \"platform\"\n"
        f"[settings.{_toml_string(hostile)}]\n{_toml_string(hostile)} = [{_toml_string(hostile)}]\n"
    )
    b = replace(BASE, user_data=user)
    doc = tomllib.loads(render("bottlerocket", b))
    settings = doc["settings"]
    assert set(doc) == {"settings"} and settings["motd"] == hostile
    assert settings[hostile] == {hostile: [hostile]}
    k8s = settings["kubernetes"]
    assert k8s["x" + hostile] == hostile and k8s["max-pods"] == 29
    assert k8s["node-labels"] == {**BASE.labels, "example.com/owner": "platform"}
    assert k8s["cluster-name"] == "demo" and k8s["api-server"] == BASE.endpoint


def test_bottlerocket_user_taints_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(UserDataError) as caught:
        render("bottlerocket", replace(BASE, user_data="[settings.kubernetes.node-taints]\ndedicated = 5\n"))
    assert caught.value.field == "spec.userData" and "node-taints.dedicated" in str(caught.value)


# -- end to end: a pod asking for the injection, through `carpool plan` and the launch path ----------
HOSTILE = "a,b=c --max-pods=999"
MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: open}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: nc}
      requirements:
        - {key: team, operator: Exists}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: nc}
spec:
  role: node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
PODS = """
apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: shop}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: team, operator: In, values: ["a,b=c --max-pods=999"]}]
  containers: [{name: c, image: c, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: good, namespace: shop}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: team, operator: In, values: [a]}]
  containers: [{name: c, image: c, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
"""


def test_carpool_plan_reports_the_pod_unschedulable_with_the_reason(tmp_path) -> None:
    (tmp_path / "pools.yaml").write_text(MANIFESTS)
    (tmp_path / "pods.yaml").write_text(PODS)
    result = CliRunner().invoke(app, ["plan", "-m", str(tmp_path / "pools.yaml"), "-p", str(tmp_path / "pods.yaml"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    reason = plan["pods"]["shop/bad"]["reasons"]["open"]
    assert "node affinity requirement 'team'" in reason and "invalid label value" in reason
    assert "nodeClaim" not in plan["pods"]["shop/bad"] and "nodeClaim" in plan["pods"]["shop/good"]
    assert HOSTILE not in json.dumps(plan["nodeClaims"])


def test_launch_path_never_bootstraps_a_node_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    manifests = load(MANIFESTS + "---\n" + PODS)
    prepared = pools.prepare(manifests, Catalog.snapshot(), placeholder_amis, {}, {}, set(), {})
    result = schedule([convert.pod_spec(p) for p in manifests.pods], prepared.specs)
    assert "invalid label value" in result.unschedulable["shop/bad"]["open"]
    seen: list[NodeBootstrap] = []
    real = launching.bootstrap

    def recording(*args: Any, **kwargs: Any) -> NodeBootstrap:
        boot = real(*args, **kwargs)
        seen.append(boot)
        return boot

    monkeypatch.setattr(launching, "bootstrap", recording)
    ctx = prepared.contexts["open"]
    deps = SimpleNamespace(settings=Settings("demo", cluster_endpoint="https://demo.eks", cluster_ca="Q0E=", cluster_version="1.32", cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4"))
    for claim in result.claims:  # what the provisioner launches: every claim the scheduler planned
        boot = launching.bootstrap(claim, ctx, claim.instance_types[0].name, "on-demand", deps)  # type: ignore[arg-type]
        for family in FAMILIES:
            text = render(family, boot)
            assert HOSTILE not in text and "--max-pods=999" not in text
            assert sim.parse(text).labels["team"] == "a"
    assert [b.labels["team"] for b in seen] == ["a"]
    assert all(HOSTILE not in b.labels.values() for b in seen)

    # and had a claim carried it after all, the renderers would refuse it, naming the label
    [claim] = result.claims
    forged = replace(claim, requirements=Requirements(
        [*(r for k, r in claim.requirements.items() if k != "team"), Requirement.in_("team", HOSTILE)]))
    boot = real(forged, ctx, claim.instance_types[0].name, "on-demand", deps)  # type: ignore[arg-type]
    for family in FAMILIES:
        with pytest.raises(UserDataError) as caught:
            render(family, boot)
        assert caught.value.field == "labels['team']"


@pytest.mark.parametrize(("family", "user"), [
    ("al2023", "#!/bin/bash\necho \ud800\n"), ("al2", "#!/bin/bash\necho \ud800\n"),
    ("bottlerocket", '[settings]\nmotd = "\ud800"\n'),
])
def test_text_ec2_cannot_carry_is_refused(family: str, user: str) -> None:
    """A lone surrogate (JSON can spell one, `\\ud800`) has no UTF-8 bytes."""
    with pytest.raises(UserDataError) as caught:
        render(family, replace(BASE, user_data=user))
    assert caught.value.field in ("spec.userData", "user data part 1")
