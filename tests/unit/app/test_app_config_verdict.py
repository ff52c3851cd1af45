"""A function judges the cluster's objects with the verdict `carpool validate` gives a file
(`carpool.api.loader`): the same words for the same field, but each object on its own
(`carpool.api.cluster_config.judge`), so what refuses a whole file keeps only that object out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from carpool.api.cluster_config import judge
from carpool.api.config import load_config
from carpool.api.loader import ManifestErrors, NamedText
from carpool.app.sources import TextConfigSource

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = (ROOT / "examples" / "karpenter" / "default.yaml").read_text()
#: a NodePool that allows capacity type `reserved` alone: Karpenter's CRD takes it, carpool refuses it
RESERVED_ONLY = DEFAULT.replace('values: ["on-demand"]', 'values: ["reserved"]')


def _objects(text: str) -> tuple[list[dict], list[dict]]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    return [d for d in docs if d["kind"] == "NodePool"], [d for d in docs if d["kind"] == "EC2NodeClass"]


def test_the_cluster_keeps_out_the_object_a_file_is_refused_for_in_the_same_words() -> None:
    assert RESERVED_ONLY != DEFAULT
    with pytest.raises(ManifestErrors) as info:
        load_config([NamedText("pools.yaml", RESERVED_ONLY)])
    (error,) = info.value.errors
    config = judge(*_objects(RESERVED_ONLY))
    verdict = config.verdict("NodePool", "default")
    assert verdict is not None and verdict.problems == (f"{error.path}: {error.message}",)
    assert config.manifests.nodepools == [] and [c.name for c in config.manifests.nodeclasses] == ["default"]


def test_a_node_pool_naming_a_missing_node_class_refuses_a_file_but_only_itself_in_the_cluster() -> None:
    text = DEFAULT.replace("    name: default\n      expireAfter", "    name: missing\n      expireAfter")
    assert text != DEFAULT
    with pytest.raises(ManifestErrors) as info:
        load_config([NamedText("pools.yaml", text)])
    assert "EC2NodeClass 'missing' is not among the loaded manifests" in str(info.value)
    verdict = judge(*_objects(text)).verdict("NodePool", "default")
    assert verdict is not None and verdict.nodeclass_missing and verdict.own_problems == ()


def test_a_valid_config_loads_the_same_both_ways() -> None:
    from_file = TextConfigSource(lambda: DEFAULT).load()
    from_cluster = judge(*_objects(DEFAULT)).manifests
    assert [p.name for p in from_file.nodepools] == [p.name for p in from_cluster.nodepools] == ["default"]
    assert from_file.nodepools[0] == from_cluster.nodepools[0]
    assert from_file.nodeclasses[0] == from_cluster.nodeclasses[0]
