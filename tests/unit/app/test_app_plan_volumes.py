"""`carpool plan` places a pod where its persistent volumes are: a bound EBS volume's zone (written with the
EBS CSI driver's own zone key), or a WaitForFirstConsumer class's allowed zones; a pod whose claim is missing
is reported unschedulable with the reason, and replicas with their own claims get their own zones."""

from __future__ import annotations

from typing import Any

from carpool.api.loader import load
from carpool.app.offline_planning import assemble, plan
from carpool.scheduling.scheduler import ScheduleOptions

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}
POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
TYPES = [{"name": "m5.large", "cpu": 2, "memoryMiB": 8192, "pods": 29,
          "offerings": [{"zone": z, "capacityType": "on-demand", "price": 0.096} for z in ZONES]}]
GP3 = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
       "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
       "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone",
                                                         "values": ["us-east-1c"]}]}]}


def ebs_volume(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"}, "storageClassName": "gp3",
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}]}]}}}}


def claim(name: str, volume: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "db"}
    spec: dict[str, Any] = {"storageClassName": "gp3"}
    if volume:
        spec["volumeName"] = volume
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def db_pod(name: str, claim_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "db", "labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}}


def zones_by_pod(docs: list[dict[str, Any]]) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    result = plan(assemble(load([NODECLASS, POOL, GP3, *docs]), synthetic=TYPES),
                  ScheduleOptions(max_instance_types=None))
    zones = {pod: sorted(c.requirements["topology.kubernetes.io/zone"].values) for c in result.claims for pod in c.pods}
    return zones, result.unschedulable


def test_each_replica_goes_to_its_own_volume_zone() -> None:
    docs = [ebs_volume("pv-0", "us-east-1a"), ebs_volume("pv-1", "us-east-1b"),
            claim("data-db-0", "pv-0"), claim("data-db-1", "pv-1"), claim("data-db-2"),
            db_pod("db-0", "data-db-0"), db_pod("db-1", "data-db-1"), db_pod("db-2", "data-db-2")]
    zones, unschedulable = zones_by_pod(docs)
    assert unschedulable == {}
    assert zones == {"db/db-0": ["us-east-1a"], "db/db-1": ["us-east-1b"], "db/db-2": ["us-east-1c"]}


def test_a_pod_whose_claim_is_missing_is_reported_with_the_reason() -> None:
    zones, unschedulable = zones_by_pod([db_pod("db-0", "data-db-0")])
    assert zones == {}
    assert unschedulable == {"db/db-0": {"*": "persistentvolumeclaim db/data-db-0 not found"}}


def test_a_pod_whose_affinity_excludes_its_volume_zone_is_reported_with_the_reason() -> None:
    pod = db_pod("db-0", "data-db-0")
    pod["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "us-east-1a"}
    zones, unschedulable = zones_by_pod([ebs_volume("pv-0", "us-east-1b"), claim("data-db-0", "pv-0"), pod])
    assert zones == {}
    assert "incompatible volume requirements" in unschedulable["db/db-0"]["*"]
