"""Replacements under topology spread (issue 38, item 5), through `provision_pods` and the real interruption
handler on local AWS (moto) and the simulated cluster.

- The pods already running count for a batch's zone spread, as the kube-scheduler counts them: pending
  pods go to the zone the spread leaves them, not one per zone as if every zone were empty.
- A spot warning replaces the node's pods in the zone the spread puts them back in (the node's own,
  when the other zones hold their share): no replacement in a zone no pod will use.
- Two warnings in one batch: the second node's pods are nominated onto the replacement the first one
  launched when it has room (their nominations, held by the claim being replaced, are taken over), and
  its drain waits for that replacement instead of evicting pods no node is coming for.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from carpool_env import MakeDeps, manifests, nodeclass, nodepool

from carpool import labels as L
from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.app.provisioning import provision
from carpool.app.wiring import Dependencies
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws
from carpool.state.models import Claim

ROOT = Path(__file__).resolve().parents[2]
POOL = {"karpenter.k8s.aws/instance-family": ["m5"], "karpenter.sh/capacity-type": ["on-demand"],
        "karpenter.k8s.aws/instance-size": ["xlarge", "2xlarge"]}
ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
WEB = {"app": "web"}


class Context:
    function_name = "carpool-interruption"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool-interruption"
    aws_request_id = "req"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def deps(make_deps: MakeDeps) -> Dependencies:
    built = make_deps(manifests(nodepool(requirements=POOL), nodeclass()))
    wiring.use(built)
    return built


def _pod(name: str, *, spread: bool, cpu: str = "1", node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if spread:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": WEB}}]
    status: dict[str, Any] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return {"metadata": {"name": name, "namespace": "default", "uid": name, "labels": dict(WEB)}, "spec": spec,
            "status": status}


def _add_pods(deps: Dependencies, names: Iterable[str], *, spread: bool = True, cpu: str = "1",
              node: str | None = None) -> list[Pod]:
    pods = [Pod.model_validate(_pod(n, spread=spread, cpu=cpu, node=node)) for n in names]
    for pod in pods:
        deps.cluster.add_pod(pod.to_json_dict())  # type: ignore[attr-defined]
    return pods


def _other_node(deps: Dependencies, name: str, zone: str) -> str:
    """A node carpool did not launch (a managed node group's), Ready in `zone`."""
    allocatable = {"cpu": "4", "memory": "16Gi", "pods": "58"}
    deps.cluster.add_node({  # type: ignore[attr-defined]
        "metadata": {"name": name, "labels": {L.ZONE: zone, L.HOSTNAME: name}},
        "spec": {"providerID": f"aws:///{zone}/i-{name}"},
        "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}})
    return name


def _join(deps: Dependencies, claim: Claim) -> str:
    """The claim's node joins Ready and registered (what the kubelet and the registrar do)."""
    name = f"ip-{claim.instance_id}.ec2.internal"
    allocatable = {"cpu": f"{claim.allocatable['cpu']}m", "memory": str(claim.allocatable["memory"]), "pods": "58"}
    deps.cluster.add_node({  # type: ignore[attr-defined]
        "metadata": {"name": name, "labels": {**claim.labels, L.NODEPOOL: claim.nodepool, L.HOSTNAME: name}},
        "spec": {"providerID": f"aws:///{claim.zone}/{claim.instance_id}"},
        "status": {"allocatable": allocatable, "capacity": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}})
    deps.ledger.mark_registered(claim.name, name, deps.clock())
    return name


def _serving(deps: Dependencies, pods: list[Pod]) -> list[tuple[Claim, str]]:
    """Claims launched for `pods`, their nodes joined and the pods bound."""
    launched = provision.provision_pods(pods, deps, reason="test").launched
    deps.clock.now += timedelta(seconds=60)  # type: ignore[attr-defined]
    nodes = [(c, _join(deps, c)) for c in launched]
    deps.cluster.bind()  # type: ignore[attr-defined]
    return nodes


def _warnings(deps: Dependencies, instance_ids: Iterable[str]) -> dict[str, Any]:
    """Spot warnings for the instances, in one batch of the interruption queue, through its handler."""
    records = []
    for i, instance_id in enumerate(instance_ids):
        body = {"version": "0", "id": str(uuid.uuid4()), "detail-type": events.SPOT_INTERRUPTION,
                "source": events.EC2_SOURCE, "account": "123456789012",
                "time": deps.clock().strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east-1", "resources": [],
                "detail": {"instance-id": instance_id, "instance-action": "terminate"}}
        records.append({"messageId": f"m{i}", "receiptHandle": "r", "body": json.dumps(body), "attributes": {},
                        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:missing", "awsRegion": "us-east-1"})
    answer: dict[str, Any] = load_handler("interruption", ROOT / "functions")({"Records": records}, Context())
    return answer


def _zones(claims: Iterable[Claim]) -> set[str | None]:
    return {c.zone for c in claims}


def test_pending_pods_go_to_the_zone_the_running_pods_leave_them(deps: Dependencies, aws: LocalAws) -> None:
    node = _other_node(deps, "group-a", ZONE_A)
    _add_pods(deps, ["web-0", "web-1"], node=node)
    pending = _add_pods(deps, ["web-2", "web-3"])

    outcome = provision.provision_pods(pending, deps, reason="test")

    assert not outcome.unschedulable and not outcome.failed
    assert _zones(outcome.launched) == {ZONE_B}
    assert sorted(p for c in outcome.launched for p in c.pods) == ["default/web-2", "default/web-3"]


def test_an_interrupted_nodes_pods_are_replaced_in_the_zone_the_spread_puts_them_back(
        deps: Dependencies, aws: LocalAws) -> None:
    node = _other_node(deps, "group-a", ZONE_A)
    _add_pods(deps, ["web-0", "web-1"], node=node)
    [(claim, _node)] = _serving(deps, _add_pods(deps, ["web-2", "web-3"]))
    assert claim.zone == ZONE_B

    assert _warnings(deps, [claim.instance_id or ""]) == {"batchItemFailures": []}

    stored = deps.ledger.get(claim.name)
    assert stored is not None and stored.disruption is not None and stored.disruption.replaced_by
    replacements = [deps.ledger.get(name) for name in stored.disruption.replaced_by]
    assert _zones(c for c in replacements if c is not None) == {ZONE_B}


def test_two_warnings_in_one_batch_share_the_replacement_that_has_room(deps: Dependencies, aws: LocalAws) -> None:
    [(first, n1)] = _serving(deps, _add_pods(deps, ["a-0"], spread=False, cpu="500m"))
    deps.cluster.cordon(n1)  # so that b-0 runs on a node of its own
    [(second, n2)] = _serving(deps, _add_pods(deps, ["b-0"], spread=False, cpu="500m"))
    deps.cluster.uncordon(n1)
    assert [p.key for p in deps.cluster.pods_on_node(n2)] == ["default/b-0"]

    assert _warnings(deps, [first.instance_id or "", second.instance_id or ""]) == {"batchItemFailures": []}

    one, two = deps.ledger.get(first.name), deps.ledger.get(second.name)
    assert one is not None and one.disruption is not None and two is not None and two.disruption is not None
    assert two.disruption.replaced_by, "the second node waits for no replacement: its pod would be evicted bare"
    assert deps.ledger.nominated(deps.clock(), ["default/b-0"]) == {"default/b-0": two.disruption.replaced_by[0]}
    assert set(two.disruption.replaced_by) <= set(one.disruption.replaced_by)  # the first's replacement, shared
    assert [p.key for p in deps.cluster.pods_on_node(n2)] == ["default/b-0"]  # not evicted before it comes


def test_a_warning_no_replacement_can_serve_says_why_not_that_none_is_needed(
        make_deps: MakeDeps, aws: LocalAws, caplog: pytest.LogCaptureFixture) -> None:
    """Only m5.xlarge, and the spread allows the node's zone only, whose offering the warning marks
    unavailable: no replacement can come, and the warning's line says so and why."""
    deps = make_deps(manifests(nodepool(requirements={**POOL, "karpenter.k8s.aws/instance-size": ["xlarge"]}),
                               nodeclass()))
    wiring.use(deps)
    _add_pods(deps, ["web-0", "web-1"], node=_other_node(deps, "group-a", ZONE_A))
    [(claim, _node)] = _serving(deps, _add_pods(deps, ["web-2", "web-3"]))

    with caplog.at_level("INFO", logger="carpool.app.interrupt"):
        assert _warnings(deps, [claim.instance_id or ""]) == {"batchItemFailures": []}

    [said] = [r.getMessage() for r in caplog.records if "cordoned and tainted" in r.getMessage()]
    assert "replacement none; 2 with no node coming (default/web-2: topology spread" in said
    assert "not needed" not in said


def test_two_warnings_in_one_batch_plan_both_replacements_before_any_pod_is_evicted(
        deps: Dependencies, aws: LocalAws) -> None:
    """A hostname spread (`maxSkew: 1`): each node's pod needs a node of its own. Evicted first, the first
    node's pod would be a new pending pod no plan counts, and the second node's pod would be planned onto
    the first's replacement, where the kube-scheduler will not put it."""
    pods = [Pod.model_validate(_pod(f"web-{i}", spread=False)) for i in range(2)]
    for pod in pods:
        raw = pod.to_json_dict()
        raw["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs",
                                               "uid": "rs", "controller": True}]
        raw["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": L.HOSTNAME,
                                                     "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": WEB}}]
        deps.cluster.add_pod(raw, controller="Deployment/default/web")  # type: ignore[attr-defined]
    served = _serving(deps, [Pod.model_validate(deps.cluster.pods[p.key].raw) for p in pods])  # type: ignore[attr-defined]
    assert len(served) == 2 and all(len(deps.cluster.pods_on_node(n)) == 1 for _c, n in served)

    assert _warnings(deps, [c.instance_id or "" for c, _n in served]) == {"batchItemFailures": []}

    replaced = [deps.ledger.get(c.name) for c, _n in served]
    coming = [set(c.disruption.replaced_by) for c in replaced if c is not None and c.disruption is not None]
    assert len(coming) == 2 and all(coming) and not coming[0] & coming[1], coming
