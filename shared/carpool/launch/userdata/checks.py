"""What each `NodeBootstrap` field may hold before a renderer writes it into user data.

Every value ends up in front of a reader with its own separators, and no single quoting survives them all:

- kubelet map flags (`--node-labels`, `--kube-reserved`) split on `,` then on the first `=` and trim
  spaces; `--eviction-hard` splits on `,` and `<`; `--register-with-taints` splits on `,`, `:` and `=`
  (k8s.io/component-base/cli/flag MapStringString, pkg/util/taints);
- nodeadm joins `kubelet.flags` with spaces into `NODEADM_KUBELET_ARGS`, which systemd splits on
  whitespace for `ExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS`;
- AL2's bootstrap.sh takes the first word that is not a known option as the cluster name, pastes the
  cluster name and endpoint into `sed -i s,NAME,$VALUE,g`, runs `echo $B64_CLUSTER_CA | base64 -d`, and
  writes `--kubelet-extra-args` into a single-quoted systemd `Environment='KUBELET_EXTRA_ARGS=...'` line;
- Bottlerocket's API rejects settings its model types refuse (label keys/values, taint values, quantities).

So each field is held to the rule of the system that reads it (Kubernetes' label and taint syntax, EKS's
cluster-name pattern, base64, IP addresses, quantities and eviction signals) and a value outside it is
refused with a `UserDataError` naming the field. A label value with a `,` cannot be written into
`--node-labels` at all, so refusing is the only correct answer; the renderers still quote for their own
format (a YAML emitter, TOML escapes, shell single quotes), so a rule missed here cannot reach a document's
structure either. The node class's `spec.userData` is the user's own document and is not checked here: the
merge keeps it in its own MIME part or re-serialises its parsed TOML.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from carpool import label_syntax
from carpool.labels import kubelet_may_set
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.launch.userdata.mime import UserDataError
from carpool.taints import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint

#: EKS CreateCluster's name pattern (1-100 characters).
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
#: An http(s) URL with a DNS name or bracketed IPv6 host, an optional port and a plain path: nothing that
#: `sed s,X,Y,g` (`,`, `&`, `\`), a shell word or a kubeconfig could read as syntax.
_ENDPOINT = re.compile(
    r"^https?://(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\])"
    r"(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~/-]*)?$"
)
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")
_IP = re.compile(r"^[0-9A-Fa-f:.]{2,45}$")
_CIDR = re.compile(r"^[0-9A-Fa-f:.]{2,45}/[0-9]{1,3}$")
#: Karpenter's EC2NodeClass pattern for eviction thresholds: a percentage or a quantity.
_THRESHOLD = re.compile(
    r"^(?:(?:[0-9]{1,2}(?:\.[0-9]{1,2})?|100(?:\.0{1,2})?)%"
    r"|[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?)$"
)
EFFECTS = frozenset({NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE})
#: What kubelet's kubeReserved/systemReserved accept.
RESERVED = frozenset({"cpu", "memory", "ephemeral-storage", "pid"})
#: Karpenter's evictionHard keys (the kubelet signals a node class may set).
EVICTION_SIGNALS = frozenset(
    {"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree",
     "pid.available"}
)
_INT32_MAX = 2**31 - 1
#: an evictionSoftGracePeriod as the node class takes it: whole hours, minutes and seconds (`carpool.api.durations`).
_GRACE = re.compile(r"^(?:[0-9]+[hms])+$")


def one_cluster_dns(b: NodeBootstrap, family: str) -> None:
    """Refuse a second `clusterDNS` entry where the family's bootstrap takes a single address."""
    if b.more_cluster_dns:
        raise UserDataError(f"{family} takes one cluster DNS address; got {1 + len(b.more_cluster_dns)}",
                            field="spec.kubelet.clusterDNS")


def check(b: NodeBootstrap) -> None:
    """Raise `UserDataError` for the first field a renderer could not write faithfully."""
    _cluster(b)
    _kubelet(b)
    for key, value in _items(b.labels, "labels"):
        _label(key, value)
    for where, taints in (("taints", b.taints), ("startup_taints", b.startup_taints)):
        for i, taint in enumerate(taints):
            _taint(f"{where}[{i}]", taint)
    if b.user_data is not None and not isinstance(b.user_data, str):
        raise UserDataError("must be text", field="spec.userData")


def _cluster(b: NodeBootstrap) -> None:
    if not (isinstance(b.cluster_name, str) and _CLUSTER_NAME.match(b.cluster_name)):
        raise UserDataError(
            f"{b.cluster_name!r} is not an EKS cluster name (1-100 letters, digits, '-' or '_', starting with a "
            "letter or digit)", field="cluster_name")
    if not (isinstance(b.endpoint, str) and _ENDPOINT.match(b.endpoint)):
        raise UserDataError(f"{b.endpoint!r} is not an http(s) URL of a host, port and plain path", field="endpoint")
    if not (isinstance(b.ca_bundle, str) and _BASE64.match(b.ca_bundle)):
        raise UserDataError("must be base64 (the certificateAuthority.data EKS DescribeCluster returns)",
                            field="ca_bundle")
    if b.cluster_cidr is not None and not _is_network(b.cluster_cidr):
        raise UserDataError(f"{b.cluster_cidr!r} is not an IPv4 or IPv6 CIDR", field="cluster_cidr")
    if b.cluster_dns is not None and not _is_address(b.cluster_dns):
        raise UserDataError(f"{b.cluster_dns!r} is not an IPv4 or IPv6 address", field="cluster_dns")
    for i, address in enumerate(b.more_cluster_dns):
        if not _is_address(address):
            raise UserDataError(f"{address!r} is not an IPv4 or IPv6 address", field=f"spec.kubelet.clusterDNS[{i + 1}]")


