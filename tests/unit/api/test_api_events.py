"""EventBridge events: PutEvents builders, round trips through parsing, and errors naming event and field."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.api import events as ev
from carpool.api.k8s import Node, Pod
from carpool.api.loader import load

NOW = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web-7
  namespace: shop
  uid: 0b7c1a2e-0000-4000-8000-000000000001
  generation: 1
  resourceVersion: "4711"
  creationTimestamp: "2024-05-01T12:29:58Z"
  labels: {app: web}
  annotations: {karpenter.sh/do-not-disrupt: "true"}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d4f, uid: u1, controller: true}]
spec:
  priorityClassName: high
  priority: 1000
  nodeSelector: {kubernetes.io/arch: arm64}
  tolerations: [{key: batch, operator: Exists}]
  overhead: {cpu: 10m}
  initContainers:
    - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 100m}}}
  containers:
    - name: app
      resources: {limits: {cpu: "1", memory: 1Gi}}
      ports: [{containerPort: 80, hostPort: 8080}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
          topologyKey: kubernetes.io/hostname
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
       labelSelector: {matchLabels: {app: web}}}
status:
  phase: Pending
  conditions:
    - {type: PodScheduled, status: "False", reason: Unschedulable, message: "0/3 nodes are available"}
"""


def a_pod() -> Pod:
    [pod] = load(POD_YAML).pods
    return pod


def aws_event(detail_type: str, detail: dict[str, Any], source: str = "aws.ec2") -> dict[str, Any]:
    return {
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": "2024-05-01T12:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:ec2:us-east-1a:instance/i-1234567890abcdef0"],
        "detail": detail,
    }


# --- cluster events -------------------------------------------------------------------------------------
def test_pod_unschedulable_entry_shape() -> None:
    entry = ev.pod_unschedulable_entry("prod", a_pod(), NOW, "carpool-bus")
    assert entry["Source"] == ev.SOURCE == "carpool.cluster"
    assert entry["DetailType"] == "Pod Unschedulable"
    assert entry["EventBusName"] == "carpool-bus"
    assert entry["Time"] == NOW
    detail = json.loads(entry["Detail"])
    assert detail["cluster"] == "prod" and detail["observedAt"] == "2024-05-01T12:30:00Z"
    assert detail["pod"]["spec"]["priorityClassName"] == "high"
    assert "nominatedNodeName" not in detail["pod"]["status"]  # exclude_none
    assert len(json.dumps(entry, default=str)) < ev.MAX_ENTRY_BYTES


def test_pod_round_trips_through_the_event() -> None:
    pod = a_pod()
    entry = ev.pod_unschedulable_entry("prod", pod, NOW, "carpool-bus")
    event = ev.parse_cluster_event(ev.delivered_event(entry, event_id="e-1"))
    assert isinstance(event, ev.PodUnschedulableEvent)
    assert event.detail.pod == pod
    assert event.detail.pod.requests() == pod.requests() == {"cpu": 1110, "memory": 2**30, "pods": 1}
    assert event.detail.pod.is_provisionable()
    assert event.detail.observed_at == NOW and event.time == NOW
    assert event.detail_type == ev.POD_UNSCHEDULABLE and event.id == "e-1"


def test_node_events_round_trip_from_json_text() -> None:
    node = Node.model_validate(
        {
            "metadata": {"name": "ip-1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0abc"},
            "status": {"allocatable": {"cpu": "1930m"}},
        }
    )
    registered = ev.delivered_event(ev.node_registered_entry("prod", node, NOW, "bus"), event_id="e-2")
    parsed = ev.parse_cluster_event(json.dumps(registered))
    assert isinstance(parsed, ev.NodeRegisteredEvent) and parsed.detail.node == node
    deleted = ev.delivered_event(
        ev.node_deleted_entry("prod", "ip-1", "aws:///us-east-1a/i-0abc", NOW, "bus"), event_id="e-3"
    )
    assert deleted["detail"] == {
        "cluster": "prod",
        "nodeName": "ip-1",
        "providerId": "aws:///us-east-1a/i-0abc",
    }
    parsed_deleted = ev.parse_cluster_event(deleted)
    assert isinstance(parsed_deleted, ev.NodeDeletedEvent)
    assert parsed_deleted.detail.provider_id == "aws:///us-east-1a/i-0abc"


