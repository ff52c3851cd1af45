"""docs/karpenter-fields.md stays true: one row per field of the NodePool and EC2NodeClass models, each
honoured, refused or (API-server bookkeeping only) ignored, each citing tests that exist.

A field added to a model without a row fails here, as does a row for a field the models no longer have.
"""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from carpool.api.loader import load
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.app import discovery
from carpool.launch.templates import block_device_mappings

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "karpenter-fields.md"
MODELS: dict[str, type[BaseModel]] = {"NodePool": NodePool, "EC2NodeClass": EC2NodeClass}
STATUSES = ("honoured", "refused", "ignored", "gap")
#: fields carpool accepts and drops today, against issue 29 (each row says `gap`); fix, then remove from here
KNOWN_GAPS: frozenset[str] = frozenset()
#: metadata the user writes and carpool reads; every other `metadata.*` field is the API server's bookkeeping
USER_METADATA = ("metadata.name", "metadata.labels", "metadata.annotations")
_TEST_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$")


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through Optional, list, dict, Annotated...)."""
    if typing.get_origin(annotation) is None:
        return [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _walk(model: type[BaseModel], prefix: str, seen: set[tuple[type[BaseModel], str]], out: list[str]) -> None:
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}" if prefix else (info.alias or name)
        out.append(path)
        for sub in _models_in(info.annotation):
            if (sub, path) not in seen:
                seen.add((sub, path))
                _walk(sub, path, seen, out)


def model_paths(model: type[BaseModel]) -> list[str]:
    """Every dotted alias path of `model` (list items without markers), as the doc's rows name them."""
    out: list[str] = []
    _walk(model, "", set(), out)
    return out


