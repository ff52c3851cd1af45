"""kubectl's client-side apply for custom resources: the last-applied annotation and the three-way patch."""

from __future__ import annotations

import json
from typing import Any

from carpool.api.kubectl_apply import LAST_APPLIED, applied_form, go_json, last_applied, three_way_patch


def pool(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"}, "requirements": []}}, **spec}}


def live_after(applied: dict[str, Any], **server: Any) -> dict[str, Any]:
    """What the API server holds after a create of `applied`: its metadata, the CRD's defaults, a status."""
    live = json.loads(json.dumps(applied))
    live["metadata"].update(uid="u-1", resourceVersion="7", generation=1, finalizers=["carpool.dev/x"])
    live["spec"].setdefault("disruption", {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]})
    live["status"] = {"resources": {"cpu": "4"}}
    live["spec"].update(server)
    return live


def test_the_annotation_records_the_config_as_go_writes_it() -> None:
    config = pool(limits={"cpu": "64"})
    config["metadata"]["annotations"] = {"team": "a&b", LAST_APPLIED: "stale"}
    applied = applied_form(config)
    recorded = applied["metadata"]["annotations"][LAST_APPLIED]
    assert recorded.endswith("}\n") and "\\u0026" in recorded and " " not in recorded
    assert json.loads(recorded) == {**pool(limits={"cpu": "64"}), "metadata": {"name": "general",
                                                                             "annotations": {"team": "a&b"}}}
    bare = json.loads(applied_form(pool())["metadata"]["annotations"][LAST_APPLIED])
    assert bare["metadata"] == {"annotations": {}, "name": "general"}  # as kubectl records it: an empty map
    assert applied["metadata"]["annotations"]["team"] == "a&b"
    assert last_applied(live_after(applied)) == json.loads(recorded)
    assert go_json({"b": 1, "a": "<>"}) == '{"a":"\\u003c\\u003e","b":1}\n'


def test_the_same_config_again_is_no_patch_whatever_the_server_added() -> None:
    applied = applied_form(pool(limits={"cpu": "64"}))
    live = live_after(applied)
    assert three_way_patch(last_applied(live), applied_form(pool(limits={"cpu": "64"})), live) == {}


def test_a_changed_field_is_set_and_the_annotation_follows() -> None:
    live = live_after(applied_form(pool(limits={"cpu": "64"})))
    modified = applied_form(pool(limits={"cpu": "128"}))
    patch = three_way_patch(last_applied(live), modified, live)
    assert patch["spec"] == {"limits": {"cpu": "128"}}
    assert patch["metadata"] == {"annotations": {LAST_APPLIED: modified["metadata"]["annotations"][LAST_APPLIED]}}


def test_a_field_removed_from_the_file_is_deleted_but_server_fields_stay() -> None:
    """`limits` was applied and is gone from the file: null. `disruption` (the CRD's default), status,
    finalizers and uid were never in the file: left alone."""
    live = live_after(applied_form(pool(limits={"cpu": "64", "memory": "1Ti"}, weight=10)))
    patch = three_way_patch(last_applied(live), applied_form(pool(limits={"cpu": "64"})), live)
    assert patch["spec"] == {"limits": {"memory": None}, "weight": None}
    assert "status" not in patch and set(patch["metadata"]) == {"annotations"}


def test_a_list_is_replaced_whole() -> None:
    requirement = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
    live = live_after(applied_form(pool()))
    modified = pool()
    modified["spec"]["template"]["spec"]["requirements"] = [requirement]
    patch = three_way_patch(last_applied(live), applied_form(modified), live)
    assert patch["spec"] == {"template": {"spec": {"requirements": [requirement]}}}


def test_without_an_annotation_nothing_is_deleted() -> None:
    """An object created by other means: kubectl patches what the file sets and deletes nothing."""
    live = live_after(pool(limits={"cpu": "64"}, weight=5))
    patch = three_way_patch(last_applied(live), applied_form(pool(limits={"cpu": "64"})), live)
    assert "weight" not in patch.get("spec", {}) and set(patch) == {"metadata"}


def test_a_value_of_another_type_is_a_change() -> None:
    live = live_after(applied_form(pool(weight=1)))
    assert three_way_patch(last_applied(live), applied_form(pool(weight=True)), live)["spec"] == {"weight": True}


def test_an_empty_map_in_the_file_is_a_value() -> None:
    live = live_after(applied_form(pool(limits={"cpu": "1"})))
    patch = three_way_patch(last_applied(live), applied_form(pool(limits={})), live)
    assert patch["spec"] == {"limits": {"cpu": None}}
