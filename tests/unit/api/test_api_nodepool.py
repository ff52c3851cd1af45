"""NodePool (karpenter.sh/v1): loading real YAML, Karpenter's defaults and every validation rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from carpool import labels as wk
from carpool.api.durations import DurationError, format_duration, parse_duration
from carpool.api.loader import ManifestErrors, load
from carpool.api.nodepool import Budget, NodePool
from carpool.taints import Taint

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "karpenter"
REQ = "spec.template.spec.requirements[0]"
REQS = "spec.template.spec.requirements"


def pool_doc(**spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "np"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
                }
            }
        },
    }
    doc["spec"].update(spec)
    return doc


def with_requirement(req: dict[str, Any]) -> dict[str, Any]:
    doc = pool_doc()
    doc["spec"]["template"]["spec"]["requirements"] = [req]
    return doc


def errors_of(doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestErrors) as info:
        load([doc])
    return [(e.path, e.message) for e in info.value.errors]


def only_pool(doc: dict[str, Any]) -> NodePool:
    pools = load([doc]).nodepools
    assert len(pools) == 1
    return pools[0]


# --- loading real YAML ----------------------------------------------------------------------------------
def test_getting_started_example_loads_unchanged() -> None:
    m = load([EXAMPLES / "default.yaml"])
    pool = m.nodepool("default")
    assert pool is not None
    assert pool.node_class_name == "default"
    assert pool.weight == 0
    assert pool.limits() == {"cpu": 1_000_000}
    assert pool.expire_after_seconds() == 720 * 3600
    assert pool.consolidate_after_seconds() == 60
    reqs = pool.requirements()
    assert reqs[wk.INSTANCE_CATEGORY].has("m") and not reqs[wk.INSTANCE_CATEGORY].has("t")
    assert reqs[wk.INSTANCE_GENERATION].has("3") and not reqs[wk.INSTANCE_GENERATION].has("2")


def test_bottlerocket_example_keeps_every_field() -> None:
    pool = load([EXAMPLES / "bottlerocket.yaml"]).nodepool("batch-bottlerocket")
    assert pool is not None
    spec = pool.spec.template.spec
    assert pool.weight == 50
    assert pool.taints() == [Taint("example.com/batch", "NoSchedule", "true")]
    assert pool.startup_taints() == [Taint("ebs.csi.aws.com/agent-not-ready", "NoExecute")]
    assert spec.requirements[2].min_values == 3
    assert pool.termination_grace_period_seconds() == 24 * 3600
    assert pool.spec.disruption.consolidation_policy == "WhenEmpty"
    budgets = pool.spec.disruption.budgets
    assert [b.nodes for b in budgets] == ["20%", "0"]
    assert budgets[1].schedule == "0 9 * * mon-fri" and budgets[1].duration == "8h"
    assert budgets[1].reasons == ["Underutilized"]
    assert pool.spec.template.metadata.annotations == {"example.com/owner": "data-platform"}
    assert pool.limits() == {"cpu": 400_000, "memory": 1600 * 2**30}


def test_dump_by_alias_round_trips() -> None:
    pool = load([EXAMPLES / "bottlerocket.yaml"]).nodepools[0]
    dumped = pool.to_json_dict()
    assert "nodeClassRef" in dumped["spec"]["template"]["spec"]
    assert NodePool.model_validate(dumped) == pool


def test_status_and_server_metadata_are_accepted_and_ignored() -> None:
    doc = pool_doc()
    doc["metadata"].update(
        {
            "uid": "1234",
            "generation": 3,
            "resourceVersion": "99",
            "creationTimestamp": "2024-08-01T10:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            "annotations": {"karpenter.sh/nodepool-hash": "123", "karpenter.sh/nodepool-hash-version": "v3"},
        }
    )
    doc["status"] = {"conditions": [{"type": "Ready", "status": "True"}], "resources": {"cpu": "12"}}
    pool = only_pool(doc)
    assert pool.metadata.generation == 3
    assert "status" not in pool.to_json_dict()


def test_metadata_typo_is_an_error() -> None:
    doc = pool_doc()
    doc["metadata"]["lables"] = {"a": "b"}
    [(path, message)] = errors_of(doc)
    assert path == "metadata.lables"
    assert "unknown field" in message and "'labels'" in message


# --- defaults -------------------------------------------------------------------------------------------
def test_defaults_are_karpenters() -> None:
    pool = only_pool(pool_doc())
    assert pool.spec.weight is None and pool.weight == 0
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.spec.disruption.consolidate_after == "0s"
    assert pool.consolidate_after_seconds() == 0
    assert [b.nodes for b in pool.spec.disruption.budgets] == ["10%"]
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.expire_after_seconds() == 2_592_000
    assert pool.limits() is None
    assert pool.taints() == [] and pool.startup_taints() == []


def test_requirements_add_pool_name_and_template_labels() -> None:
    doc = pool_doc()
    doc["spec"]["template"]["metadata"] = {"labels": {"team": "web"}}
    reqs = only_pool(doc).requirements()
    assert reqs[wk.NODEPOOL].has("np") and not reqs[wk.NODEPOOL].has("other")
    assert reqs["team"].has("web") and not reqs["team"].has("db")
    assert reqs[wk.CAPACITY_TYPE].has("spot") and not reqs[wk.CAPACITY_TYPE].has("on-demand")
    assert reqs.labels() == {wk.NODEPOOL: "np", "team": "web", wk.CAPACITY_TYPE: "spot"}


def test_never_durations() -> None:
    doc = pool_doc(disruption={"consolidateAfter": "Never"})
    doc["spec"]["template"]["spec"]["expireAfter"] = "Never"
    pool = only_pool(doc)
    assert pool.expire_after_seconds() is None
    assert pool.consolidate_after_seconds() is None


def test_budget_scaling_rounds_up() -> None:
    assert Budget(nodes="10%").max_disruptions(15) == 2
    assert Budget(nodes="3").max_disruptions(100) == 3
    assert Budget(nodes="0%").max_disruptions(10) == 0


def test_budget_nodes_is_a_string_as_karpenters_crd_says() -> None:
    """`nodes: 5` is refused by the API server ("must be of type string"), so by carpool too."""
    errors = errors_of(pool_doc(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": 5}]}))
    assert errors == [("spec.disruption.budgets[0].nodes", 'Invalid value: 5: must be of type string (a node count '
                                                           'such as "5" or a percentage up to "100%")')]
    pool = only_pool(pool_doc(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "5"}]}))
    assert pool.spec.disruption.budgets[0].nodes == "5"


# --- glob extension -------------------------------------------------------------------------------------
def test_glob_values_are_a_carpool_extension() -> None:
    pool = only_pool(
        with_requirement({"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["c7i-flex", "c7*", "*"]})
    )
    req = pool.requirements()[wk.INSTANCE_FAMILY]
    assert req.has("c7g") and req.has("m5")
    assert (
        req.preference_rank("c7i-flex") == 0
        and req.preference_rank("c7g") == 1
        and req.preference_rank("m5") == 2
    )


# --- validation -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("requirement", "path", "fragment"),
    [
        ({"key": "a", "operator": "Like", "values": ["x"]}, f"{REQ}.operator", 'Unsupported value: "Like"'),
        ({"key": "a", "operator": "In"}, REQS, "requirements with operator 'In' must have a value defined"),
        ({"key": "a", "operator": "In", "values": []}, REQS, "requirements with operator 'In' must have a value defined"),
        ({"key": "a", "operator": "NotIn"}, f"{REQ}.values", "NotIn needs at least one value"),
        ({"key": "a", "operator": "Gt", "values": ["1", "2"]}, REQS, "must have a single positive integer value"),
        ({"key": "a", "operator": "Lt"}, REQS, "must have a single positive integer value"),
        ({"key": "a", "operator": "Gt", "values": ["two"]}, REQS, "must have a single positive integer value"),
        ({"key": "a", "operator": "Lte", "values": ["-1"]}, REQS, "must have a single positive integer value"),
        (
            {"key": "a", "operator": "In", "values": ["x"], "minValues": 0},
            f"{REQ}.minValues",
            "greater than or equal to 1",
        ),
        ({"key": "a", "operator": "Exists", "minValues": 51}, f"{REQ}.minValues", "less than or equal to 50"),
        (
            {"key": "a", "operator": "In", "values": ["x", "y"], "minValues": 3},
            REQS,
            "requirements with 'minValues' must have at least that many values",
        ),
        (
            {"key": wk.HOSTNAME, "operator": "In", "values": ["n1"]},
            f"{REQ}.key",
            '"kubernetes.io/hostname" is restricted',
        ),
        (
            {"key": wk.NODEPOOL, "operator": "In", "values": ["x"]},
            f"{REQ}.key",
            '"karpenter.sh/nodepool" is restricted',
        ),
        (
            {"key": "karpenter.sh/custom", "operator": "Exists"},
            f"{REQ}.key",
            'domain "karpenter.sh" is restricted',
        ),
        (
            {"key": "kubernetes.io/custom", "operator": "Exists"},
            f"{REQ}.key",
            'domain "kubernetes.io" is restricted',
        ),
        ({"key": "example.k8s.io/x", "operator": "Exists"}, f"{REQ}.key", 'domain "k8s.io" is restricted'),
        ({"key": "bad key!", "operator": "Exists"}, f"{REQ}.key", 'Invalid value: "bad key!": should match'),
        ({"key": "a", "operator": "In", "values": ["x"], "minValue": 1}, f"{REQ}.minValue", "unknown field"),
    ],
)
def test_requirement_rules(requirement: dict[str, Any], path: str, fragment: str) -> None:
    errors = errors_of(with_requirement(requirement))
    assert any(p == path and fragment in m for p, m in errors), errors


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": wk.INSTANCE_CPU, "operator": "Gte", "values": ["4"]},
        {"key": wk.INSTANCE_CPU, "operator": "Lte", "values": ["64"]},
        {"key": wk.INSTANCE_GENERATION, "operator": "Gt", "values": ["0"]},
        {"key": wk.INSTANCE_FAMILY, "operator": "NotIn", "values": ["t3"], "minValues": 5},
        {"key": wk.ZONE, "operator": "In", "values": ["a", "b"], "minValues": 2},
        {"key": wk.INSTANCE_TYPE, "operator": "Exists"},
        {"key": "node.kubernetes.io/windows-build", "operator": "DoesNotExist"},
        {"key": "example.com/team", "operator": "In", "values": ["x"]},
        {"key": wk.INSTANCE_GPU_COUNT, "operator": "DoesNotExist"},
    ],
)
def test_valid_requirements_load(requirement: dict[str, Any]) -> None:
    pool = only_pool(with_requirement(requirement))
    assert requirement["key"] in pool.requirements()


@pytest.mark.parametrize("weight", [-1, 0, 101])
def test_weight_range(weight: int) -> None:
    """Karpenter v1's CRD: 1..100 (unset is the lowest priority, 0 is refused)."""
    [(path, message)] = errors_of(pool_doc(weight=weight))
    assert path == "spec.weight"
    assert "greater than or equal to 1" in message or "less than or equal to 100" in message


