"""`kubectl get` of Karpenter's kinds on the simulated API server (`carpool.sim.cluster.tables`): the Table
kube-apiserver answers, with the printer columns of Karpenter's CRD files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from carpool.karpenter_objects import NODECLAIM
from carpool.sim.cluster.apiserver import SimApiServer
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.tables import PRINTER_COLUMNS, human_duration

CRDS = Path(__file__).resolve().parents[4] / "tests" / "data" / "karpenter-crds-v1.14.1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("kind", "file"), [("NodePool", "karpenter.sh_nodepools.yaml"),
                                            ("NodeClaim", "karpenter.sh_nodeclaims.yaml"),
                                            ("EC2NodeClass", "karpenter.k8s.aws_ec2nodeclasses.yaml")])
def test_the_columns_are_the_crds(kind, file):
    crd = yaml.safe_load((CRDS / file).read_text())
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    expected = [{"name": c["name"], "type": c["type"], "jsonPath": c["jsonPath"], "priority": c.get("priority", 0)}
                for c in v1["additionalPrinterColumns"]]
    assert PRINTER_COLUMNS[kind] == expected


@pytest.mark.parametrize(("seconds", "words"), [(0, "0s"), (-1.5, "0s"), (-3, "<invalid>"), (119, "119s"), (120, "2m"),
                                                (185, "3m5s"), (600, "10m"), (10799, "179m"), (10800, "3h"),
                                                (11000, "3h3m"), (8 * 3600, "8h"), (48 * 3600, "2d"),
                                                (49 * 3600, "2d1h"), (8 * 86400, "8d"), (800 * 86400, "2y70d")])
def test_ages_are_worded_as_kubectl_words_them(seconds, words):
    assert human_duration(seconds) == words


def test_kubectl_get_nodeclaims_prints_karpenters_columns():
    clock = [NOW]
    cluster = SimulatedCluster(lambda: clock[0])
    cluster.create_object(NODECLAIM, {"metadata": {"name": "c1", "labels": {
        "node.kubernetes.io/instance-type": "m5.large", "karpenter.sh/capacity-type": "spot",
        "karpenter.sh/nodepool": "default"}}, "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}})
    cluster.patch_status(NODECLAIM, "c1", {"nodeName": "n1", "conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-05-01T12:00:00Z"}]})
    clock[0] = NOW + timedelta(minutes=5, seconds=3)
    server = SimApiServer(cluster)
    listed = server.answer("GET", f"{NODECLAIM.path}?fieldSelector=metadata.name%3Dc1", "", b"", TABLE)
    assert listed.code == 200 and (listed.body["kind"], listed.body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    names = [c["name"] for c in listed.body["columnDefinitions"]]
    assert names == ["Name", "Type", "Capacity", "Zone", "Node", "Ready", "Age", "ImageID", "ID", "NodePool",
                     "NodeClass", "Drifted"]
    (row,) = listed.body["rows"]
    assert row["cells"] == ["c1", "m5.large", "spot", None, "n1", "True", "5m3s", None, None, "default", "default", None]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "c1"
    one = server.answer("GET", f"{NODECLAIM.path}/c1?includeObject=None", "", b"", TABLE)
    assert one.body["rows"][0]["object"] is None and one.body["metadata"]["resourceVersion"]
    missing = server.answer("GET", f"{NODECLAIM.path}/nope", "", b"", TABLE)
    assert missing.code == 404 and missing.body["kind"] == "Status"
