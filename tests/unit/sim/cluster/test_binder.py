"""The scheduler-lite binder: which pending pods it binds where, and what it leaves Unschedulable."""

from carpool.sim.cluster.simulated import pod_unschedulable

from ..conftest import make_node, make_pod


def node_of(cluster, key):
    return cluster.pods[key].raw["spec"].get("nodeName")


def test_binds_pods_that_fit_and_leaves_the_rest_unschedulable(cluster):
    cluster.add_node(make_node("n1", cpu="2", memory="8Gi"))
    for i in range(5):
        cluster.add_pod(make_pod(f"web-{i}", cpu="500m"))
    stats = cluster.bind()
    assert stats.bound == 4 and stats.pending == 1
    assert [node_of(cluster, f"default/web-{i}") for i in range(4)] == ["n1"] * 4
    left = cluster.pods["default/web-4"].raw
    assert node_of(cluster, "default/web-4") is None and pod_unschedulable(left)
    assert cluster.list_pods()[4].is_provisionable()


def test_memory_and_pod_slots_count_too(cluster):
    cluster.add_node(make_node("small", cpu="16", memory="2Gi", pods="3"))
    cluster.add_pod(make_pod("big-0", cpu="100m", memory="3Gi"))
    for i in range(4):
        cluster.add_pod(make_pod(f"tiny-{i}", cpu="10m", memory="10Mi"))
    cluster.bind()
    assert node_of(cluster, "default/big-0") is None
    assert sum(1 for i in range(4) if node_of(cluster, f"default/tiny-{i}")) == 3


def test_not_ready_and_cordoned_nodes_take_nothing(cluster):
    cluster.add_node(make_node("booting", ready=False))
    cluster.add_node(make_node("cordoned"))
    cluster.cordon("cordoned")
    cluster.add_pod(make_pod("web-0"))
    assert cluster.bind().bound == 0


def test_taints_need_tolerations(cluster):
    cluster.add_node(make_node("gpu", taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]))
    cluster.add_pod(make_pod("plain-0"))
    cluster.add_pod(make_pod("tolerant-0", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]))
    cluster.bind()
    assert node_of(cluster, "default/plain-0") is None
    assert node_of(cluster, "default/tolerant-0") == "gpu"


def test_prefer_no_schedule_taint_does_not_block(cluster):
    cluster.add_node(make_node("soft", taints=[{"key": "x", "effect": "PreferNoSchedule"}]))
    cluster.add_pod(make_pod("web-0"))
    assert cluster.bind().bound == 1


def test_node_selector_and_required_affinity(cluster):
    cluster.add_node(make_node("flex", labels={"karpenter.sh/nodepool": "flex", "karpenter.k8s.aws/instance-family": "c7i-flex"}))
    cluster.add_node(make_node("general", labels={"karpenter.sh/nodepool": "general", "karpenter.k8s.aws/instance-family": "m7i"}))
    cluster.add_pod(make_pod("sel-0", nodeSelector={"karpenter.sh/nodepool": "general"}))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c7*"]}]}]}}}
    cluster.add_pod(make_pod("aff-0", affinity=affinity))
    cluster.add_pod(make_pod("nowhere-0", nodeSelector={"karpenter.sh/nodepool": "missing"}))
    cluster.bind()
    assert node_of(cluster, "default/sel-0") == "general"
    assert node_of(cluster, "default/aff-0") == "flex"
    assert node_of(cluster, "default/nowhere-0") is None


def test_unschedulable_marking_happens_once(cluster):
    cluster.add_pod(make_pod("web-0"))
    assert cluster.bind().newly_unschedulable == 1
    assert cluster.bind().newly_unschedulable == 0


def test_a_node_added_later_takes_waiting_pods_and_wait_is_recorded(cluster, clock):
    cluster.add_pod(make_pod("web-0"))
    cluster.bind()
    clock.advance(55)
    cluster.add_node(make_node("n1"))
    assert cluster.bind().bound == 1
    assert cluster.unbound_seconds == [55.0]


def test_many_identical_pods_bind_quickly_by_signature(cluster):
    for n in range(50):
        cluster.add_node(make_node(f"n{n}", cpu="4", memory="16Gi", pods="110"))
    for i in range(2000):
        cluster.add_pod(make_pod(f"web-{i}", cpu="100m", memory="128Mi"))
    stats = cluster.bind()
    assert stats.bound == 2000  # 50 nodes x 40 pods (cpu-bound)
