"""A node's start-up as on a real cluster: startup taints lifted only by the DaemonSet agent the scenario
declares, a kubelet that never joins still counted as a launch, and the spot pool chosen by real price,
the same one `carpool plan` picks for the same pods and prices."""

from __future__ import annotations

from datetime import UTC, datetime

from carpool import environment
from carpool.adapters.aws import session
from carpool.adapters.aws.catalog import Ec2Catalog, fetch_catalog_inputs
from carpool.api.loader import load
from carpool.app.offline_planning import assemble, plan
from carpool.catalog import builder
from carpool.scheduling.scheduler import ScheduleOptions
from carpool.sim.cluster.kubelet import InstanceFacts, memory_capacity_mib
from carpool.sim.localaws.in_process import ec2_instance_types
from carpool.sim.localaws.server import LocalAws
from carpool.sim.run.scenario import Scenario, load_scenario, resolve_manifest

from .conftest import EXAMPLES, assert_allocatable_parity

SCENARIO = "008-node-startup.yaml"
CILIUM = "node.cilium.io/agent-not-ready"


def test_every_web_pod_runs(scenario_result):
    assert scenario_result.workloads["Deployment/default/web"].pending == 0


def test_the_agent_and_nothing_else_lifted_the_startup_taint_of_each_web_node(scenario_result):
    web = [i for i in scenario_result.launches if i.node_pool == "web" and i.joined]
    assert web
    lifted = {d.message.rsplit(" ", 1)[-1] for d in scenario_result.decisions
              if d.source == "daemonset" and f"cilium removed {CILIUM}" in d.message}
    assert {i.node_name for i in web} <= lifted
    assert not any(d.source == "daemonset" and "karpenter.sh/" in d.message for d in scenario_result.decisions)


def test_the_instance_whose_kubelet_failed_is_a_launch_that_never_joined(scenario_result):
    lost = [i for i in scenario_result.launches if i.node_pool == "batch" and not i.joined]
    assert lost and all(i.node_name is None and "fails to join" in i.join_failure for i in lost)
    assert all(i.joined for i in scenario_result.launches if i.node_pool == "web")


def test_web_nodes_report_the_memory_shortfall(scenario_result):
    truth = load_scenario(EXAMPLES / SCENARIO).truth
    for inst in scenario_result.launches:
        facts = InstanceFacts.from_ec2(ec2_instance_types()[inst.instance_type])
        short = 256 if inst.node_pool == "web" else 0
        assert inst.capacity["memory"] == f"{(memory_capacity_mib(facts, 'al2023', truth) - short) * 1024}Ki", inst


def test_spot_choice_matches_carpool_plan_with_the_same_prices(scenario_result):
    [launch] = [i for i in scenario_result.launches if i.node_pool == "web"][:1]
    assert launch.capacity_type == "spot"
    claim = _planned_claim(load_scenario(EXAMPLES / SCENARIO), "web")
    cheapest = claim.instance_types[0]
    assert (cheapest.name, cheapest.zone, cheapest.capacity_type) == (launch.instance_type, launch.zone, "spot")
    assert abs(cheapest.price - launch.hourly_price) < 1e-9


def test_allocatable_parity(scenario_result):
    assert_allocatable_parity(scenario_result, SCENARIO)


def _planned_claim(sc: Scenario, pool: str):
    """`carpool plan`'s scheduling of the scenario's pods against a catalog read from local EC2 (its spot
    prices included) for the cluster's zones, as the provisioner reads it."""
    with LocalAws(cluster=sc.cluster.name, region=sc.cluster.region) as aws, environment.using(aws.env):
        # carpool's own EC2 client, as the provisioner's (its service model and timestamp parser)
        ec2 = session.client("ec2", region=sc.cluster.region)
        inputs = fetch_catalog_inputs(datetime.now(UTC), Ec2Catalog(client=ec2, region=sc.cluster.region))
    zones = set(sc.cluster.zones)
    inputs["type_offerings"] = [o for o in inputs["type_offerings"] if o["Location"] in zones]
    catalog = builder.from_ec2(**inputs)
    texts = [text for _label, text in sc.manifest_texts()]
    texts += [resolve_manifest(step.apply, sc.base_dir, "workload")[1] for step in sc.workload if step.apply is not None]
    result = plan(assemble(load(texts), catalog=catalog), ScheduleOptions())
    [claim] = [c for c in result.claims if c.pool == pool]
    return claim