@pytest.mark.parametrize("weight", [1, 100])
def test_weight_bounds_are_inclusive(weight: int) -> None:
    assert only_pool(pool_doc(weight=weight)).weight == weight


@pytest.mark.parametrize(
    ("disruption", "path", "fragment"),
    [
        (
            {"consolidationPolicy": "Always"},
            "spec.disruption.consolidationPolicy",
            "WhenEmptyOrUnderutilized",
        ),
        ({"consolidateAfter": "1.5h"}, "spec.disruption.consolidateAfter", 'Invalid value: "1.5h": should match'),
        ({"consolidateAfter": "10"}, "spec.disruption.consolidateAfter", "a duration such as"),
        ({"budgets": [{"nodes": "ten"}]}, "spec.disruption.budgets[0].nodes", 'Invalid value: "ten": should match'),
        ({"budgets": [{"nodes": "101%"}]}, "spec.disruption.budgets[0].nodes", 'Invalid value: "101%": should match'),
        (
            {"budgets": [{"nodes": "1", "schedule": "@daily"}]},
            "spec.disruption.budgets",
            "'schedule' must be set with 'duration'",
        ),
        (
            {"budgets": [{"nodes": "1", "duration": "1h"}]},
            "spec.disruption.budgets",
            "'schedule' must be set with 'duration'",
        ),
        (
            {"budgets": [{"schedule": "0 9 * *", "duration": "1h"}]},
            "spec.disruption.budgets[0].schedule",
            'Invalid value: "0 9 * *": should match',
        ),
        (
            {"budgets": [{"schedule": "@daily", "duration": "1d"}]},
            "spec.disruption.budgets[0].duration",
            'Invalid value: "1d": should match',
        ),
        ({"budgets": [{"reasons": ["Expired"]}]}, "spec.disruption.budgets[0].reasons[0]", 'supported values: "Underutilized", "Empty", "Drifted"'),
        ({"consolidateAftr": "1m"}, "spec.disruption.consolidateAftr", "did you mean 'consolidateAfter'"),
    ],
)
def test_disruption_rules(disruption: dict[str, Any], path: str, fragment: str) -> None:
    errors = errors_of(pool_doc(disruption=disruption))
    assert any(p == path and fragment in m for p, m in errors), errors


