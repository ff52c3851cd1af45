"""`carpool.api.cluster_config.judge`: each NodePool and EC2NodeClass of the cluster judged on its own."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from carpool.api.cluster_config import ClusterConfig, judge, user_object

DATA = Path(__file__).resolve().parents[2] / "data" / "cluster-objects"
#: as the real kube-apiserver answered them (defaults, server metadata, kubectl's annotation)
POOL: dict[str, Any] = json.loads((DATA / "nodepool-default.json").read_text())
CLASS: dict[str, Any] = json.loads((DATA / "ec2nodeclass-default.json").read_text())
CLASS_NAME = CLASS["metadata"]["name"]


def pool(name: str, *, nodeclass: str = CLASS_NAME, **spec_changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(POOL)
    obj["metadata"]["name"] = name
    obj["spec"]["template"]["spec"]["nodeClassRef"]["name"] = nodeclass
    obj["spec"].update(spec_changes)
    return obj


def nodeclass(name: str = CLASS_NAME, **spec_changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(CLASS)
    obj["metadata"]["name"] = name
    obj["spec"].update(spec_changes)
    return obj


def test_objects_as_the_api_server_holds_them_are_served() -> None:
    listed = pool("web")
    listed["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    config = judge([listed], [nodeclass()])
    assert [p.name for p in config.manifests.nodepools] == ["web"]
    assert [c.name for c in config.manifests.nodeclasses] == [CLASS_NAME]
    verdict = config.verdict("NodePool", "web")
    assert verdict is not None and verdict.valid and verdict.problems == ()
    assert (verdict.uid, verdict.generation, verdict.resource_version) == (
        POOL["metadata"]["uid"], 1, POOL["metadata"]["resourceVersion"])
    assert verdict.status == listed["status"]
    assert verdict.nodeclass == CLASS_NAME and not verdict.nodeclass_missing


def test_a_bad_nodepool_stops_only_itself() -> None:
    bad = pool("bad")
    bad["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Sometimes"
    config = judge([pool("good"), bad], [nodeclass()])
    assert [p.name for p in config.manifests.nodepools] == ["good"]
    verdict = config.verdict("NodePool", "bad")
    assert verdict is not None and not verdict.valid
    assert any("spec.template.spec.requirements[0].operator" in p for p in verdict.problems), verdict.problems
    assert verdict.own_problems == verdict.problems and not verdict.reference_problem


def test_a_carpool_refusal_names_the_field() -> None:
    typo = pool("typo")
    typo["spec"]["template"]["spec"]["expireAftr"] = "1h"
    config = judge([typo], [nodeclass()])
    verdict = config.verdict("NodePool", "typo")
    assert verdict is not None and verdict.problems
    assert "expireAftr" in verdict.problems[0]
    assert config.manifests.nodepools == []


def test_a_nodepool_whose_class_is_missing_is_kept_out_with_its_reason() -> None:
    config = judge([pool("orphan", nodeclass="nope"), pool("web")], [nodeclass()])
    assert [p.name for p in config.manifests.nodepools] == ["web"]
    verdict = config.verdict("NodePool", "orphan")
    assert verdict is not None and verdict.nodeclass_missing and verdict.nodeclass == "nope"
    assert verdict.own_problems == ()  # the pool itself is valid: ValidationSucceeded, not NodeClassReady
    assert verdict.problems == (verdict.reference_problem,)
    assert "'nope' not found" in verdict.reference_problem and CLASS_NAME in verdict.reference_problem


def test_a_nodepool_whose_class_is_invalid_is_kept_out_but_its_class_is_not_missing() -> None:
    broken = nodeclass("broken")
    broken["spec"]["role"] = ""
    broken["spec"]["amiSelectorTerms"] = []
    config = judge([pool("web", nodeclass="broken")], [broken])
    klass = config.verdict("EC2NodeClass", "broken")
    assert klass is not None and klass.problems
    verdict = config.verdict("NodePool", "web")
    assert verdict is not None and not verdict.valid and not verdict.nodeclass_missing
    assert "'broken' is not valid" in verdict.reference_problem
    assert config.manifests.nodepools == [] and config.manifests.nodeclasses == []


def test_a_class_being_deleted_serves_no_nodepool() -> None:
    going = nodeclass()
    going["metadata"]["deletionTimestamp"] = "2026-12-02T06:30:00Z"
    config = judge([pool("web")], [going])
    verdict = config.verdict("NodePool", "web")
    assert verdict is not None and "NodeClassTerminating" in verdict.reference_problem
    assert not verdict.nodeclass_missing and config.manifests.nodepools == []


def test_a_nodepool_of_another_class_kind_is_kept_out() -> None:
    other = pool("other")
    other["spec"]["template"]["spec"]["nodeClassRef"].update(group="example.com", kind="FooClass")
    config = judge([other], [nodeclass()])
    verdict = config.verdict("NodePool", "other")
    assert verdict is not None and "example.com/FooClass" in verdict.reference_problem


def test_an_invalid_pool_with_a_missing_class_says_both() -> None:
    bad = pool("bad", nodeclass="nope")
    bad["spec"]["weight"] = 1000
    verdict = judge([bad], [nodeclass()]).verdict("NodePool", "bad")
    assert verdict is not None and verdict.nodeclass_missing
    assert len(verdict.problems) == 2 and "weight" in verdict.own_problems[0]


def test_no_nodepool_is_a_config_that_serves_nothing_not_an_error() -> None:
    config = judge([], [nodeclass()])
    assert isinstance(config, ClusterConfig) and config.manifests.nodepools == []
    assert config.refused() == [] and "0 NodePools" in config.summary()


def test_user_object_drops_what_the_server_and_kubectl_added() -> None:
    listed = pool("web")
    listed["status"] = {"resources": {"cpu": "4"}}
    listed["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    listed["metadata"]["labels"] = {"team": "a"}
    mine = user_object(listed)
    assert "status" not in mine
    assert mine["metadata"] == {"name": "web", "labels": {"team": "a"}}
    assert mine["spec"] == listed["spec"] and "managedFields" in listed["metadata"]  # the input is left alone


def test_summary_names_each_object_kept_out() -> None:
    summary = judge([pool("orphan", nodeclass="nope"), pool("web")], [nodeclass()]).summary()
    assert summary.startswith("1 NodePool, 1 EC2NodeClass served, 1 kept out")
    assert "NodePool orphan: EC2NodeClass 'nope' not found" in summary
