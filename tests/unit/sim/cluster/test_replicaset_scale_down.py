"""Scaling a workload down removes the pods its controller would (`ActivePodsWithRanks`, StatefulSet ordinals)."""

from datetime import timedelta
from typing import Any

from carpool.api.loader import load
from carpool.sim.cluster.specs import Scale
from carpool.sim.cluster.workload import POD_DELETION_COST, WorkloadDriver, pods_to_delete

from ..conftest import make_node

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 5
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 256Mi}}}]
"""

STATEFULSET = DEPLOYMENT.replace("kind: Deployment", "kind: StatefulSet").replace("name: web,", "name: db,")


def where(cluster, prefix: str) -> dict[str, str | None]:
    return {k.split("/", 1)[1]: r.raw["spec"].get("nodeName") for k, r in cluster.pods.items()
            if k.startswith(f"default/{prefix}")}


def test_scale_down_removes_unbound_pods_then_those_on_the_most_crowded_node(cluster, clock):
    cluster.add_node(make_node("n1", cpu="1.5", memory="8Gi"))  # three pods
    cluster.add_node(make_node("n2", cpu="4", memory="8Gi"))
    driver = WorkloadDriver(cluster, load=load)
    driver.apply([DEPLOYMENT])
    cluster.bind()
    assert where(cluster, "web") == {"web-0": "n1", "web-1": "n1", "web-2": "n1", "web-3": "n2", "web-4": "n2"}
    clock.advance(60)
    assert driver.scale(Scale(deployment="web", replicas=7)) == 2  # web-5 and web-6, not bound yet
    assert driver.scale(Scale(deployment="web", replicas=3)) == -4
    # the unbound two first, then two of n1's three (n1 holds more of the set than n2)
    assert where(cluster, "web") == {"web-0": "n1", "web-3": "n2", "web-4": "n2"}


def test_scale_down_takes_the_crowded_node_first_then_the_pod_ready_most_recently(cluster, clock):
    cluster.add_node(make_node("n1", cpu="1", memory="8Gi"))  # two pods
    cluster.add_node(make_node("n2", cpu="0.5", memory="8Gi"))  # one pod
    driver = WorkloadDriver(cluster, load=load)
    driver.apply([DEPLOYMENT.replace("replicas: 5", "replicas: 1")])
    cluster.bind()
    clock.advance(3600)
    driver.scale(Scale(deployment="web", replicas=3))
    cluster.bind()
    assert where(cluster, "web") == {"web-0": "n1", "web-1": "n1", "web-2": "n2"}
    driver.scale(Scale(deployment="web", replicas=2))
    assert where(cluster, "web") == {"web-0": "n1", "web-2": "n2"}  # n1's newer pod, not the newest
    clock.advance(60)
    driver.scale(Scale(deployment="web", replicas=1))
    assert where(cluster, "web") == {"web-0": "n1"}  # ready an hour before web-2


def test_statefulset_scale_down_removes_the_highest_ordinals(cluster):
    cluster.add_node(make_node("n1", cpu="8", memory="8Gi"))
    driver = WorkloadDriver(cluster, load=load)
    driver.apply([STATEFULSET])
    assert driver.scale(Scale(deployment="db", replicas=2)) == -3
    assert sorted(where(cluster, "db")) == ["db-0", "db-1"]


def pod(name: str, node: str = "", phase: str = "Running", ready: bool = True, restarts: int = 0,
        created: str = "2025-01-06T08:00:00Z", ready_at: str = "2025-01-06T08:00:10Z", **annotations: str) -> tuple[str, dict[str, Any]]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_at}]
    return f"default/{name}", {
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created, "annotations": annotations},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": [{"name": "c", "restartCount": restarts}]}}


def test_replicaset_ranking_follows_active_pods_with_ranks(clock):
    pods = [
        pod("steady", "n1"),
        pod("crowded-a", "n2"), pod("crowded-b", "n2", restarts=4),
        pod("costly", "n3", **{POD_DELETION_COST: "100"}),
        pod("cheap", "n4", **{POD_DELETION_COST: "-5"}),
        pod("unready", "n5", ready=False),
        pod("unknown", "n6", phase="Unknown"),
        pod("scheduled-pending", "n7", phase="Pending", ready=False),
        pod("unbound", phase="Pending", ready=False),
        pod("fresh", "n8", ready_at="2025-01-06T08:59:00Z"),
    ]
    now = clock.now() + timedelta(hours=1)  # clock starts 2025-01-06T09:00Z
    order = pods_to_delete("Deployment", pods, len(pods), now)
    assert order == ["default/unbound", "default/scheduled-pending", "default/unknown", "default/unready",
                     "default/cheap", "default/crowded-b", "default/crowded-a", "default/fresh",
                     "default/steady", "default/costly"]


def test_a_job_ignores_ranks_and_costs(clock):
    pods = [pod("a", "n1", **{POD_DELETION_COST: "-5"}), pod("b", "n2", ready_at="2025-01-06T08:30:00Z"), pod("c", "n2")]
    assert pods_to_delete("Job", pods, 3, clock.now()) == ["default/b", "default/c", "default/a"]
