"""`carpool plan` converts each distinct pod shape once: the scheduler inputs and verdicts it produces for
replicas are exactly those of converting and classifying every pod on its own."""

from __future__ import annotations

from pathlib import Path

from carpool.api.loader import load
from carpool.app.offline_planning import assemble
from carpool.catalog import Catalog
from carpool.coexistence import Coexistence
from carpool.scheduling import convert

ROOT = Path(__file__).resolve().parents[3]


def replica(name: str, zone_label: str, *, node_group: bool = False, owner: str = "web-1") -> str:
    selector = "\n  nodeSelector: {eks.amazonaws.com/nodegroup: ng-1}" if node_group else ""
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: shop
  uid: uid-{name}
  labels: {{app: web, shard: "{zone_label}"}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {owner}, uid: rs, controller: true}}]
spec:{selector}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}}}]
  topologySpreadConstraints:
    - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
        labelSelector: {{matchLabels: {{app: web}}}}, matchLabelKeys: [shard]}}
"""


def test_replicas_get_exactly_the_inputs_of_a_pod_by_pod_conversion() -> None:
    docs = [replica(f"a{i}", "one") for i in range(5)] + [replica(f"b{i}", "two") for i in range(3)]
    docs += [replica("c0", "one", owner="web-2"), replica("g0", "one", node_group=True)]
    manifests = load([(ROOT / "examples/karpenter/default.yaml").read_text(), "---".join(docs)])
    inputs = assemble(manifests, catalog=Catalog.snapshot())

    classifier = Coexistence(manifests.nodepools)
    expected = [convert.pod_spec(p) for p in manifests.pods if not classifier.serves(p).leave_alone]
    assert inputs.pods == expected
    assert [p.key for p in inputs.pods] == [f"shop/a{i}" for i in range(5)] + [f"shop/b{i}" for i in range(3)] + ["shop/c0"]
    assert {p.uid for p in inputs.pods} == {f"uid-{n}" for n in ["a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2", "c0"]}
    # matchLabelKeys resolved per pod's own labels, not the first replica's
    assert inputs.pods[5].spread[0].selector != inputs.pods[0].spread[0].selector
    assert inputs.pods[8].owner == "ReplicaSet/web-2"
    assert inputs.servers["shop/g0"][0] == "node-group" and inputs.servers["shop/a3"][0] == "carpool"
    assert inputs.pods[1].requests is not inputs.pods[0].requests  # each pod its own mutable parts