def test_bad_cluster_event_names_event_and_field() -> None:
    raw = ev.delivered_event(ev.pod_unschedulable_entry("prod", a_pod(), NOW, "bus"), event_id="e-9")
    raw["detail"]["pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "a lot"
    del raw["detail"]["observedAt"]
    with pytest.raises(ev.EventError) as info:
        ev.parse_cluster_event(raw)
    message = str(info.value)
    assert message.startswith("Pod Unschedulable event e-9: ")
    assert "detail.pod.spec.containers[0].resources.requests[cpu]: invalid quantity 'a lot'" in message
    assert "detail.observedAt: required field is missing" in message
    assert info.value.detail_type == "Pod Unschedulable" and info.value.event_id == "e-9"
    assert len(info.value.problems) == 2


def test_cluster_parser_rejects_aws_events_and_wrong_source() -> None:
    with pytest.raises(
        ev.EventError, match="unsupported detail-type 'EC2 Spot Instance Interruption Warning'"
    ):
        ev.parse_cluster_event(
            aws_event(ev.SPOT_INTERRUPTION, {"instance-id": "i-1", "instance-action": "stop"})
        )
    raw = ev.delivered_event(ev.node_deleted_entry("prod", "n", None, NOW, "bus"), event_id="e-4")
    raw["source"] = "aws.ec2"
    with pytest.raises(
        ev.EventError, match=r"Node Deleted event e-4: source: Input should be 'carpool.cluster'"
    ):
        ev.parse_cluster_event(raw)


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", json.dumps({"id": "x"})])
def test_malformed_events(raw: str) -> None:
    with pytest.raises(ev.EventError):
        ev.parse_cluster_event(raw)


# --- AWS events -----------------------------------------------------------------------------------------
def test_spot_interruption() -> None:
    event = ev.parse_aws_event(
        aws_event(
            ev.SPOT_INTERRUPTION, {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"}
        )
    )
    assert isinstance(event, ev.SpotInterruptionEvent)
    assert event.detail.instance_action == "terminate"
    assert event.instance_ids() == ["i-1234567890abcdef0"]


def test_rebalance_and_state_change() -> None:
    rebalance = ev.parse_aws_event(aws_event(ev.REBALANCE_RECOMMENDATION, {"instance-id": "i-0abc"}))
    assert isinstance(rebalance, ev.RebalanceRecommendationEvent) and rebalance.instance_ids() == ["i-0abc"]
    change = ev.parse_aws_event(
        json.dumps(aws_event(ev.INSTANCE_STATE_CHANGE, {"instance-id": "i-0abc", "state": "shutting-down"}))
    )
    assert isinstance(change, ev.InstanceStateChangeEvent) and change.detail.state == "shutting-down"


def test_health_event() -> None:
    detail = {
        "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x",
        "service": "EC2",
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": "scheduledChange",
        "startTime": "Sat, 05 Jun 2024 15:10:09 GMT",
        "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
        "affectedEntities": [
            {"entityValue": "i-abcd1111"},
            {"entityValue": "vol-1"},
            {"entityValue": "i-abcd2222"},
        ],
    }
    event = ev.parse_aws_event(aws_event(ev.HEALTH_EVENT, detail, source="aws.health"))
    assert isinstance(event, ev.HealthEvent)
    assert event.detail.event_type_category == "scheduledChange"
    assert event.instance_ids() == ["i-abcd1111", "i-abcd2222"]


def test_bad_aws_event_names_event_and_field() -> None:
    with pytest.raises(ev.EventError) as info:
        ev.parse_aws_event(aws_event(ev.SPOT_INTERRUPTION, {"instance-action": "terminate"}))
    assert str(info.value) == (
        "EC2 Spot Instance Interruption Warning event 12345678-1234-1234-1234-123456789012: "
        "detail.instance-id: required field is missing"
    )
    assert info.value.problems == [("detail.instance-id", "required field is missing")]


def test_aws_parser_rejects_unknown_detail_type() -> None:
    with pytest.raises(ev.EventError) as info:
        ev.parse_aws_event(aws_event("EC2 Instance Launch Successful", {}))
    assert "'EC2 Instance Launch Successful'" in str(info.value)
    assert "12345678-1234-1234-1234-123456789012" in str(info.value)


def test_envelopes_are_powertools_models() -> None:
    from aws_lambda_powertools.utilities.parser import parse
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

    event = parse(
        event=aws_event(ev.REBALANCE_RECOMMENDATION, {"instance-id": "i-0abc"}),
        model=ev.RebalanceRecommendationEvent,
    )
    assert isinstance(event, EventBridgeModel)
    assert event.detail.instance_id == "i-0abc"