def doc_rows() -> dict[str, dict[str, list[str]]]:
    """Section (NodePool / EC2NodeClass) -> field path -> the row's cells after the field."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            current = sections.setdefault(title, {}) if title in MODELS else None
            continue
        match = _ROW.match(line)
        if current is None or not match:
            continue
        path, rest = match.groups()
        assert path not in current, f"{path}: two rows"
        current[path] = [cell.strip() for cell in rest.rstrip().rstrip("|").split("|")]
    return sections


@pytest.mark.parametrize("kind", list(MODELS))
def test_every_model_field_has_a_row_and_every_row_a_field(kind: str) -> None:
    rows = doc_rows().get(kind)
    assert rows is not None, f"docs/karpenter-fields.md has no '## {kind}' table"
    paths = model_paths(MODELS[kind])
    missing = [p for p in paths if p not in rows]
    extra = [p for p in rows if p not in paths]
    assert not missing, f"{kind} fields without a row in docs/karpenter-fields.md: {missing}"
    assert not extra, f"{kind} rows in docs/karpenter-fields.md for no field of the model: {extra}"


@pytest.mark.parametrize("kind", list(MODELS))
def test_every_row_says_honoured_refused_or_ignored_and_ignores_only_bookkeeping(kind: str) -> None:
    for path, cells in doc_rows()[kind].items():
        assert len(cells) == 3, f"{kind} {path}: expected | field | carpool | where | test |"
        status = cells[0].split()[0].strip(";,.:*") if cells[0] else ""
        assert status in STATUSES, f"{kind} {path}: carpool column must start honoured/refused/ignored"
        if status == "gap":
            assert path in KNOWN_GAPS, f"{kind} {path}: a new gap; honour or refuse the field instead"
        if status == "ignored":
            bookkeeping = path == "status" or (
                path.startswith("metadata.") and not any(path == m or path.startswith(m + ".") for m in USER_METADATA)
            )
            assert bookkeeping, f"{kind} {path}: only API-server metadata and status may be ignored"
        assert cells[1], f"{kind} {path}: say where it goes, or why refused"


def test_the_known_gaps_are_exactly_the_rows_that_say_gap() -> None:
    gaps = {p for rows in doc_rows().values() for p, cells in rows.items() if cells[0].startswith("gap")}
    assert gaps == KNOWN_GAPS, "KNOWN_GAPS and the doc's `gap` rows must agree (a fixed gap leaves both)"


def test_every_cited_test_exists() -> None:
    cited = 0
    for kind, rows in doc_rows().items():
        for path, cells in rows.items():
            ids = _TEST_ID.findall(cells[-1])
            assert ids, f"{kind} {path}: cite at least one test as `tests/<path>.py::<name>`"
            for file, name in ids:
                source = ROOT / file
                assert source.is_file(), f"{kind} {path}: {file} does not exist"
                assert re.search(rf"^\s*(async\s+)?def {name}\(", source.read_text(), re.M), (
                    f"{kind} {path}: {file} defines no {name}"
                )
                cited += 1
    assert cited


def test_a_field_the_models_lack_or_gain_is_noticed() -> None:
    """The walk sees nested models: a new field anywhere in the tree would need its own row."""
    paths = model_paths(EC2NodeClass)
    assert "spec.blockDeviceMappings.ebs.kmsKeyID" in paths
    assert "spec.template.spec.requirements.minValues" in model_paths(NodePool)
    assert len(paths) == len(set(paths))


# -- fields no other test shows ---------------------------------------------------------------------------
def _nodeclass(**spec: object) -> EC2NodeClass:
    body = {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-0a"}], "securityGroupSelectorTerms": [{"id": "sg-0a"}], **spec}
    (nc,) = load([{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "nc"},
                   "spec": body}]).nodeclasses
    return nc


class _Compute:
    def __init__(self) -> None:
        self.asked: list[tuple[str, list[dict[str, object]]]] = []

    def describe_subnets(self, filters: list[dict[str, object]]) -> list[dict[str, str]]:
        self.asked.append(("subnets", filters))
        return [{"SubnetId": f"subnet-{len(self.asked)}"}]

    def describe_security_groups(self, filters: list[dict[str, object]]) -> list[dict[str, str]]:
        self.asked.append(("sgs", filters))
        return [{"GroupId": f"sg-{len(self.asked)}"}]


def test_subnet_and_security_group_terms_select_by_id_name_or_tags_each_term_ored() -> None:
    nc = _nodeclass(
        subnetSelectorTerms=[{"id": "subnet-0a"}, {"tags": {"tier": "private", "zone-ok": "*"}}],
        securityGroupSelectorTerms=[{"id": "sg-0a"}, {"name": "nodes"}, {"tags": {"team": "a"}}],
    )
    compute = _Compute()
    deps = SimpleNamespace(compute=compute, cache={}, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    assert [s["SubnetId"] for s in discovery.subnets(nc, deps)] == ["subnet-1", "subnet-2"]  # type: ignore[arg-type]
    assert discovery.security_groups(nc, deps) == ["sg-3", "sg-4", "sg-5"]  # type: ignore[arg-type]
    assert compute.asked == [
        ("subnets", [{"Name": "subnet-id", "Values": ["subnet-0a"]}]),
        ("subnets", [{"Name": "tag:tier", "Values": ["private"]}, {"Name": "tag-key", "Values": ["zone-ok"]}]),
        ("sgs", [{"Name": "group-id", "Values": ["sg-0a"]}]),
        ("sgs", [{"Name": "group-name", "Values": ["nodes"]}]),
        ("sgs", [{"Name": "tag:team", "Values": ["a"]}]),
    ]


def test_every_ebs_field_of_a_mapping_reaches_the_launch_template() -> None:
    nc = _nodeclass(blockDeviceMappings=[
        {"deviceName": "/dev/xvda", "rootVolume": True,
         "ebs": {"volumeSize": "100Gi", "volumeType": "io2", "iops": 4000, "encrypted": True,
                 "kmsKeyID": "arn:aws:kms:us-east-1:111122223333:key/k", "deleteOnTermination": False}},
        {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-0abc", "volumeType": "gp3", "throughput": 250,
                                            "volumeInitializationRate": 300}},
    ])
    assert block_device_mappings(nc.spec.block_device_mappings, "al2023") == (
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 100, "VolumeType": "io2", "Iops": 4000, "Encrypted": True,
                                            "KmsKeyId": "arn:aws:kms:us-east-1:111122223333:key/k",
                                            "DeleteOnTermination": False}},
        {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeType": "gp3", "Throughput": 250, "SnapshotId": "snap-0abc",
                                            "VolumeInitializationRate": 300}},
    )


def test_object_labels_and_a_taints_time_load_and_nodes_get_the_template_only() -> None:
    """`metadata.labels` label the NodePool / EC2NodeClass objects, as in Karpenter, not their nodes; a
    template taint's `timeAdded` loads, and nodes get the taint by key, value and effect."""
    (pool,) = load([{
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "web", "labels": {"team": "shop"}},
        "spec": {"template": {
            "metadata": {"labels": {"tier": "web"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "nc"},
                     "requirements": [],
                     "taints": [{"key": "dedicated", "value": "web", "effect": "NoExecute",
                                 "timeAdded": "2026-01-01T00:00:00Z"}]}}},
    }]).nodepools
    nc = _nodeclass()
    assert pool.metadata.labels == {"team": "shop"} and nc.metadata.labels == {}
    assert pool.requirements().labels() == {"karpenter.sh/nodepool": "web", "tier": "web"}
    assert [(t.key, t.value, t.effect) for t in pool.taints()] == [("dedicated", "web", "NoExecute")]
    assert pool.spec.template.spec.taints[0].time_added == datetime(2026, 1, 1, tzinfo=UTC)