def test_template_rules() -> None:
    doc = pool_doc(limits={"cpu": "lots"})
    tmpl = doc["spec"]["template"]
    tmpl["metadata"] = {"labels": {wk.NODEPOOL: "x"}}
    tmpl["spec"]["taints"] = [{"key": "a", "effect": "Sometimes"}]
    tmpl["spec"]["expireAfter"] = "30d"
    tmpl["spec"]["terminationGracePeriod"] = "Never"
    del tmpl["spec"]["nodeClassRef"]
    errors = dict(errors_of(doc))
    assert "restricted" in errors["spec.template.metadata.labels"]
    assert "NoSchedule" in errors["spec.template.spec.taints[0].effect"]
    assert 'Invalid value: "30d": should match' in errors["spec.template.spec.expireAfter"]
    assert 'Invalid value: "Never": should match' in errors["spec.template.spec.terminationGracePeriod"]
    assert errors["spec.template.spec.nodeClassRef"] == "Required value"
    assert 'Invalid value: "lots": should match' in errors["spec.limits[cpu]"]


def test_typo_path_names_the_misspelt_field() -> None:
    doc = pool_doc()
    tmpl = doc["spec"]["template"]["spec"]
    tmpl["requirments"] = tmpl.pop("requirements")
    errors = errors_of(doc)
    assert ("spec.template.spec.requirements", "Required value") in errors
    typo = [m for p, m in errors if p == "spec.template.spec.requirments"]
    assert typo and "unknown field 'requirments'" in typo[0] and "did you mean 'requirements'" in typo[0]


def test_name_is_required_and_validated() -> None:
    doc = pool_doc()
    doc["metadata"] = {}
    assert errors_of(doc) == [("metadata.name", "required field is missing")]
    doc["metadata"] = {"name": "Not_Valid"}
    [(path, message)] = errors_of(doc)
    assert path == "metadata.name" and "RFC 1123" in message


def test_model_is_not_mutated_by_loading() -> None:
    doc = pool_doc()
    before = copy.deepcopy(doc)
    load([doc])
    assert doc == before


# --- durations ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"), [("720h", 2_592_000), ("30s", 30), ("1h30m", 5400), ("0s", 0), ("Never", None)]
)
def test_parse_duration(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "1.5h", "1d", "500ms", "never", "h"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [(5400, "1h30m"), (0, "0s"), (None, "Never"), (3661, "1h1m1s")])
def test_format_duration(seconds: int | None, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds
