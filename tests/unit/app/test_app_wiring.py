"""`carpool.app.wiring` holds the dependencies; the handlers name the production builder, which lives with
the adapters (the app layer never imports it)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from carpool.adapters.aws import wiring as aws_wiring
from carpool.app import wiring
from carpool.app.cluster_config_source import ClusterConfigSource
from carpool.app.settings import Settings
from carpool.sim.localaws import lambda_runtime


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    current, factory = wiring._current, wiring._factory
    wiring.use(None)
    wiring._factory = None
    yield
    wiring._current, wiring._factory = current, factory


def test_without_dependencies_or_a_builder_get_says_so() -> None:
    with pytest.raises(wiring.NotWired):
        wiring.get()


def test_the_provided_builder_runs_once_per_process_until_replaced() -> None:
    built: list[Any] = []

    def factory() -> Any:
        built.append(SimpleNamespace(settings=Settings("demo")))
        return built[-1]

    wiring.provide(factory)
    first = wiring.get()
    assert wiring.get() is first and len(built) == 1
    installed: Any = object()
    wiring.use(installed)
    assert wiring.get() is installed
    wiring.use(None)
    assert wiring.get() is not first and len(built) == 2


def test_dependencies_with_unresolved_cluster_facts_are_built_again_next_time() -> None:
    """A cold start whose DescribeCluster failed must not keep a container unable to launch for its life."""
    answers = iter(["DescribeCluster demo failed: throttled", ""])
    built: list[Any] = []

    def factory() -> Any:
        built.append(SimpleNamespace(settings=Settings("demo", cluster_facts_error=next(answers))))
        return built[-1]

    wiring.provide(factory)
    assert wiring.get().settings.cluster_facts_error
    resolved = wiring.get()
    assert resolved.settings.cluster_facts_error == "" and wiring.get() is resolved and len(built) == 2


@pytest.mark.parametrize("name", lambda_runtime.HANDLERS)
def test_every_handler_builds_with_the_production_wiring(name: str) -> None:
    lambda_runtime.load_handler(name)
    assert wiring._factory is aws_wiring.build_from_env



class _Asked(Exception):
    """A request the test stops at."""


def test_the_production_wiring_serves_karpenters_objects_on_the_clusters_client_without_a_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`Dependencies.karpenter` is built from the lightkube cluster's own access (endpoint, CA, EKS token)
    and asks nothing at a cold start: its client is the cluster's, made on first use."""
    from carpool.adapters.k8s.cluster import LightkubeCluster
    from carpool.adapters.k8s.karpenter_objects import LightkubeKarpenterObjects
    from carpool.karpenter_objects import NODEPOOL

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    asked: list[Any] = []

    def client(self: LightkubeCluster) -> Any:
        asked.append(self)
        raise _Asked

    monkeypatch.setattr(LightkubeCluster, "_client", client)
    settings = Settings("demo", cluster_version="1.32", cluster_endpoint="https://k8s.test", cluster_ca="Q0E=",
                        cluster_cidr="10.100.0.0/16", table="t")
    deps = aws_wiring.build(settings)
    assert isinstance(deps.cluster, LightkubeCluster) and isinstance(deps.karpenter, LightkubeKarpenterObjects)
    assert asked == [], "nothing is asked at a cold start"
    with pytest.raises(_Asked):
        deps.karpenter.list_objects(NODEPOOL)
    assert asked == [deps.cluster], "the objects go through the cluster's client"
    with pytest.raises(_Asked):
        deps.config.load()  # the config is listed through the same objects


def test_a_caller_with_its_own_cluster_passes_its_karpenter_objects() -> None:
    from datetime import UTC, datetime

    from carpool.sim.cluster.simulated import SimulatedCluster

    cluster = SimulatedCluster(lambda: datetime(2026, 5, 1, tzinfo=UTC))
    settings = Settings("demo", table="t")
    deps = aws_wiring.build(settings, cluster=cluster, karpenter=cluster)
    assert deps.karpenter is cluster
    # the config is the cluster's NodePools and EC2NodeClasses: none without the objects to list them from
    assert isinstance(deps.config, ClusterConfigSource)
    with pytest.raises(aws_wiring.NoClusterConfig):
        aws_wiring.build(settings, cluster=cluster)
