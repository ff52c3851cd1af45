"""Every per-process cache of the functions expires by the dependencies' clock, exactly at its TTL, and
follows the clock when the simulation swaps it (`dataclasses.replace(deps, clock=...)`).

Caches: the config's list (`ClusterConfigSource`, 5 s), the AMI source (`CachedAmiSource`, 300 s) and the SSM
reads under it (`SsmParameters`, 300 s), subnets and security groups (`app.discovery`, 5 min), launch
templates (`app.launching`, 300 s), and the stored catalog's re-check (`StoredCatalogSource`, 10 min)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from carpool.adapters.aws.images import AwsAmiSource
from carpool.adapters.aws.ssm import SsmParameters
from carpool.amis import CachedAmiSource
from carpool.api.loader import load
from carpool.app import discovery, launching
from carpool.app.cluster_config_source import CONFIG_RECHECK_SECONDS, ClusterConfigSource
from carpool.app.settings import Settings
from carpool.app.sources import (
    RECHECK_EVERY,
    MemoryCatalogStore,
    StoredCatalog,
    StoredCatalogSource,
)
from carpool.app.wiring import Dependencies
from carpool.catalog import Catalog
from carpool.clocks import TtlCache
from carpool.karpenter_objects import NODEPOOL
from carpool.launch import templates
from carpool.sim.cluster.simulated import SimulatedCluster

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
WALL = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # a clock far from the simulated one
PARAM = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"


class Clock:
    """A datetime clock the test moves by hand (what `Dependencies.clock` is)."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class FakeSsm:
    """boto3's SSM client for GetParameter(s): answers from a dict and counts the calls."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.calls = 0

    def get_parameter(self, Name: str) -> dict[str, Any]:  # noqa: N803 (boto3's spelling)
        self.calls += 1
        return {"Parameter": {"Value": self.values[Name]}}

    def get_parameters(self, Names: list[str]) -> dict[str, Any]:  # noqa: N803
        self.calls += 1
        return {"Parameters": [{"Name": n, "Value": self.values[n]} for n in Names if n in self.values]}


def _deps(clock: Any, *, ami_source: Any = None, config: Any = None, compute: Any = None,
          catalog: Any = None) -> Dependencies:
    return Dependencies(settings=Settings(cluster_name="c"), cluster=SimpleNamespace(), compute=compute or SimpleNamespace(),
                        ledger=SimpleNamespace(), offerings=SimpleNamespace(), capacity=SimpleNamespace(),
                        publisher=SimpleNamespace(), ami_source=ami_source, config=config or SimpleNamespace(),
                        catalog=catalog or SimpleNamespace(), clock=clock)


# -- the TTL cache ---------------------------------------------------------------------------------------
def test_ttl_cache_expires_exactly_at_the_ttl_of_the_clock_it_follows() -> None:
    clock, loads = Clock(), iter(range(1, 10))
    cache = TtlCache(60)
    cache.follow_clock(clock)
    assert cache.get_or_load("k", lambda: next(loads)) == 1
    clock.advance(59.999)
    assert cache.get_or_load("k", lambda: next(loads)) == 1
    clock.advance(0.001)
    assert cache.get_or_load("k", lambda: next(loads)) == 2


def test_ttl_cache_drops_entries_timed_on_another_clock_only() -> None:
    wall, sim = Clock(WALL), Clock(T0)
    cache = TtlCache(60)
    cache.follow_clock(wall)
    cache.put("k", "old")
    cache.follow_clock(wall)  # the same clock again (a `replace` of another field): kept
    assert cache.peek("k") == ("old",)
    cache.follow_clock(sim)  # stored at WALL + 60 s, which on the simulated clock is a year away
    assert cache.peek("k") is None


# -- the config's list -----------------------------------------------------------------------------------
def test_the_config_is_listed_again_exactly_after_the_recheck_on_the_injected_clock() -> None:
    clock = Clock()
    cluster = _cluster_with(_pool("before"))
    source = ClusterConfigSource(cluster, clock=clock)
    assert [p.name for p in source.load().nodepools] == ["before"]
    _apply(cluster, _pool("after"))
    clock.advance(CONFIG_RECHECK_SECONDS - 0.001)
    assert [p.name for p in source.load().nodepools] == ["before"]
    clock.advance(0.001)
    assert [p.name for p in source.load().nodepools] == ["after"]


def test_swapping_the_clock_of_the_dependencies_moves_the_config_cache() -> None:
    wall, sim = Clock(WALL), Clock(T0)
    cluster = _cluster_with(_pool("before"))
    built = _deps(wall, config=ClusterConfigSource(cluster))
    deps = dataclasses.replace(built, clock=sim)
    deps.config.load()
    _apply(cluster, _pool("after"))  # the NodePool is edited (a new name: the old one is deleted)
    sim.advance(CONFIG_RECHECK_SECONDS - 1)
    assert [p.name for p in deps.config.load().nodepools] == ["before"]
    sim.advance(1)
    assert [p.name for p in deps.config.load().nodepools] == ["after"]


def _cluster_with(text: str) -> SimulatedCluster:
    cluster = SimulatedCluster(lambda: T0)
    _apply(cluster, text)
    return cluster


def _apply(cluster: SimulatedCluster, text: str) -> None:
    """`kubectl apply` of the text's objects, and deletion of the NodePools it no longer names."""
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    named = {d["metadata"]["name"] for d in docs if d["kind"] == "NodePool"}
    for pool in cluster.list_objects(NODEPOOL).items:
        if pool["metadata"]["name"] not in named:
            cluster.delete_object(NODEPOOL, pool["metadata"]["name"])
    for doc in docs:
        cluster.apply_object(doc)


