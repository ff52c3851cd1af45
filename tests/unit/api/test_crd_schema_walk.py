"""carpool refuses what Karpenter v1.14.1's CRDs refuse: generated from the CRD files themselves.

The walk visits every node of the NodePool and EC2NodeClass `openAPIV3Schema` and, for each constraint it
states (type, enum, pattern, min/max length, minimum/maximum, int32/int64 and date-time formats, item and
property counts, required fields, CEL rules), writes a manifest that breaks only that constraint into a
valid base manifest, loads it, and expects the refusal at that field, worded as the API server words it.
Under a field carpool does not support, the expected refusal is "not supported by carpool" at that field.
A new CRD field or rule is covered without editing this file, except a CEL rule, whose breaking input is
written here by hand: a rule without one fails `test_every_cel_rule_has_a_breaking_input`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from carpool.api import cel_rules, crd_schema
from carpool.api.loader import ManifestErrors, load
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "tests" / "data" / f"karpenter-crds-{crd_schema.KARPENTER_VERSION}"
FILES = {"NodePool": "karpenter.sh_nodepools.yaml", "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml"}
MODELS: dict[str, type[Any]] = {"NodePool": NodePool, "EC2NodeClass": EC2NodeClass}
Token = str | int
#: a map's key in a path: the generator picks one the base manifest has (or "key")
MAP = object()

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: rich}
spec:
  template:
    metadata: {labels: {team: web}, annotations: {note: kept}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: rich}
      taints: [{key: dedicated, value: web, effect: NoSchedule, timeAdded: "2026-01-01T00:00:00Z"}]
      startupTaints: [{key: example.com/startup, value: wait, effect: NoExecute, timeAdded: "2026-01-01T00:00:00Z"}]
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c7i, m7i], minValues: 2}
      expireAfter: 720h
      terminationGracePeriod: 48h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets: [{nodes: "10%", schedule: "@daily", duration: 10m, reasons: [Empty]}]
  limits: {cpu: "100", memory: 400Gi}
  weight: 10
"""
NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: rich}
spec:
  kubelet:
    clusterDNS: [10.100.0.10]
    maxPods: 110
    podsPerCore: 10
    systemReserved: {cpu: 100m}
    kubeReserved: {cpu: 200m}
    evictionHard: {memory.available: 5%}
    evictionSoft: {memory.available: 10%}
    evictionSoftGracePeriod: {memory.available: 1m}
    evictionMaxPodGracePeriod: 60
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}, {id: subnet-0a1b}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}, {id: sg-0a1b}, {name: nodes}]
  amiFamily: AL2023
  amiSelectorTerms: [{id: ami-0a1b}, {name: my-ami, owner: self}, {tags: {team: web}}, {ssmParameter: /my/ami}]
  associatePublicIPAddress: false
  userData: "echo hello"
  role: KarpenterNodeRole-demo
  tags: {team: web}
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs: {volumeSize: 100Gi, volumeType: gp3, iops: 3000, throughput: 125, encrypted: true,
            kmsKeyID: "arn:aws:kms:us-east-1:111122223333:key/k", deleteOnTermination: true,
            snapshotID: snap-0a1b, volumeInitializationRate: 100}
  instanceStorePolicy: RAID0
  detailedMonitoring: true
  metadataOptions: {httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 2, httpTokens: required}
  context: c-0a1b
"""
#: the fields the rich class cannot hold beside the others: an alias term and an instance profile
ALIAS_CLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: alias}
spec:
  subnetSelectorTerms: [{id: subnet-0a1b}]
  securityGroupSelectorTerms: [{id: sg-0a1b}]
  amiSelectorTerms: [{alias: al2023@latest}]
  instanceProfile: KarpenterNodeInstanceProfile
"""
BASES: dict[str, list[dict[str, Any]]] = {
    "NodePool": [yaml.safe_load(POOL)],
    "EC2NodeClass": [yaml.safe_load(NODECLASS), yaml.safe_load(ALIAS_CLASS)],
}
#: CRD fields carpool's models have but refuse whole (`carpool.api.nodeclass` says why), so no valid base
#: manifest holds them
REFUSED_WHOLE = {"EC2NodeClass": ("spec.capacityReservationSelectorTerms",)}


