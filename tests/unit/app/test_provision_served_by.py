"""`PodsServedBy{server}` is one data point per server and batch carrying the batch's count: a burst's
thousand pods are one log line per server (the dashboard sums `value`), and pods pinned to a node group
are still left to it."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from carpool import labels as L
from carpool.api.k8s import Pod
from carpool.app.provisioning import pending, provision


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "carpool")
    monkeypatch.setenv("CARPOOL_CLUSTER_NAME", "blue")
    yield


def _pod(i: int, pinned: bool) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "w", "image": "w", "resources": {"requests": {"cpu": "100m"}}}]}
    if pinned:
        spec["nodeSelector"] = {L.EKS_NODEGROUP: "system"}
    return Pod.model_validate({"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": spec,
                               "status": {"phase": "Pending"}})


def test_one_line_per_server_with_the_batch_count(capsys: pytest.CaptureFixture[str]) -> None:
    pods = [_pod(i, pinned=i % 4 == 0) for i in range(40)]
    deps = SimpleNamespace(config=SimpleNamespace(load=lambda: SimpleNamespace(nodepools=[])))
    outcome = provision.ProvisionOutcome()

    kept = pending.leave_alone_what_others_serve(pods, deps, outcome)  # type: ignore[arg-type]

    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"metric"')]
    served = {line["server"]: line["value"] for line in lines if line["metric"] == "PodsServedBy"}
    assert len([line for line in lines if line["metric"] == "PodsServedBy"]) == len(served) == 2
    assert served["node-group"] == 10
    assert sum(served.values()) == 40
    assert len(kept) == 30
    assert set(outcome.ignored) == {p.key for p in pods[::4]}
