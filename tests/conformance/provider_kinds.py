"""Expectation kinds for the AWS provider's cases (aws/karpenter-provider-aws `pkg/providers/instancetype`,
`pkg/providers/amifamily`): what an instance type offers under a node class, and which AMIs a node class
resolves. Both go through the library the provisioner and `carpool plan` use:

- `instanceTypeSize` assembles a one-pool cluster with `carpool.app.pools.prepare` (the same per-pool
  assembly as `carpool plan`: the per-family instance-type view, strict AMI mapping, sizing) over the
  shipped catalog, and compares the sized type (max pods, capacity, reservations, allocatable) or states
  that the node class does not offer it;
- `amiResolution` resolves a node class's `amiSelectorTerms` with `carpool.amis.resolve` against an
  in-memory SSM/EC2 (the images and parameters the Go test's fake APIs hold);
- `amiQuery` is the DescribeImages query (filters, owners) one selector term becomes.

Quantities compare as Kubernetes quantities (`893Mi` equals `936378368`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from carpool import quantity
from carpool.amis import AmiSelectionError, InMemoryAmiSource, resolve, term_filters
from carpool.amis.offline import placeholder_amis
from carpool.api.loader import Manifests
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.app import pools
from carpool.catalog import Catalog
from carpool.sizing import NodeSize

Check = Mapping[str, Any]
NOW = datetime(2025, 6, 1, tzinfo=UTC)
_NODECLASS_DEFAULTS = {
    "role": "KarpenterNodeRole",
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
}


@lru_cache(maxsize=1)
def catalog() -> Catalog:
    return Catalog.snapshot()


def _nodeclass(spec: Mapping[str, Any]) -> EC2NodeClass:
    return EC2NodeClass.model_validate({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "annotations": dict(spec.get("annotations") or {})},
        "spec": {**_NODECLASS_DEFAULTS, **{k: v for k, v in spec.items() if k != "annotations"}},
    })


def _pool(instance_type: str) -> NodePool:
    return NodePool.model_validate({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}],
        }}},
    })


def offered(check: Check) -> tuple[NodeSize, dict[str, str]] | None:
    """The type as the node class's pool would offer it (its size and node labels), or None when that pool
    does not offer it."""
    name = check["instanceType"]
    manifests = Manifests(nodepools=[_pool(name)], nodeclasses=[_nodeclass(check.get("nodeClass") or {})])
    prepared = pools.prepare(manifests, catalog(), placeholder_amis, dict(check.get("cniEnv") or {}), {}, set(), {})
    context = prepared.contexts.get("default")
    if context is None or name not in context.sizes:
        return None
    return context.sizes[name], dict(context.types[name].labels)


def _same(resource: str, want: Any, got: int | None) -> bool:
    """A resource absent from a list is zero (`ResourceList.Cpu()` of an empty list is "0")."""
    return quantity.resource_value(resource, str(want)) == (got or 0)


def _compare(where: str, want: Mapping[str, Any], got: Mapping[str, int]) -> list[str]:
    return [
        f"{where}[{name}]: expected {value}, got {got.get(name)}"
        for name, value in want.items()
        if not _same(name, value, got.get(name))
    ]


def instance_type_size(check: Check, _state: Any = None) -> list[str]:
    """`instanceTypeSize: {instanceType, nodeClass, cniEnv, offered, maxPods, capacity, kubeReserved,
    systemReserved, evictionThreshold, allocatable, capacityAbsent, evictionThresholdFractionOfCapacity,
    labels, labelsAbsent}`."""
    found = offered(check)
    want_offered = check.get("offered", True)
    if found is None:
        return [] if not want_offered else [f"{check['instanceType']} is not offered by the node class"]
    size, labels = found
    if not want_offered:
        return [f"{check['instanceType']} is offered (max pods {size.max_pods}) but should not be"]
    failures = [f"label {k}: expected {v!r}, got {labels.get(k)!r}" for k, v in (check.get("labels") or {}).items()
                if labels.get(k) != str(v)]
    failures += [f"label {k} present ({labels[k]!r})" for k in check.get("labelsAbsent") or [] if k in labels]
    if "maxPods" in check and size.max_pods != int(check["maxPods"]):
        failures.append(f"maxPods: expected {check['maxPods']}, got {size.max_pods}")
    for key, got in (("capacity", size.capacity), ("kubeReserved", size.kube_reserved),
                     ("systemReserved", size.system_reserved), ("evictionThreshold", size.eviction),
                     ("allocatable", size.allocatable)):
        failures += _compare(key, check.get(key) or {}, got)
    failures += [f"capacity has {name}" for name in check.get("capacityAbsent") or [] if size.capacity.get(name)]
    for resource, share in (check.get("evictionThresholdFractionOfCapacity") or {}).items():
        want = size.capacity.get(resource, 0) * float(share)
        if abs(size.eviction.get(resource, 0) - want) > 10:
            failures.append(f"evictionThreshold[{resource}]: expected ~{want:.0f}, got {size.eviction.get(resource)}")
    return failures


def _image(entry: Mapping[str, Any]) -> dict[str, Any]:
    image = {"ImageId": entry["id"], "Name": entry.get("name", entry["id"]),
             "Architecture": entry.get("arch", "x86_64"), "State": entry.get("state", "available"),
             "CreationDate": entry.get("created", "2024-01-01T00:00:00Z"),
             "ImageOwnerAlias": entry.get("owner", "amazon")}  # the fake EC2's images are Amazon's
    if entry.get("deprecated"):
        image["DeprecationTime"] = entry["deprecated"]
    if entry.get("tags"):
        image["Tags"] = [{"Key": k, "Value": v} for k, v in entry["tags"].items()]
    return image


def ami_resolution(check: Check, _state: Any = None) -> list[str]:
    """`amiResolution: {nodeClass, clusterVersion, images, parameters, count, ids, error}`: SSM parameter
    paths may use `{k}` for the cluster version."""
    k = str(check.get("clusterVersion", "1.32"))
    params = {path.replace("{k}", k): image_id for path, image_id in (check.get("parameters") or {}).items()}
    source = InMemoryAmiSource(images=[_image(e) for e in check.get("images") or []], parameters=params)
    nodeclass = _nodeclass(check.get("nodeClass") or {})
    try:
        amis = resolve(nodeclass, k, source, now=NOW)
    except AmiSelectionError as exc:
        if "error" in check and check["error"] in str(exc):
            return []
        return [f"resolution failed: {exc}"]
    if "error" in check:
        return [f"expected an error containing {check['error']!r}, resolved {[a.id for a in amis]}"]
    failures = []
    if "count" in check and len(amis) != int(check["count"]):
        failures.append(f"expected {check['count']} AMIs, got {len(amis)}: {[a.describe() for a in amis]}")
    if "ids" in check and [a.id for a in amis] != list(check["ids"]):
        failures.append(f"expected AMIs {check['ids']} in order, got {[a.id for a in amis]}")
    if "first" in check and (not amis or amis[0].id != check["first"]):
        failures.append(f"expected {check['first']} first, got {[a.id for a in amis]}")
    return failures


def ami_query(check: Check, _state: Any = None) -> list[str]:
    """`amiQuery: {term, filters, owners}`: the DescribeImages filters and owners one selector term becomes."""
    filters, owners = term_filters(dict(check["term"]))
    failures = []
    want_filters = [{"Name": f["name"], "Values": list(f["values"])} for f in check.get("filters") or []]
    if filters != want_filters:
        failures.append(f"filters: expected {want_filters}, got {filters}")
    if sorted(owners) != sorted(check.get("owners") or []):
        failures.append(f"owners: expected {sorted(check.get('owners') or [])}, got {sorted(owners)}")
    return failures


KINDS: dict[str, Callable[[Check, Any], list[str]]] = {
    "instanceTypeSize": instance_type_size,
    "amiResolution": ami_resolution,
    "amiQuery": ami_query,
}


def register(expectation: Callable[[str], Callable[[Callable[..., list[str]]], Any]]) -> None:
    """Register these kinds with the runner's `@expectation(name)`: the runner hands a kind the whole check
    (`{name: body}`) and the case's outcome; these read only the body."""
    for name, fn in KINDS.items():
        expectation(name)(lambda check, outcome, fn=fn, name=name: fn(check[name], outcome))
