"""Consolidation after a scale-down, with PodDisruptionBudgets, on the real control plane. Two nodes are
made on purpose: `keep` and `blocker` share the first; `filler` (anti-affine to `blocker` on the hostname,
as the real scheduler enforces it) needs a second. Scaling `blocker` to 0 leaves two underused nodes whose
pods fit on one: carpool consolidates, evicting through the real eviction API (each Deployment has a PDB
of minAvailable 1), while the real ReplicaSet controller makes the replacements and the real scheduler
binds them to the node kept. What users see: one carpool node left, every pod Running on it, the other
instance terminated in local EC2 and its NodeClaim gone, Karpenter's `DisruptionTerminating` event, and at
no moment fewer Running pods of a Deployment than its PDB allows."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.realcluster.controlplane import require_binaries
from tests.realcluster.tier import RealTier

#: boot to kubelet start; short so the scenario stays short, still after the launch (`CARPOOL_TIER_BOOT_SECONDS`)
BOOT_SECONDS = float(os.environ.get("CARPOOL_TIER_BOOT_SECONDS", "10"))
SERVED_WITHIN = 240.0
#: disruption runs every 60 s (`delivery.SCHEDULE_SECONDS`); validation, the drain and the replacements' binding
CONSOLIDATED_WITHIN = 300.0
APPS = {"keep": 1, "filler": 2}


def _anti_affine_to(app: str) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}}


def _pdb(app: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app, "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}}


class RunningFloor:
    """The fewest Running pods each app had at any sample (1 s apart) while it runs: what a PDB promises."""

    def __init__(self, tier: RealTier, apps: tuple[str, ...]) -> None:
        self.tier, self.apps = tier, apps
        self.floor: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="running-floor")

    def __enter__(self) -> RunningFloor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                pods = self.tier.pods(namespace="default")
            except Exception:  # a failed sample is skipped; the next one counts
                continue
            for app in self.apps:
                up = sum(1 for p in pods if p["metadata"].get("labels", {}).get("app") == app
                         and p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))
                self.floor[app] = min(self.floor.get(app, up), up)


@pytest.fixture(scope="module")
def tier() -> Iterator[RealTier]:
    require_binaries(("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubemark"))
    started = time.monotonic()
    with RealTier(boot_seconds=BOOT_SECONDS) as running:
        yield running
    print(f"consolidation-with-PDB scenario: {time.monotonic() - started:.0f} s")


def _all_running(tier: RealTier, wanted: dict[str, int]) -> list[dict[str, Any]]:
    pods = [p for p in tier.pods(namespace="default") if not p["metadata"].get("deletionTimestamp")]
    done = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
    counts = {app: sum(1 for p in done if p["metadata"]["labels"].get("app") == app) for app in wanted}
    extra = len(pods) - sum(wanted.values())
    return done if counts == wanted and extra == 0 else []


def _carpool_nodes(tier: RealTier) -> list[dict[str, Any]]:
    return [n for n in tier.nodes() if n["metadata"]["labels"].get("karpenter.sh/nodepool")]


def test_two_nodes_are_made(tier: RealTier) -> None:
    tier.apply([tier.deployment("keep", 1), tier.deployment("blocker", 1), _pdb("keep"), _pdb("filler")])
    tier.wait_for("keep and blocker Running", lambda: _all_running(tier, {"keep": 1, "blocker": 1}), SERVED_WITHIN)
    tier.apply([tier.deployment("filler", 2, spec=_anti_affine_to("blocker"))])
    running = tier.wait_for("all Running", lambda: _all_running(tier, {**APPS, "blocker": 1}), SERVED_WITHIN)
    assert len({p["spec"]["nodeName"] for p in running}) == 2, [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in running]
    assert len(_carpool_nodes(tier)) == 2


def test_a_scale_down_is_consolidated_within_the_budgets(tier: RealTier) -> None:
    """Runs after the first test, on the same tier."""
    tier.wait_for("all Running", lambda: _all_running(tier, {**APPS, "blocker": 1}), SERVED_WITHIN)
    before = {i["InstanceId"] for i in tier.instances(("running",))}
    with RunningFloor(tier, tuple(APPS)) as floor:
        tier.scale("blocker", 0)

        def consolidated() -> list[dict[str, Any]]:
            running = _all_running(tier, APPS)
            return running if running and len(_carpool_nodes(tier)) == 1 else []

        running = tier.wait_for("one node left, every pod Running on it", consolidated, CONSOLIDATED_WITHIN)
    node = _carpool_nodes(tier)[0]
    assert {p["spec"]["nodeName"] for p in running} == {node["metadata"]["name"]}
    assert all(floor.floor.get(app, 0) >= 1 for app in APPS), f"a PDB was broken: {floor.floor}"

    kept = node["spec"]["providerID"].rsplit("/", 1)[-1]
    gone = before - {kept}
    assert len(gone) == 1, (before, kept)
    states = {i["InstanceId"]: i["State"]["Name"] for i in tier.instances(("shutting-down", "terminated", "running"))}
    assert states.get(next(iter(gone))) in ("shutting-down", "terminated"), states
    claims = [c["status"].get("providerID", "") for c in tier.nodeclaims()]
    assert [p for p in claims if p.endswith(kept)] and not [p for p in claims if p.endswith(next(iter(gone)))], claims
    disrupting = tier.events("DisruptionTerminating")
    assert disrupting, sorted({e.get("reason") for e in tier.events()})
    assert not tier.lambdas.errors(), [e.error for e in tier.lambdas.errors()][:2]