# -- the schema, walked ------------------------------------------------------------------------------------
def crd_schema_of(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / FILES[kind]).read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def nodes(schema: dict[str, Any], tokens: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path tokens, schema node) of every node under the root's spec (apiVersion, kind, metadata and status
    are the loader's and the API server's)."""
    yield tokens, schema
    for key, sub in (schema.get("properties") or {}).items():
        if tokens or key == "spec":
            yield from nodes(sub, (*tokens, key))
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], (*tokens, 0))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], (*tokens, MAP))


def render(tokens: tuple[Token, ...]) -> str:
    out = ""
    for t in tokens:
        if isinstance(t, int):
            out += f"[{t}]"
        elif t.startswith("["):
            out += t
        else:
            out += f".{t}" if out else t
    return out


def dotted(tokens: tuple[Any, ...]) -> str:
    """The docs' and models' spelling: fields only, no list or map markers."""
    return ".".join(t for t in tokens if isinstance(t, str))


def supported_paths(kind: str) -> set[str]:
    from tests.unit.api.test_karpenter_fields_doc import model_paths

    return set(model_paths(MODELS[kind]))


def unsupported_ancestor(kind: str, tokens: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The first field on the way to `tokens` that Karpenter's CRD has and carpool's model lacks."""
    supported = supported_paths(kind)
    for end in range(1, len(tokens) + 1):
        head = tokens[:end]
        if isinstance(head[-1], str) and dotted(head) not in supported:
            return head
    return None


# -- manifests, written ------------------------------------------------------------------------------------
def base_for(kind: str, tokens: tuple[Any, ...]) -> dict[str, Any]:
    """A copy of the first base manifest that holds the field's parent (else the first)."""
    for doc in BASES[kind]:
        if _get(doc, tokens[:-1]) is not None:
            return copy.deepcopy(doc)
    return copy.deepcopy(BASES[kind][0])


def _get(doc: Any, tokens: tuple[Any, ...]) -> Any:
    node = doc
    for t in tokens:
        if t is MAP:
            if not isinstance(node, dict) or not node:
                return None
            t = next(iter(node))
        if isinstance(t, int):
            if not isinstance(node, list) or len(node) <= t:
                return None
        elif not isinstance(node, dict) or t not in node:
            return None
        node = node[t]
    return node


def concrete(doc: dict[str, Any], tokens: tuple[Any, ...]) -> tuple[Token, ...]:
    """`tokens` with each map marker replaced by a key the document has there (else "key") in path form."""
    out: list[Token] = []
    node: Any = doc
    for t in tokens:
        if t is MAP:
            t = next(iter(node)) if isinstance(node, dict) and node else "key"
            out.append(f"[{t}]")
        else:
            out.append(t)
        node = node.get(t) if isinstance(node, dict) else node[t] if isinstance(node, list) and len(node) > t else None
    return tuple(out)


def put(doc: dict[str, Any], tokens: tuple[Token, ...], value: Any) -> None:
    """Set the value at `tokens`, creating the objects and lists on the way."""
    node: Any = doc
    for here, nxt in zip(tokens, tokens[1:], strict=False):
        key = here[1:-1] if isinstance(here, str) and here.startswith("[") else here
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(key, int):
            while len(node) <= key:
                node.append(empty)
        elif not isinstance(node.get(key), dict | list):
            node[key] = empty
        node = node[key]
    last = tokens[-1]
    key = last[1:-1] if isinstance(last, str) and last.startswith("[") else last
    if isinstance(key, int):
        while len(node) <= key:
            node.append(None)
    node[key] = value


def remove(doc: dict[str, Any], tokens: tuple[Token, ...]) -> None:
    """Drop the field; where the base has no parent object, write the parent empty."""
    parent = _get(doc, tokens[:-1])
    if isinstance(parent, dict):
        parent.pop(tokens[-1], None)
    else:
        put(doc, tokens[:-1], {})


# -- the cases ---------------------------------------------------------------------------------------------
_STRING_CANDIDATES = ("", " ", "!", "Bad Value!", "-1", "0", "a/b/c", "@", "x" * 70, "abc")
_WRONG_TYPE: dict[str, Any] = {"string": 12345, "integer": "12", "number": "x", "boolean": "yes", "object": "x",
                               "array": "x"}