def _pool(name: str) -> str:
    return f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: []
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: r
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{id: subnet-0a}}]
  securityGroupSelectorTerms: [{{id: sg-0a}}]
"""


# -- AMIs: the cached source and the SSM reads under it --------------------------------------------------
def test_ssm_parameters_expire_exactly_at_max_age_on_the_followed_clock() -> None:
    clock, ssm = Clock(), FakeSsm({PARAM: "ami-1"})
    params = SsmParameters(ssm, max_age=300)
    params.follow_clock(clock)
    assert params.get_parameter(PARAM) == "ami-1"
    ssm.values[PARAM] = "ami-2"
    clock.advance(299.999)
    assert params.get_parameters([PARAM]) == {PARAM: "ami-1"}
    clock.advance(0.001)
    assert params.get_parameter(PARAM) == "ami-2"


def test_swapping_the_clock_of_the_dependencies_moves_both_ami_caches() -> None:
    """The production chain: `CachedAmiSource` over `AwsAmiSource` over `SsmParameters`, each with a
    300 s cache; after `replace(deps, clock=sim)` a new AMI is seen 300 simulated seconds later."""
    wall, sim, ssm = Clock(WALL), Clock(T0), FakeSsm({PARAM: "ami-1"})
    source = CachedAmiSource(AwsAmiSource(SsmParameters(ssm), ec2_client=object()), 300)
    deps = dataclasses.replace(_deps(wall, ami_source=source), clock=sim)
    assert deps.ami_source.get_parameter(PARAM) == "ami-1"
    ssm.values[PARAM] = "ami-2"  # AWS publishes a new image
    sim.advance(299)
    assert deps.ami_source.get_parameters([PARAM]) == {PARAM: "ami-1"}
    sim.advance(1)
    assert deps.ami_source.get_parameter(PARAM) == "ami-2"
    assert ssm.calls == 2


# -- subnets and security groups -------------------------------------------------------------------------
NODECLASS = load(["""
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
"""]).nodeclasses[0]


class FakeCompute:
    def __init__(self) -> None:
        self.reads = 0
        self.ensured: list[str] = []

    def describe_subnets(self, filters: Any) -> list[dict[str, Any]]:
        self.reads += 1
        return [{"SubnetId": f"subnet-{self.reads}"}]

    def ensure_launch_template(self, request: dict[str, Any]) -> None:
        self.ensured.append(request["LaunchTemplateName"])


def test_subnets_are_read_again_exactly_at_the_ttl() -> None:
    clock, compute = Clock(), FakeCompute()
    deps = _deps(clock, compute=compute)
    assert discovery.subnets(NODECLASS, deps) == [{"SubnetId": "subnet-1"}]
    clock.advance(discovery.TTL.total_seconds() - 0.001)
    assert discovery.subnets(NODECLASS, deps) == [{"SubnetId": "subnet-1"}]
    clock.advance(0.001)
    assert discovery.subnets(NODECLASS, deps) == [{"SubnetId": "subnet-2"}]


def test_subnets_read_on_another_clock_are_read_again() -> None:
    wall, sim, compute = Clock(WALL), Clock(T0), FakeCompute()
    built = _deps(wall, compute=compute)
    discovery.subnets(NODECLASS, built)
    discovery.subnets(NODECLASS, dataclasses.replace(built, clock=sim))  # stamped a year "ahead"
    assert compute.reads == 2


# -- launch templates ------------------------------------------------------------------------------------
def test_launch_templates_are_ensured_again_exactly_at_the_ttl() -> None:
    clock, compute = Clock(), FakeCompute()
    deps = _deps(clock, compute=compute)
    spec = templates.LaunchTemplateSpec("carpool/c/aaaa", "ami-1", "", 29, ("m5.large",), (), {}, ("sg-1",), "p", {})
    plans: Any = [SimpleNamespace(specs=[spec])]
    assert launching.ensure_templates(plans, deps) == {}
    clock.advance(launching.TEMPLATE_TTL_SECONDS - 0.001)
    launching.ensure_templates(plans, deps)
    assert compute.ensured == ["carpool/c/aaaa"]
    clock.advance(0.001)
    launching.ensure_templates(plans, deps)
    assert compute.ensured == ["carpool/c/aaaa"] * 2


# -- the stored catalog's re-check -----------------------------------------------------------------------
class CountingStore(MemoryCatalogStore):
    def __init__(self) -> None:
        super().__init__()
        self.stamps = 0

    def refreshed_at(self, region: str) -> datetime | None:
        self.stamps += 1
        return super().refreshed_at(region)


@pytest.fixture(scope="module")
def encoded_catalog() -> bytes:
    return Catalog.snapshot("us-east-1").encode("test")


def test_the_stored_catalog_is_checked_again_exactly_every_recheck_period(encoded_catalog: bytes) -> None:
    """Its time is the caller's `now` (`deps.clock()` in the use cases), so it follows the clock too."""
    store = CountingStore()
    store.write("us-east-1", StoredCatalog(T0, encoded_catalog))
    source = StoredCatalogSource(store, "us-east-1")
    source.get(T0)
    source.get(T0 + RECHECK_EVERY - timedelta(milliseconds=1))
    assert store.stamps == 0
    source.get(T0 + RECHECK_EVERY)
    assert store.stamps == 1