def _is_address(value: Any) -> bool:
    """An IP without a zone (`fe80::1%eth0` would carry any text after `%`)."""
    if not (isinstance(value, str) and _IP.match(value)):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _is_network(value: Any) -> bool:
    if not (isinstance(value, str) and _CIDR.match(value)):
        return False
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True


def _kubelet(b: NodeBootstrap) -> None:
    if b.max_pods is not None and not (_is_int(b.max_pods) and 0 <= b.max_pods <= _INT32_MAX):
        raise UserDataError(f"{b.max_pods!r} is not a pod count", field="max_pods")
    for where, reserved in (("kube_reserved", b.kube_reserved), ("system_reserved", b.system_reserved)):
        for name, amount in _items(reserved, where):
            if name not in RESERVED:
                raise UserDataError(f"kubelet reserves only {sorted(RESERVED)}", field=f"{where}[{name!r}]")
            if not (_is_int(amount) and amount >= 0):
                raise UserDataError(f"{amount!r} is not a non-negative integer amount", field=f"{where}[{name!r}]")
    for where, thresholds in (("eviction_hard", b.eviction_hard), ("eviction_soft", b.eviction_soft)):
        for signal, threshold in _items(thresholds, where):
            if signal not in EVICTION_SIGNALS:
                raise UserDataError(f"not one of the eviction signals {sorted(EVICTION_SIGNALS)}",
                                    field=f"{where}[{signal!r}]")
            if not (isinstance(threshold, str) and _THRESHOLD.match(threshold)):
                raise UserDataError(f"{threshold!r} is neither a percentage nor a quantity",
                                    field=f"{where}[{signal!r}]")
    for signal, period in _items(b.eviction_soft_grace_period, "eviction_soft_grace_period"):
        if signal not in EVICTION_SIGNALS:
            raise UserDataError(f"not one of the eviction signals {sorted(EVICTION_SIGNALS)}",
                                field=f"eviction_soft_grace_period[{signal!r}]")
        if not (isinstance(period, str) and _GRACE.match(period)):
            raise UserDataError(f"{period!r} is not a duration such as '1m30s'",
                                field=f"eviction_soft_grace_period[{signal!r}]")
    _more_kubelet(b)


def _more_kubelet(b: NodeBootstrap) -> None:
    """The integer and boolean kubelet fields: each reader takes them as plain numbers and `true`/`false`."""
    for name, value, low, high in (("pods_per_core", b.pods_per_core, 0, _INT32_MAX),
                                   ("eviction_max_pod_grace_period", b.eviction_max_pod_grace_period,
                                    -_INT32_MAX - 1, _INT32_MAX),
                                   ("image_gc_high_threshold_percent", b.image_gc_high_threshold_percent, 0, 100),
                                   ("image_gc_low_threshold_percent", b.image_gc_low_threshold_percent, 0, 100)):
        if value is not None and not (_is_int(value) and low <= value <= high):
            raise UserDataError(f"{value!r} is not an integer in [{low}, {high}]", field=name)
    for name, flag in (("cpu_cfs_quota", b.cpu_cfs_quota), ("raid0", b.raid0)):
        if flag is not None and not isinstance(flag, bool):
            raise UserDataError(f"{flag!r} is not true or false", field=name)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _items(mapping: Any, where: str) -> list[tuple[Any, Any]]:
    if not isinstance(mapping, Mapping):
        raise UserDataError("must be a mapping", field=where)
    return list(mapping.items())


def _label(key: Any, value: Any) -> None:
    field = f"labels[{key!r}]"
    if not isinstance(key, str) or not isinstance(value, str):
        raise UserDataError("label keys and values must be text", field=field)
    problem = label_syntax.key_problem(key) or label_syntax.value_problem(value)
    if problem:
        raise UserDataError(problem, field=field)
    if not kubelet_may_set(key):  # the kubelet would refuse to start: the registrar sets it instead
        raise UserDataError("the kubelet may not set this label itself (it would refuse to start); it is set "
                            "through the API server at registration", field=field)


def _taint(field: str, taint: Any) -> None:
    if not isinstance(taint, Taint):
        raise UserDataError("must be a Taint", field=field)
    key, value, effect = taint.key, taint.value, taint.effect
    if not all(isinstance(s, str) for s in (key, value, effect)):
        raise UserDataError("taint key, value and effect must be text", field=field)
    if effect not in EFFECTS:
        raise UserDataError(f"effect {effect!r} is not one of {sorted(EFFECTS)}", field=f"{field}.effect")
    problem = label_syntax.key_problem(key)
    if problem:  # a taint key is a qualified name, as a label key
        raise UserDataError(problem.replace("label key", "taint key"), field=f"{field}.key")
    problem = label_syntax.value_problem(value)
    if problem:
        raise UserDataError(problem.replace("label value", "taint value"), field=f"{field}.value")
