"""The Cluster port in memory: evictions and PDBs, node deletion, DaemonSet pods, watch, CNI env."""

import pytest

from carpool.ports import EvictionBlocked
from carpool.sim.cluster import SimulatedCluster
from carpool.sim.scenario import Cni
from carpool.taints import Taint

from .conftest import make_node, make_pod

OWNER = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]


def pdb(min_available=None, max_unavailable=None):
    spec = {"selector": {"matchLabels": {"app": "web"}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"}, "spec": spec}


def running_web(cluster, n=3):
    cluster.add_node(make_node("n1", cpu="8", memory="32Gi"))
    for i in range(n):
        cluster.add_pod(make_pod(f"web-{i}", owners=OWNER), controller="Deployment/default/web")
    cluster.bind()


def test_eviction_honours_min_available(cluster):
    running_web(cluster)
    cluster.add_pdb(pdb(min_available=2))
    cluster.evict("default/web-0")
    with pytest.raises(EvictionBlocked, match="PodDisruptionBudget default/web"):
        cluster.evict("default/web-1")
    # the evicted pod came back under a new name, pending
    pending = [p for p in cluster.list_pods() if not p.spec.node_name]
    assert len(pending) == 1 and pending[0].name.startswith("web-0-r")


def test_eviction_honours_max_unavailable_percent(cluster):
    running_web(cluster, n=4)
    cluster.add_pdb(pdb(max_unavailable="25%"))
    cluster.evict("default/web-0")
    with pytest.raises(EvictionBlocked):
        cluster.evict("default/web-1")


def test_evicting_a_missing_pod_is_not_an_error(cluster):
    cluster.evict("default/none")


def test_delete_node_takes_pods_and_controllers_recreate_them(cluster):
    running_web(cluster)
    cluster.add_pod(make_pod("bare-0"))
    cluster.bind()
    cluster.delete_node("n1")
    names = sorted(p.name for p in cluster.list_pods())
    assert "bare-0" not in names
    assert len([n for n in names if n.startswith("web-")]) == 3
    assert cluster.list_nodes() == []


def test_taint_and_cordon_show_on_the_node(cluster):
    cluster.add_node(make_node("n1"))
    cluster.taint("n1", Taint("karpenter.sh/disrupted", "NoSchedule"))
    cluster.taint("n1", Taint("karpenter.sh/disrupted", "NoSchedule"))
    cluster.cordon("n1")
    node = cluster.list_nodes()[0]
    assert node.spec.unschedulable is True
    assert [t.key for t in node.spec.taints] == ["karpenter.sh/disrupted"]


def test_daemonset_pods_follow_nodes(cluster):
    cluster.add_daemonset({"apiVersion": "apps/v1", "kind": "DaemonSet",
                           "metadata": {"name": "agent", "namespace": "kube-system"},
                           "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}}})
    cluster.add_node(make_node("n1"))
    cluster.add_node(make_node("tainted", taints=[{"key": "x", "effect": "NoSchedule"}]))
    ds_pods = [p for p in cluster.list_pods() if p.is_daemonset_pod()]
    assert [p.spec.node_name for p in ds_pods] == ["n1"]
    assert not ds_pods[0].is_provisionable()


def test_watch_reports_changes_since_a_version(cluster):
    cluster.add_node(make_node("n1"))
    first = list(cluster.watch({}, 0))
    assert [(e.type, e.kind) for e in first] == [("ADDED", "Node")]
    rv = cluster.resource_version
    cluster.add_pod(make_pod("web-0"))
    cluster.bind()
    events = list(cluster.watch({"Pod": rv, "Node": rv}, 0))
    # one event per object: its latest state (bound to n1)
    assert [(e.kind, e.obj.spec.node_name) for e in events] == [("Pod", "n1")]
    assert list(cluster.watch({"pods": cluster.resource_version, "nodes": cluster.resource_version}, 0)) == []


def test_cni_env_follows_the_scenario(clock):
    c = SimulatedCluster(clock, Cni(prefix_delegation=True))
    assert c.cni_env()["ENABLE_PREFIX_DELEGATION"] == "true"
    assert c.cni_env()["AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"] == "false"