def breaking(schema: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(constraint, a value breaking it alone, what the refusal says) for each constraint of one node."""
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        yield "type", [1], "must be an integer or a string"
    elif kind in _WRONG_TYPE:
        yield "type", _WRONG_TYPE[kind], f"must be of type {kind}"
    if kind == "string":
        if "enum" in schema:
            yield "enum", "NotAKarpenterValue", "Unsupported value"
        if "pattern" in schema:
            bad = next(c for c in _STRING_CANDIDATES if not re.search(schema["pattern"], c, re.ASCII))
            yield "pattern", bad, "should match"
        if schema.get("minLength"):
            yield "minLength", "", "should be at least"
        if "maxLength" in schema:
            yield "maxLength", "a" * (schema["maxLength"] + 1), "Too long"
        if schema.get("format") == "date-time":
            yield "format", "yesterday", "must be a date-time"
    if kind == "integer":
        if "minimum" in schema:
            yield "minimum", schema["minimum"] - 1, "greater than or equal to"
        if "maximum" in schema:
            yield "maximum", schema["maximum"] + 1, "less than or equal to"
        if schema.get("format") in ("int32", "int64"):
            bits = int(schema["format"][3:])
            yield "format", 2 ** (bits - 1), f"must be a {bits}-bit integer"
    if kind == "object" and "maxProperties" in schema:
        yield "maxProperties", {f"k{i}": "v" for i in range(schema["maxProperties"] + 1)}, "Too many"


def cases(kind: str) -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """(case id, manifest, expected path, expected words)."""
    for tokens, schema in nodes(crd_schema_of(kind)):
        if not tokens:
            continue
        for constraint, value, words in breaking(schema):
            yield case(kind, tokens, constraint, lambda doc, at, v=value: put(doc, at, v), words)
        if schema.get("type") == "array" and "maxItems" in schema:
            def too_many(doc: dict[str, Any], at: tuple[Token, ...], n: int = schema["maxItems"] + 1) -> None:
                item = _get(doc, (*at, 0))
                put(doc, at, [copy.deepcopy(item if item is not None else {}) for _ in range(n)])
            yield case(kind, tokens, "maxItems", too_many, "Too many")
        if schema.get("type") == "array" and schema.get("minItems"):
            yield case(kind, tokens, "minItems", lambda doc, at: put(doc, at, []), "should have at least")
        for required in schema.get("required", ()):
            if "default" not in schema["properties"][required]:
                yield case(kind, (*tokens, required), "required", lambda doc, at: remove(doc, at), "Required value")


def case(kind: str, tokens: tuple[Any, ...], constraint: str, write: Callable[[dict[str, Any], tuple[Token, ...]], None],
         words: str) -> tuple[str, dict[str, Any], str, str]:
    doc = base_for(kind, tokens)
    at = concrete(doc, tokens)
    write(doc, at)
    expected_at, expected = at, words
    unsupported = unsupported_ancestor(kind, tokens)
    if unsupported is not None:
        expected_at, expected = concrete(doc, unsupported), "not supported by carpool"
    return f"{kind}:{render(at)}:{constraint}", doc, render(expected_at), expected


def errors_of(doc: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        load([doc])
    except ManifestErrors as exc:
        return [(e.path, e.message) for e in exc.errors]
    return []


ALL_CASES = [c for kind in MODELS for c in cases(kind)]


@pytest.mark.parametrize(("doc", "path", "words"), [c[1:] for c in ALL_CASES], ids=[c[0] for c in ALL_CASES])
def test_a_manifest_breaking_one_crd_constraint_is_refused_at_that_field(doc: dict[str, Any], path: str,
                                                                        words: str) -> None:
    errors = errors_of(doc)
    assert any(p == path and words in m for p, m in errors), errors


def test_the_walk_reaches_every_kind_of_constraint() -> None:
    """The generator is not vacuous: every constraint the CRDs state appears among the cases."""
    constraints = {c[0].rsplit(":", 1)[1] for c in ALL_CASES}
    assert constraints >= {"type", "enum", "pattern", "minLength", "maxLength", "minimum", "maximum", "format",
                           "maxItems", "minItems", "maxProperties", "required"}
    assert len(ALL_CASES) > 250


# -- the CEL rules -----------------------------------------------------------------------------------------
def _spec_with(**fields: Any) -> Callable[[Any], Any]:
    return lambda spec: {**spec, **fields}


def _alias_with_family(alias: str, family: str) -> Callable[[Any], Any]:
    return lambda spec: {**{k: v for k, v in spec.items() if k != "role"}, "role": "r",
                         "amiSelectorTerms": [{"alias": f"{alias}@latest"}], "amiFamily": family}


#: (rule's path, its message) -> the value at that path breaking the rule alone, from the base's value
RULE_BREAKERS: dict[tuple[str, str], Callable[[Any], Any]] = {
    # NodePool
    ("spec", "only 'limits.nodes' is supported on static NodePools"): _spec_with(replicas=1, limits={"cpu": "1"}),
    ("spec", "'weight' is not supported on static NodePools"): _spec_with(replicas=1, weight=1),
    ("spec.disruption.budgets", "'schedule' must be set with 'duration'"): lambda _: [{"nodes": "1", "schedule": "@daily"}],
    ("spec.template.metadata.labels", 'label domain "karpenter.sh" is restricted'): lambda _: {"karpenter.sh/custom": "x"},
    ("spec.template.metadata.labels", 'label "karpenter.sh/nodepool" is restricted'): lambda _: {"karpenter.sh/nodepool": "x"},
    ("spec.template.metadata.labels", 'label "kubernetes.io/hostname" is restricted'): lambda _: {"kubernetes.io/hostname": "x"},
    ("spec.template.metadata.labels", 'label domain "karpenter.k8s.aws" is restricted'): lambda _: {"karpenter.k8s.aws/custom": "x"},
    ("spec.template.spec.nodeClassRef.group", "group may not be empty"): lambda _: "",
    ("spec.template.spec.nodeClassRef.kind", "kind may not be empty"): lambda _: "",
    ("spec.template.spec.nodeClassRef.name", "name may not be empty"): lambda _: "",
    ("spec.template.spec.requirements", "requirements with operator 'In' must have a value defined"):
        lambda _: [{"key": "a", "operator": "In"}],
    ("spec.template.spec.requirements", "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"):
        lambda _: [{"key": "a", "operator": "Gt", "values": ["x"]}],
    ("spec.template.spec.requirements", "requirements with 'minValues' must have at least that many values specified in the 'values' field"):
        lambda _: [{"key": "a", "operator": "In", "values": ["x"], "minValues": 2}],
    ("spec.template.spec.requirements[0].key", 'label domain "karpenter.sh" is restricted'): lambda _: "karpenter.sh/custom",
    ("spec.template.spec.requirements[0].key", 'label "karpenter.sh/nodepool" is restricted'): lambda _: "karpenter.sh/nodepool",
    ("spec.template.spec.requirements[0].key", 'label "kubernetes.io/hostname" is restricted'): lambda _: "kubernetes.io/hostname",
    ("spec.template.spec.requirements[0].key", 'label domain "karpenter.k8s.aws" is restricted'): lambda _: "karpenter.k8s.aws/custom",
    # EC2NodeClass
    ("spec", "must specify exactly one of ['role', 'instanceProfile']"): _spec_with(instanceProfile="p"),
    ("spec", "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"): _alias_with_family("al2", "AL2023"),
    ("spec", "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"): _alias_with_family("al2023", "AL2"),
    ("spec", "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"):
        _alias_with_family("bottlerocket", "AL2023"),
    ("spec", "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias"):
        _alias_with_family("windows2019", "Windows2022"),
    ("spec", "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias"):
        _alias_with_family("windows2022", "Windows2019"),
    ("spec", "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias"):
        _alias_with_family("windows2025", "Windows2022"),
    ("spec", "must specify amiFamily if amiSelectorTerms does not contain an alias"):
        lambda spec: {k: v for k, v in spec.items() if k != "amiFamily"},
    ("spec.amiSelectorTerms", "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"):
        lambda _: [{"owner": "self"}],
    ("spec.amiSelectorTerms", "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"):
        lambda _: [{"id": "ami-0a1b", "name": "x"}],
    ("spec.amiSelectorTerms", "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"):
        lambda _: [{"alias": "al2023@latest", "name": "x"}],
    ("spec.amiSelectorTerms", "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"):
        lambda _: [{"alias": "al2023@latest"}, {"id": "ami-0a1b"}],
    ("spec.amiSelectorTerms[0].alias", "'alias' is improperly formatted, must match the format 'family@version'"):
        lambda _: "al2023",
    ("spec.amiSelectorTerms[0].alias", "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"):
        lambda _: "ubuntu@latest",
    ("spec.amiSelectorTerms[0].alias", "windows families may only specify version 'latest'"): lambda _: "windows2022@v1",
    ("spec.amiSelectorTerms[0].tags", "empty tag keys or values aren't supported"): lambda _: {"a": ""},
    ("spec.subnetSelectorTerms[0].tags", "empty tag keys or values aren't supported"): lambda _: {"a": ""},
    ("spec.securityGroupSelectorTerms[0].tags", "empty tag keys or values aren't supported"): lambda _: {"a": ""},
    ("spec.capacityReservationSelectorTerms[0].tags", "empty tag keys or values aren't supported"): lambda _: {"a": ""},
    ("spec.blockDeviceMappings", "must have only one blockDeviceMappings with rootVolume"):
        lambda _: [{"rootVolume": True, "ebs": {"volumeSize": "20Gi"}}, {"rootVolume": True, "ebs": {"volumeSize": "20Gi"}}],
    ("spec.blockDeviceMappings[0].ebs", "snapshotID or volumeSize must be defined"): lambda _: {"volumeType": "gp3"},
    ("spec.blockDeviceMappings[0].ebs", "snapshotID must be set when volumeInitializationRate is set"):
        lambda _: {"volumeSize": "20Gi", "volumeInitializationRate": 100},
    ("spec.capacityReservationSelectorTerms", "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"):
        lambda _: [{"ownerID": "123456789012"}],
    ("spec.capacityReservationSelectorTerms", "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"):
        lambda _: [{"id": "cr-0a1b", "ownerID": "123456789012"}],
    ("spec.connectionTracking", "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"):
        lambda _: {},
    ("spec.kubelet", "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"):
        lambda k: {**k, "imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60},
    ("spec.kubelet", "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"):
        lambda k: {**k, "evictionSoft": {"memory.available": "1Gi", "nodefs.available": "10%"}},
    ("spec.kubelet", "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"):
        lambda k: {**k, "evictionSoftGracePeriod": {"memory.available": "1m", "nodefs.available": "1m"}},
    ("spec.kubelet.evictionHard", "valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"):
        lambda _: {"memory.free": "1Gi"},
    ("spec.kubelet.evictionSoft", "valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"):
        lambda _: {"memory.free": "1Gi"},
    ("spec.kubelet.evictionSoftGracePeriod", "valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"):
        lambda _: {"memory.free": "1m"},
    ("spec.kubelet.kubeReserved", "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']"):
        lambda _: {"gpu": "1"},
    ("spec.kubelet.kubeReserved", "kubeReserved value cannot be a negative resource quantity"): lambda _: {"cpu": "-1"},
    ("spec.kubelet.systemReserved", "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']"):
        lambda _: {"gpu": "1"},
    ("spec.kubelet.systemReserved", "systemReserved value cannot be a negative resource quantity"): lambda _: {"cpu": "-1"},
    ("spec.networkInterfaces", "networkInterfaces must include a primary interface with interfaceType='interface'"):
        lambda _: [{"deviceIndex": 1, "networkCardIndex": 0, "interfaceType": "interface"}],
    ("spec.networkInterfaces", "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"):
        lambda _: [{"deviceIndex": 0, "networkCardIndex": 0, "interfaceType": "interface"}] * 2,
    ("spec.placementGroupSelector", "expected at least one, got none, ['name', 'id']"): lambda _: {},
    ("spec.placementGroupSelector", "'name' and 'id' are mutually exclusive"): lambda _: {"name": "pg", "id": "pg-0a1b"},
    ("spec.role", "role cannot be empty"): lambda _: "",
    ("spec.instanceProfile", "instanceProfile cannot be empty"): lambda _: "",
    ("spec.securityGroupSelectorTerms", "securityGroupSelectorTerms cannot be empty"): lambda _: [],
    ("spec.securityGroupSelectorTerms", "expected at least one, got none, ['tags', 'id', 'name']"): lambda _: [{}],
    ("spec.securityGroupSelectorTerms", "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"):
        lambda _: [{"id": "sg-0a1b", "tags": {"a": "b"}}],
    ("spec.securityGroupSelectorTerms", "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"):
        lambda _: [{"name": "nodes", "tags": {"a": "b"}}],
    ("spec.subnetSelectorTerms", "subnetSelectorTerms cannot be empty"): lambda _: [],
    ("spec.subnetSelectorTerms", "expected at least one, got none, ['tags', 'id']"): lambda _: [{}],
    ("spec.subnetSelectorTerms", "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"):
        lambda _: [{"id": "subnet-0a1b", "tags": {"a": "b"}}],
    ("spec.tags", "empty tag keys aren't supported"): lambda _: {"": "x"},
    ("spec.tags", "tag contains a restricted tag matching eks:eks-cluster-name"): lambda _: {"eks:eks-cluster-name": "x"},
    ("spec.tags", "tag contains a restricted tag matching kubernetes.io/cluster/"): lambda _: {"kubernetes.io/cluster/a": "owned"},
    ("spec.tags", "tag contains a restricted tag matching karpenter.sh/nodepool"): lambda _: {"karpenter.sh/nodepool": "x"},
    ("spec.tags", "tag contains a restricted tag matching karpenter.sh/nodeclaim"): lambda _: {"karpenter.sh/nodeclaim": "x"},
    ("spec.tags", "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"):
        lambda _: {"karpenter.k8s.aws/ec2nodeclass": "x"},
}
#: rules whose breaking input needs a field carpool does not support: refused as such, at that field
RULE_REFUSED_AS_UNSUPPORTED = {"only 'limits.nodes' is supported on static NodePools": "spec.replicas",
                               "'weight' is not supported on static NodePools": "spec.replicas"}


def rules(kind: str) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    for tokens, schema in nodes(crd_schema_of(kind)):
        for rule in schema.get("x-kubernetes-validations", ()):
            if cel_rules.applies(rule["rule"]):
                yield tokens, rule


def rule_cases() -> Iterator[tuple[str, dict[str, Any], str, str]]:
    for kind in MODELS:
        for tokens, rule in rules(kind):
            doc = base_for(kind, (*tokens, "x"))
            at = concrete(doc, tokens)
            breaker = RULE_BREAKERS.get((render(at), rule["message"]))
            if breaker is None:
                continue  # test_every_cel_rule_has_a_breaking_input names it
            put(doc, at, breaker(copy.deepcopy(_get(doc, tokens))))
            expected_at, expected = render(at), rule["message"]
            unsupported = unsupported_ancestor(kind, tokens)
            if unsupported is not None:
                expected_at, expected = render(concrete(doc, unsupported)), "not supported by carpool"
            elif rule["message"] in RULE_REFUSED_AS_UNSUPPORTED:
                expected_at, expected = RULE_REFUSED_AS_UNSUPPORTED[rule["message"]], "not supported by carpool"
            yield f"{kind}:{render(at)}:{rule['message'][:50]}", doc, expected_at, expected


RULE_CASES = list(rule_cases())


def test_every_cel_rule_has_a_breaking_input_and_a_predicate() -> None:
    missing, unimplemented = [], []
    for kind in MODELS:
        for tokens, rule in rules(kind):
            at = render(concrete(base_for(kind, (*tokens, "x")), tokens))
            if (at, rule["message"]) not in RULE_BREAKERS:
                missing.append((kind, at, rule["message"]))
            if cel_rules.predicate(rule["rule"]) is None:
                unimplemented.append((kind, at, rule["rule"]))
    assert not missing, f"CEL rules with no breaking input in RULE_BREAKERS: {missing}"
    assert not unimplemented, f"CEL rules with no predicate in carpool.api.cel_rules: {unimplemented}"
    assert len(RULE_CASES) == len(RULE_BREAKERS)


@pytest.mark.parametrize(("doc", "path", "words"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_a_manifest_breaking_one_cel_rule_is_refused_with_its_message(doc: dict[str, Any], path: str,
                                                                     words: str) -> None:
    errors = errors_of(doc)
    assert any(p == path and words in m for p, m in errors), errors


# -- valid manifests load ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(MODELS))
def test_the_base_manifests_load_and_hold_every_field_carpool_supports(kind: str) -> None:
    for doc in BASES[kind]:
        assert errors_of(doc) == []
    held = {dotted(t) for doc in BASES[kind] for t, _ in nodes(crd_schema_of(kind)) if t and _held(doc, t)}
    crd = {dotted(t) for t, _ in nodes(crd_schema_of(kind)) if t}
    wanted = {p for p in supported_paths(kind) & crd if not p.startswith(REFUSED_WHOLE.get(kind, ("-",)))}
    assert wanted - held == set(), "add these fields to the base manifests"


def _held(node: Any, tokens: tuple[Any, ...]) -> bool:
    """Whether any list item or map entry on the way holds the field."""
    if not tokens:
        return node is not None
    head, rest = tokens[0], tokens[1:]
    if isinstance(head, int) or head is MAP:
        items = node if isinstance(node, list) else list(node.values()) if isinstance(node, dict) else []
        return any(_held(item, rest) for item in items)
    return isinstance(node, dict) and _held(node.get(head), rest)


@pytest.mark.parametrize("example", ["default.yaml", "bottlerocket.yaml"])
def test_karpenters_own_examples_load(example: str) -> None:
    manifests = load([ROOT / "examples" / "karpenter" / example])
    assert manifests.nodepools and manifests.nodeclasses


# -- the shipped copy ----------------------------------------------------------------------------------------
def test_the_shipped_schemas_are_karpenters_crd_files_without_descriptions() -> None:
    crds = [yaml.safe_load(p.read_text()) for p in sorted(CRDS.glob("*.yaml"))]
    shipped = json.loads((ROOT / "shared/carpool/api/crds" / f"karpenter-{crd_schema.KARPENTER_VERSION}.json").read_text())
    assert shipped == json.loads(json.dumps(crd_schema.compact(crds))), "run tools/crd_schemas.py"
    assert crd_schema.schema_of("karpenter.sh/v1", "NodePool") is not None
    assert ("karpenter.sh/v1alpha1", "NodeOverlay") in crd_schema.karpenter_kinds()


# -- the three verdicts on a field -----------------------------------------------------------------------------
def test_a_karpenter_field_carpool_lacks_is_not_supported_and_a_field_in_neither_is_a_typo() -> None:
    nodeclass = yaml.safe_load(ALIAS_CLASS)
    nodeclass["spec"]["placementGroupSelector"] = {"name": "pg"}
    nodeclass["spec"]["placementGroupSelectr"] = {"name": "pg"}
    assert errors_of(nodeclass) == [
        ("spec.placementGroupSelector", "not supported by carpool (a Karpenter v1.14.1 EC2NodeClass field)"),
        ("spec.placementGroupSelectr", "unknown field 'placementGroupSelectr' (not a field of Karpenter v1.14.1's "
                                       "EC2NodeClass here); did you mean 'placementGroupSelector'?"),
    ]


def test_a_karpenter_value_carpool_lacks_is_not_supported() -> None:
    pool = yaml.safe_load(POOL)
    pool["spec"]["disruption"]["consolidationPolicy"] = "Balanced"
    [(path, message)] = errors_of(pool)
    assert path == "spec.disruption.consolidationPolicy"
    assert message.startswith('Unsupported value: "Balanced": not supported by carpool')


def test_a_karpenter_kind_carpool_lacks_is_not_supported() -> None:
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"}, "spec": {}}
    [(path, message)] = errors_of(overlay)
    assert path == "kind" and message.startswith("NodeOverlay (karpenter.sh/v1alpha1): not supported by carpool")


def test_the_docs_list_exactly_the_crd_fields_carpool_does_not_support() -> None:
    text = (ROOT / "docs" / "karpenter-fields.md").read_text()
    for kind in MODELS:
        unsupported = set()
        for tokens, _ in nodes(crd_schema_of(kind)):
            head = unsupported_ancestor(kind, tokens) if tokens else None
            if head is not None:
                unsupported.add(dotted(head))
        line = next(line for line in text.splitlines() if line.startswith(f"- {kind}: "))
        following = text[text.index(line):].split("\n- ", 1)[0] if kind == "NodePool" else text[text.index(line):]
        listed = set(re.findall(r"`([\w.]+)`", following.split("\n\n", 1)[0]))
        assert listed == unsupported, f"{kind}: docs/karpenter-fields.md lists {sorted(listed)}"
