"""Why a pod is pending and what carpool holds, read where users look: the provisioner logs a pod's
reasons once when they change (not on every retry), and `carpool status` lists the claims, each pool's
usage against its limits and the pods carpool cannot serve with their reasons, from local AWS as the real
handler left it."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from carpool_env import LambdaContext, MakeDeps, manifests, nodeclass, nodepool, pending_pods, sqs_batch
from typer.testing import CliRunner

from carpool.api import events
from carpool.api.k8s import Pod
from carpool.app import wiring
from carpool.cli import app
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("event_path")
CONFIG = manifests(
    nodepool(requirements={"karpenter.k8s.aws/instance-family": ["c5", "m5"],
                           "karpenter.sh/capacity-type": ["on-demand"]}, limits={"cpu": "100"}),
    nodeclass(),
)


def _provision(pods: list[Pod]) -> dict[str, Any]:
    handler = load_handler("provisioner", ROOT / "functions")
    entries = [events.pod_unschedulable_entry("itest", p, datetime.now(UTC), "bus") for p in pods]
    return handler(sqs_batch(entries), LambdaContext())  # type: ignore[no-any-return]


def kubeconfig_for(server: SimApiServer, path: Path) -> Path:
    """A kubeconfig for the simulated API server, as `aws eks update-kubeconfig` writes one for a cluster."""
    import yaml

    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": server.url}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "me"}}]}))
    return path


def _reason_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "carpool.app.reasons" and "is not launched for" in r.getMessage()]


def test_a_pods_reasons_are_logged_once_and_status_lists_them_with_the_claims(
        make_deps: MakeDeps, aws: LocalAws, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    deps = make_deps(CONFIG, start=datetime.now(UTC))  # `carpool status` reads at the wall clock's now
    wiring.use(deps)
    served = pending_pods(2, cpu="1", prefix="web", deps=deps)
    (huge,) = pending_pods(1, cpu="500", prefix="huge", deps=deps)
    deps.cluster.bind()  # type: ignore[attr-defined]  # the kube-scheduler marks them Unschedulable
    caplog.set_level(logging.INFO, logger="carpool.app.reasons")
    caplog.set_level(logging.INFO, logger="carpool.app.provisioning.record")

    _provision([*served, huge])
    _provision([huge])  # the watcher's next period publishes it again: same reasons, no new line

    # what `kubectl describe pod` shows: Karpenter's events, on the pod itself (its uid), not repeated
    sim = deps.cluster
    (failed,) = sim.events_of("Pod", "huge0")  # type: ignore[attr-defined]
    assert (failed["type"], failed["reason"], failed["count"]) == ("Warning", "FailedScheduling", 1)
    assert failed["message"].startswith('Failed to schedule pod, incompatible with nodepool "default"')
    assert failed["involvedObject"]["uid"] == huge.metadata.uid
    nominated = [sim.events_of("Pod", p.metadata.name) for p in served]  # type: ignore[attr-defined]
    assert [[(e["reason"], e["message"].split("/")[0]) for e in events] for events in nominated] == [
        [("Nominated", "Pod should schedule on: nodeclaim")]] * 2

    (line,) = _reason_lines(caplog)
    assert line.pod == "default/huge0" and line.reasons  # type: ignore[attr-defined]  # structured fields

    monkeypatch.setenv("CARPOOL_TABLE", deps.settings.table)
    with SimApiServer(sim) as server:  # the pools' limits are the cluster's NodePools'
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(server, tmp_path / "kubeconfig")))
        answer = CliRunner().invoke(app, ["status", "--json"])
    assert answer.exit_code == 0, answer.output
    status = json.loads(answer.stdout)
    (claim,) = status["claims"]
    assert claim["nodepool"] == "default" and claim["instanceId"].startswith("i-") and claim["state"] == "launched"
    (pool,) = status["pools"]
    assert pool["limits"] == {"cpu": 100_000} and pool["usage"]["cpu"] > 0 and pool["usage"]["nodes"] == 1
    (pending,) = status["pending"]
    assert pending["pod"] == "default/huge0" and pending["reasons"] == line.reasons  # type: ignore[attr-defined]

    # "what did carpool launch, and why": one structured line per claim launched
    (launch,) = [r for r in caplog.records if r.name == "carpool.app.provisioning.record" and r.getMessage().startswith("launched ")]
    assert (launch.claim, launch.reason, launch.pods) == (claim["name"], "provisioning", 2)  # type: ignore[attr-defined]

    table = CliRunner().invoke(app, ["status"])
    assert table.exit_code == 0 and "default/huge0" in table.stdout and claim["name"] in table.stdout


def test_status_without_a_table_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARPOOL_TABLE", raising=False)
    answer = CliRunner().invoke(app, ["status"])
    assert answer.exit_code == 2 and "no state table" in answer.output


def test_a_node_class_that_refuses_launches_is_in_status_once_until_a_launch_from_it_succeeds(
        make_deps: MakeDeps, aws: LocalAws, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """`spec.role` names no IAM role: the real handler, twice (the watcher's next period), logs the cause
    once; `carpool status` (the deployed state table) names the node class, its cause and pool; once the
    role is fixed and a launch succeeds, the entry is gone."""
    broken = manifests(nodepool(requirements={"karpenter.k8s.aws/instance-family": ["c5", "m5"]}),
                       nodeclass(role="no-such-role"))
    deps = make_deps(broken, start=datetime.now(UTC))
    wiring.use(deps)
    pods = pending_pods(2, cpu="1", prefix="r", deps=deps)
    deps.cluster.bind()  # type: ignore[attr-defined]
    caplog.set_level(logging.INFO, logger="carpool.app.not_ready")
    assert _provision(pods) == {"batchItemFailures": []}  # pods carpool cannot serve are not retried at once
    _provision(pods)
    logged = [r for r in caplog.records if r.name == "carpool.app.not_ready" and "is not ready" in r.getMessage()]
    assert len(logged) == 1 and logged[0].cause == "RoleNotFound"  # type: ignore[attr-defined]

    monkeypatch.setenv("CARPOOL_TABLE", deps.settings.table)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))  # usage without limits, said on stderr
    answer = CliRunner().invoke(app, ["status", "--json"])
    assert answer.stderr.startswith("warning: limits not shown: kubeconfig ") and answer.exit_code == 0
    status = json.loads(answer.stdout)
    (entry,) = status["notReady"]
    assert (entry["nodeclass"], entry["cause"], entry["nodepools"]) == ("default", "RoleNotFound", ["default"])
    assert entry["message"] == "spec.role: IAM role 'no-such-role' does not exist"
    table = CliRunner().invoke(app, ["status"]).stdout
    assert "EC2NodeClasses not ready" in table and "RoleNotFound" in table

    fixed = make_deps(manifests(nodepool(requirements={"karpenter.k8s.aws/instance-family": ["c5", "m5"]}),
                                nodeclass()), start=datetime.now(UTC))
    wiring.use(fixed)
    again = pending_pods(2, cpu="1", prefix="r", deps=fixed)  # the same pods, in the new deps' cluster
    fixed.cluster.bind()  # type: ignore[attr-defined]
    answer = _provision(again)
    assert [c.nodeclass for c in fixed.ledger.active()] == ["default"], answer
    assert json.loads(CliRunner().invoke(app, ["status", "--json"]).stdout)["notReady"] == []
