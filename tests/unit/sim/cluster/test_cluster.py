"""The Cluster port in memory: evictions and PDBs, node deletion, DaemonSet pods, watch, CNI env; and the
API server's answers (`carpool.sim.cluster.apiserver`): eviction Status bodies, paginated lists whose continue
token expires, node writes to a node that is gone."""

import base64
import json

import pytest

from carpool.ports import EvictionBlocked, NodeGone
from carpool.sim.cluster.api_answers import MULTIPLE_PDBS
from carpool.sim.cluster.apiserver import INCONSISTENT_CONTINUE, ListPages
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Cni
from carpool.taints import Taint

from ..conftest import make_node, make_pod

OWNER = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]


def pdb(min_available=None, max_unavailable=None, name="web", selector=None):
    spec = {"selector": {"matchLabels": {"app": "web"}} if selector is None else selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}


def running_web(cluster, n=3):
    cluster.add_node(make_node("n1", cpu="8", memory="32Gi"))
    for i in range(n):
        cluster.add_pod(make_pod(f"web-{i}", owners=OWNER), controller="Deployment/default/web")
    cluster.bind()


def test_eviction_honours_min_available(cluster):
    running_web(cluster)
    cluster.add_pdb(pdb(min_available=2))
    cluster.evict("default/web-0")
    with pytest.raises(EvictionBlocked, match="disruption budget web needs 2 healthy pods and has 2 currently"):
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


# -- the eviction subresource's answers ----------------------------------------------------------------------
def test_a_pod_selected_by_two_budgets_is_refused_with_500_and_stays(cluster):
    running_web(cluster)
    cluster.add_pdb(pdb(max_unavailable=3))  # either budget alone would allow the eviction
    cluster.add_pdb(pdb(max_unavailable=3, name="web-all", selector={"matchExpressions": [
        {"key": "app", "operator": "Exists"}]}))
    answer = cluster.eviction("default/web-0")
    assert answer.code == 500
    assert answer.body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": MULTIPLE_PDBS, "code": 500}
    with pytest.raises(EvictionBlocked, match="more than one PodDisruptionBudget"):
        cluster.evict("default/web-1")
    assert {p.name for p in cluster.list_pods()} == {"web-0", "web-1", "web-2"}


def test_a_budget_out_of_disruptions_answers_429_with_its_cause(cluster):
    running_web(cluster)
    cluster.add_pdb(pdb(min_available=3))
    answer = cluster.eviction("default/web-0")
    assert answer.code == 429 and answer.body["reason"] == "TooManyRequests"
    assert answer.body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert answer.body["details"]["causes"] == [{"reason": "DisruptionBudget", "message":
                                                 "The disruption budget web needs 3 healthy pods and has 3 currently"}]


def test_pending_pods_and_empty_selectors_do_not_consult_budgets(cluster):
    running_web(cluster)
    cluster.add_pdb(pdb(min_available=3))
    cluster.add_pdb(pdb(min_available=3, name="everything", selector={}))  # matches nothing for eviction
    cluster.add_pod(make_pod("web-9", cpu="64"))  # no room: stays Pending
    cluster.bind()
    assert cluster.eviction("default/web-9").code == 201  # Pending: deleted without a budget check
    assert cluster.eviction("default/web-0").code == 429  # only the `web` budget counts
    assert cluster.eviction("default/none").body["reason"] == "NotFound"


# -- writes to a node that is gone ------------------------------------------------------------------------
def test_cordon_taint_and_patch_of_a_gone_node(cluster):
    with pytest.raises(NodeGone):
        cluster.cordon("gone")
    with pytest.raises(NodeGone):
        cluster.taint("gone", Taint("karpenter.sh/disrupted", "NoSchedule"))
    answer = cluster.merge_patch_node("gone", {"spec": {"unschedulable": True}})
    assert answer.code == 404 and answer.body["message"] == 'nodes "gone" not found'
    assert answer.body["details"] == {"name": "gone", "kind": "nodes"}


def test_merge_patch_of_a_node_honours_its_resource_version(cluster):
    cluster.add_node(make_node("n1"))
    read = cluster.node_raw("n1")["metadata"]["resourceVersion"]
    cluster.taint("n1", Taint("example.com/other-writer", "NoSchedule"))  # written since it was read
    rv = cluster.node_raw("n1")["metadata"]["resourceVersion"]
    stale = cluster.merge_patch_node("n1", {"metadata": {"resourceVersion": read}, "spec": {"unschedulable": True}})
    assert stale.code == 409 and stale.body["reason"] == "Conflict"
    done = cluster.merge_patch_node("n1", {"metadata": {"resourceVersion": rv}, "spec": {"unschedulable": True}})
    assert done.code == 200 and done.body["spec"]["unschedulable"] is True
    assert int(done.body["metadata"]["resourceVersion"]) > int(rv)


# -- paginated lists ------------------------------------------------------------------------------------------
def _names(page):
    return [i["metadata"]["name"] for i in page.body["items"]]


def test_lists_are_paged_from_a_snapshot_of_their_first_page(cluster):
    for i in range(5):
        cluster.add_pod(make_pod(f"p-{i}"))
    pages = ListPages(cluster)
    first = pages.page("pods", 2, None)
    assert _names(first) == ["p-0", "p-1"] and first.body["metadata"]["remainingItemCount"] == 3
    cluster.add_pod(make_pod("p-00"))  # after the first page: not in this list (one point in time)
    second = pages.page("pods", 2, first.body["metadata"]["continue"])
    third = pages.page("pods", 2, second.body["metadata"]["continue"])
    assert _names(second) + _names(third) == ["p-2", "p-3", "p-4"]
    assert "continue" not in third.body["metadata"]
    assert third.body["metadata"]["resourceVersion"] == first.body["metadata"]["resourceVersion"]


def test_an_expired_continue_token_answers_410_with_an_inconsistent_token(cluster):
    for i in range(5):
        cluster.add_pod(make_pod(f"p-{i}"))
    pages = ListPages(cluster)
    first = pages.page("pods", 2, None)
    pages.expire_next_continue()
    gone = pages.page("pods", 2, first.body["metadata"]["continue"])
    assert gone.code == 410 and gone.body["reason"] == "Expired"
    assert gone.body["message"] == INCONSISTENT_CONTINUE
    assert gone.body["message"].startswith("The provided continue parameter is too old")
    token = gone.body["metadata"]["continue"]
    assert json.loads(base64.b64decode(token))["rv"] == -1  # resumes at the latest revision
    assert _names(pages.page("pods", 10, token)) == ["p-2", "p-3", "p-4"]
    fresh = pages.page("pods", 2, None)  # a new list is not affected
    assert fresh.code == 200 and _names(fresh) == ["p-0", "p-1"]


def test_a_pod_is_copied_unless_the_caller_hands_it_over(cluster):
    """A manifest dict the caller keeps using must not change the stored pod; a handed-over dict is
    stored as it is (no copy of every pod of a burst)."""
    kept = make_pod("kept")
    cluster.add_pod(kept)
    kept["metadata"]["labels"] = {"changed": "later"}
    assert "changed" not in (cluster.pods["default/kept"].raw["metadata"].get("labels") or {})
    given = make_pod("given")
    cluster.add_pod(given, owned=True)
    assert cluster.pods["default/given"].raw["metadata"] is given["metadata"]
    assert cluster.pods["default/given"].raw["status"]["phase"] == "Pending"
