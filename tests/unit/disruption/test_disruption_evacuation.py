"""The eviction rules of an interrupted node: the deadline, PDBs, the implicit quarter per controller,
bare and do-not-disrupt pods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from carpool.api.k8s import Pod, PodDisruptionBudget
from carpool.disruption import evacuation

WARNED = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
NODE = "doomed"


def pod(name: str, app: str, node: str | None = NODE, owner: str | None = "ReplicaSet", running: bool = True,
        annotations: dict[str, str] | None = None) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": app},
                            "annotations": annotations or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{app}-rs"}]
    status: dict[str, Any] = {"phase": "Running" if running else "Pending"}
    if running:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    return Pod.model_validate({"metadata": meta, "spec": spec, "status": status})


def pdb(app: str, max_unavailable: int = 1) -> PodDisruptionBudget:
    return PodDisruptionBudget.model_validate({
        "metadata": {"name": app, "namespace": "default"},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}}})


def plan(on_node: list[Pod], elsewhere: list[Pod] = (), pdbs: list[PodDisruptionBudget] = (),  # type: ignore[assignment]
         ready: bool = False, after: float = 5) -> evacuation.Step:
    return evacuation.plan(on_node, [*on_node, *elsewhere], list(pdbs), ready, WARNED + timedelta(seconds=after), WARNED)


def test_without_a_pdb_a_controller_loses_at_most_a_quarter_of_its_replicas_at_a_time() -> None:
    four = [pod(f"api-{i}", "api") for i in range(4)]
    assert plan(four).evict == ["default/api-0"]
    eight = [pod(f"api-{i}", "api") for i in range(8)]
    assert len(plan(eight).evict) == 2
    five = [pod(f"api-{i}", "api") for i in range(5)]
    assert len(plan(five).evict) == 2  # ceil(25% of 5)


def test_pods_already_unavailable_count_against_the_quarter() -> None:
    on_node = [pod(f"api-{i}", "api") for i in range(3)]
    pending = [pod("api-r1", "api", node=None, running=False)]
    step = plan(on_node, pending)
    assert step.evict == []
    assert all("25%" in why for why in step.waiting.values())


def test_a_single_replica_may_still_move() -> None:
    assert plan([pod("solo-0", "solo")]).evict == ["default/solo-0"]


def test_pods_a_pdb_covers_are_left_to_the_api_server() -> None:
    web = [pod(f"web-{i}", "web") for i in range(6)]
    step = plan(web, pdbs=[pdb("web")])
    assert step.evict == sorted(p.key for p in web)  # the Eviction API refuses what the budget does not allow


def test_a_bare_pod_waits_for_the_replacement() -> None:
    bare = pod("bare", "bare", owner=None)
    assert plan([bare]).evict == []
    assert "replacement" in plan([bare]).waiting["default/bare"]
    assert plan([bare], ready=True).evict == ["default/bare"]


def test_do_not_disrupt_waits_for_the_deadline() -> None:
    keep = pod("keep-0", "keep", annotations={"karpenter.sh/do-not-disrupt": "true"})
    assert plan([keep], ready=True).evict == []
    near = plan([keep], after=(evacuation.NOTICE - evacuation.MARGIN).total_seconds())
    assert near.phase == "deadline" and near.evict == ["default/keep-0"]


def test_at_the_deadline_everything_goes() -> None:
    pods = [pod(f"api-{i}", "api") for i in range(4)] + [pod("bare", "bare", owner=None)]
    step = plan(pods, after=95)
    assert step.phase == "deadline" and len(step.evict) == 5 and not step.waiting
    assert plan(pods, after=85).phase == "budgeted"


def test_controllers_are_told_apart() -> None:
    pods = [pod(f"api-{i}", "api") for i in range(4)] + [pod(f"web-{i}", "web") for i in range(4)]
    assert plan(pods).evict == ["default/api-0", "default/web-0"]
