"""Scenario files: what parses, and how a bad field is reported."""

from pathlib import Path

import pytest

from carpool.sim.run.scenario import ScenarioError, load_scenario, parse_scenario, resolve_manifest

MINIMAL = {
    "cluster": {"name": "demo", "version": "1.32", "zones": ["us-east-1a"], "cni": {"prefixDelegation": True}},
    "manifests": ["pools.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n", {"kind": "DaemonSet"}],
    "amis": [{"parameter": "/aws/service/x", "name": "al2023-x86", "creationDate": "2025-01-01"}],
    "truth": {"memoryOverheadPercent": {"bottlerocket": 9.0}, "bootSeconds": 20},
    "capacity": [{"instanceType": "c7i-flex.*", "until": 180}],
    "workload": [
        {"at": 60, "scale": {"deployment": "web", "replicas": 40}},
        {"at": 0, "apply": "deploy.yaml"},
        {"at": 300, "spotInterruption": {"nodePool": "flex", "count": 2}},
    ],
    "duration": 900,
    "tickSeconds": 15,
}


def test_parses_camel_case_fields():
    sc = parse_scenario(MINIMAL)
    assert sc.cluster.cni.prefix_delegation is True
    assert sc.truth.boot_seconds == 20 and sc.truth.overhead_percent("bottlerocket") == 9.0
    assert sc.truth.overhead_percent("unknown-family") == 7.5
    assert sc.capacity[0].from_ == 0 and sc.capacity[0].until == 180
    assert sc.capacity[0].error == "InsufficientInstanceCapacity"
    assert [s.at for s in sc.workload] == [0, 60, 300]  # sorted by time
    assert [s.action for s in sc.workload] == ["apply", "scale", "spot_interruption"]
    assert sc.workload[2].spot_interruption.node_pool == "flex"
    assert sc.tick_seconds == 15


def test_bad_field_names_its_path():
    bad = {**MINIMAL, "workload": [{"at": 0, "scale": {"deployment": "web", "replica": 3}}]}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(bad, "demo.yaml")
    text = str(err.value)
    assert "demo.yaml: workload[0].scale.replica: Extra inputs are not permitted" in text
    assert "workload[0].scale.replicas: Field required" in text


def test_bad_value_names_its_path():
    with pytest.raises(ScenarioError, match=r"capacity\[0\]\.error"):
        parse_scenario({**MINIMAL, "capacity": [{"instanceType": "c7i*", "error": "Nope"}]}, "x.yaml")
    with pytest.raises(ScenarioError, match=r"cluster\.version: expected a Kubernetes minor version"):
        parse_scenario({"cluster": {"version": "latest"}}, "x.yaml")


def test_a_step_needs_exactly_one_action():
    with pytest.raises(ScenarioError, match="exactly one of apply, scale"):
        parse_scenario({"workload": [{"at": 0}]})
    with pytest.raises(ScenarioError, match=r"got apply, delete"):
        parse_scenario({"workload": [{"at": 0, "apply": "x.yaml", "delete": {"deployment": "web"}}]})


def test_capacity_window_must_be_ordered():
    with pytest.raises(ScenarioError, match="until"):
        parse_scenario({"capacity": [{"instanceType": "m5.large", "from": 100, "until": 50}]})


NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node-role
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


def test_load_reads_file_and_resolves_relative_manifests(tmp_path: Path):
    (tmp_path / "pools.yaml").write_text(NODECLASS)
    (tmp_path / "demo.yaml").write_text("cluster: {name: demo}\nmanifests: [pools.yaml]\n")
    sc = load_scenario(tmp_path / "demo.yaml")
    assert sc.name == "demo"
    [(label, text)] = sc.manifest_texts()
    assert label.endswith("pools.yaml") and text == NODECLASS


def test_missing_manifest_file_is_reported(tmp_path: Path):
    with pytest.raises(ScenarioError, match="manifest file 'nope.yaml' not found"):
        resolve_manifest("nope.yaml", tmp_path, "manifests[0]")


def test_not_yaml_or_not_a_mapping(tmp_path: Path):
    (tmp_path / "a.yaml").write_text("cluster: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("- 1\n")
    with pytest.raises(ScenarioError, match="a scenario is a mapping"):
        load_scenario(tmp_path / "b.yaml")
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")


def test_inline_manifests_become_text():
    label, text = resolve_manifest({"kind": "Pod", "metadata": {"name": "p"}}, Path("."), "m")
    assert "kind: Pod" in text
    _, text = resolve_manifest([{"kind": "A"}, {"kind": "B"}], Path("."), "m")
    assert text.count("kind:") == 2


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[4].joinpath("examples").glob("*.yaml")))
def test_every_example_scenario_parses(path: Path):
    sc = load_scenario(path)
    assert sc.manifest_texts()  # every manifest file it names exists


def test_agents_and_kubelet_faults_parse():
    sc = parse_scenario({
        "agents": [{"name": "cilium", "removesTaint": "node.cilium.io/agent-not-ready", "delaySeconds": 15,
                    "nodes": {"nodePool": "web"}}],
        "kubelets": [{"nodePool": "batch", "failToJoin": True, "count": 1},
                     {"instanceType": "c6a.*", "extraJoinSeconds": 90, "memoryShortMiB": 256}],
    })
    [agent] = sc.agents
    assert agent.after == "registered" and agent.delay_seconds == 15
    assert agent.nodes.matches("web", "m5.large", "us-east-1a", "spot")
    assert not agent.nodes.matches("batch", "m5.large", "us-east-1a", "spot")
    lost, slow = sc.kubelets
    assert lost.fail_to_join and lost.count == 1
    assert slow.memory_short_mib == 256 and slow.matches("any", "c6a.large", "us-east-1b", "on-demand")
    assert not slow.matches("any", "c7a.large", "us-east-1b", "on-demand")


def test_an_agent_may_not_remove_karpenters_taints():
    with pytest.raises(ScenarioError, match=r"agents\[0\]\.removesTaint"):
        parse_scenario({"agents": [{"name": "x", "removesTaint": "karpenter.sh/unregistered"}]})


def test_kubelet_fault_fields_are_checked():
    with pytest.raises(ScenarioError, match=r"kubelets\[0\]\.memoryShortMiB"):
        parse_scenario({"kubelets": [{"memoryShortMiB": -1}]})
    with pytest.raises(ScenarioError, match=r"kubelets\[0\]\.failTojoin"):
        parse_scenario({"kubelets": [{"failTojoin": True}]})


@pytest.mark.parametrize("field", ["disruptionEverySeconds", "visibilityTimeoutSeconds"])
def test_a_schedule_or_queue_setting_of_its_own_is_refused_by_name(field):
    """Functions run on their deployed triggers: a scenario cannot make them run more often."""
    with pytest.raises(ScenarioError, match=field):
        parse_scenario({**MINIMAL, field: 30}, "s.yaml")


def test_a_step_is_named_by_its_place_in_the_file_not_its_place_in_time(tmp_path: Path):
    (tmp_path / "demo.yaml").write_text(
        "cluster: {name: demo}\n"
        "manifests:\n  - " + NODECLASS.replace("\n", "\n    ").rstrip() + "\n"
        "workload:\n"
        "  - {at: 120, scale: {deployment: api, replicas: 2}}\n"
        "  - {at: 0, delete: {deployment: web}}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(tmp_path / "demo.yaml")
    lines = str(err.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["workload[1].delete.deployment", "workload[0].scale.deployment"]
