"""The config in the cluster, end to end: through the real provisioner handler on local AWS (a NodePool
carpool refuses stops only itself), and `ClusterConfigSource` side by side on the simulated cluster and on
the real kube-apiserver v1.24 with Karpenter v1.14.1's CRDs (`real_api.py`; skipped without KUBE_ENDPOINT):
the same verdicts on the same objects, an edit seen at the next list, a status write judged as nothing new."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from carpool_env import MakeDeps, apply_config, manifests, nodeclass, nodepool, running_instances
from real_api import ensure_karpenter_crds, real_api, unique
from test_exactly_once import ROOT, Context, batch_of, failed_ids, unschedulable

from carpool.app import wiring
from carpool.app.cluster_config_source import ClusterConfigSource
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, KarpenterObjects, ObjectKind
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.localaws.lambda_runtime import load_handler
from carpool.sim.localaws.server import LocalAws

PREFIX = "config-lib"
ON_DEMAND = {"karpenter.sh/capacity-type": ["on-demand"], "karpenter.k8s.aws/instance-family": ["m5"]}


# -- through the provisioner -------------------------------------------------------------------------------
def test_a_nodepool_carpool_refuses_stops_only_itself(make_deps: MakeDeps, aws: LocalAws) -> None:
    """`bad` passes Karpenter's CRD (the API server takes it) but not carpool's model; it outweighs `good`,
    so it would be tried first. The pods are served by `good`, and the verdict on `bad` names the field."""
    bad = nodepool("bad", requirements=ON_DEMAND, weight=50)
    bad["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]})
    deps = make_deps(manifests(nodepool("good", requirements=ON_DEMAND), nodeclass()))
    apply_config(deps.cluster, manifests(bad))  # type: ignore[arg-type]
    wiring.use(deps)
    verdict = deps.config.current().verdict("NodePool", "bad")
    assert verdict is not None and verdict.problems and not verdict.nodeclass_missing
    assert [p.name for p in deps.config.load().nodepools] == ["good"]

    pods = unschedulable(2, deps)
    response = load_handler("provisioner", ROOT / "functions")(batch_of(pods, deps), Context(60))
    assert failed_ids(response) == set()
    (claim,) = deps.ledger.active()
    assert claim.nodepool == "good" and len(running_instances(aws)) == 1


# -- side by side: simulated and real API server ------------------------------------------------------------
class Objects:
    """One API server's Karpenter objects, and what a test made there (deleted afterwards)."""

    def __init__(self, objects: KarpenterObjects) -> None:
        self.objects = objects
        self.made: list[tuple[ObjectKind, str]] = []

    def create(self, kind: ObjectKind, obj: dict[str, Any]) -> dict[str, Any]:
        created = self.objects.create_object(kind, obj)
        self.made.append((kind, obj["metadata"]["name"]))
        return created

    def clean_up(self) -> None:
        for kind, name in reversed(self.made):
            self.objects.delete_object(kind, name)


@pytest.fixture(params=["simulated", "real"])
def api(request: pytest.FixtureRequest) -> Iterator[Objects]:
    if request.param == "simulated":
        yield Objects(SimulatedCluster(lambda: datetime(2026, 5, 1, tzinfo=UTC)))
        return
    with real_api() as real:
        ensure_karpenter_crds(real)
        made = Objects(real.karpenter_objects())
        try:
            yield made
        finally:
            made.clean_up()


def _names(suffix: str) -> tuple[str, str]:
    name = unique(f"{PREFIX}-{suffix}")
    return name, f"{name}-class"


def test_the_same_verdicts_on_both_servers(api: Objects) -> None:
    pool, klass = _names("verdicts")
    api.create(EC2NODECLASS, nodeclass(klass))
    api.create(NODEPOOL, nodepool(pool, requirements=ON_DEMAND, nodeclass=klass))
    api.create(NODEPOOL, nodepool(f"{pool}-orphan", requirements=ON_DEMAND, nodeclass=f"{klass}-missing"))
    config = ClusterConfigSource(api.objects).current()

    served = config.verdict("NodePool", pool)
    assert served is not None and served.valid and served.generation == 1 and served.uid and served.resource_version
    assert served.nodeclass == klass
    assert pool in {p.name for p in config.manifests.nodepools}
    assert klass in {c.name for c in config.manifests.nodeclasses}
    orphan = config.verdict("NodePool", f"{pool}-orphan")
    assert orphan is not None and orphan.nodeclass_missing and orphan.own_problems == ()
    assert f"{klass}-missing' not found" in orphan.reference_problem
    assert f"{pool}-orphan" not in {p.name for p in config.manifests.nodepools}
    # the API server's defaults are what the loader fills in: the served pool reads as Karpenter's defaults
    loaded = config.manifests.nodepool(pool)
    assert loaded is not None and loaded.spec.template.spec.expire_after is not None


def test_an_edit_is_judged_at_the_next_list_and_a_status_write_changes_nothing(api: Objects) -> None:
    pool, klass = _names("edit")
    api.create(EC2NODECLASS, nodeclass(klass))
    api.create(NODEPOOL, nodepool(pool, requirements=ON_DEMAND, nodeclass=klass))
    source = ClusterConfigSource(api.objects)
    before = source.current().verdict("NodePool", pool)
    assert before is not None

    api.objects.patch_status(NODEPOOL, pool, {"conditions": [
        {"type": "ValidationSucceeded", "status": "True", "reason": "ValidationSucceeded", "message": "",
         "lastTransitionTime": "2026-05-01T00:00:00Z", "observedGeneration": 1}]})
    source.invalidate()
    written = source.current().verdict("NodePool", pool)
    assert written is not None and written.generation == before.generation
    assert written.resource_version != before.resource_version
    assert written.status["conditions"][0]["type"] == "ValidationSucceeded"  # the status as listed

    edited = copy.deepcopy(nodepool(pool, requirements=ON_DEMAND, nodeclass=klass, weight=9))
    api.objects.patch_object(NODEPOOL, pool, {"spec": edited["spec"]})
    assert source.current().manifests.nodepool(pool).weight == 0  # type: ignore[union-attr]  # within the recheck
    source.invalidate()
    after = source.current()
    assert after.manifests.nodepool(pool).weight == 9  # type: ignore[union-attr]
    assert after.verdict("NodePool", pool).generation == before.generation + 1  # type: ignore[union-attr]
