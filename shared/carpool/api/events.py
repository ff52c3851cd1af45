"""EventBridge events carpool sends and receives, as pydantic models, parsers and PutEvents builders.

The cluster side (a watcher in the cluster or the simulator) publishes on source `carpool.cluster`:
`Pod Unschedulable` {cluster, pod, observedAt}, `Node Registered` {cluster, node}, `Node Deleted`
{cluster, nodeName, providerId}. AWS publishes the interruption events carpool reacts to (reference.md
section 7). Every envelope subclasses Powertools' `EventBridgeModel` with a typed `detail`, so handlers
can also use `@event_parser(model=...)` directly.

Parsing never guesses: an unknown detail-type or a bad field raises `EventError` whose message names the
event (detail-type and id) and the field path, so the record can go to the DLQ with a useful reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal, TypeVar

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from carpool import quantity
from carpool.api.base import KubeModel
from carpool.api.errors import describe_all
from carpool.api.k8s import Container, Node, Pod
from carpool.api.meta import dns_label_problem, dns_subdomain_problem

__all__ = [
    "AWS_DETAIL_TYPES",
    "CLUSTER_DETAIL_TYPES",
    "EC2_SOURCE",
    "HEALTH_EVENT",
    "HEALTH_SOURCE",
    "INSTANCE_ID_PATTERN",
    "INSTANCE_STATE_CHANGE",
    "MAX_ENTRY_BYTES",
    "NODE_DELETED",
    "NODE_REGISTERED",
    "POD_UNSCHEDULABLE",
    "REBALANCE_RECOMMENDATION",
    "SOURCE",
    "SPOT_INTERRUPTION",
    "AffectedEntity",
    "AwsEvent",
    "ClusterEvent",
    "EventError",
    "HealthEvent",
    "HealthEventDetail",
    "InstanceStateChangeDetail",
    "InstanceStateChangeEvent",
    "NodeDeletedDetail",
    "NodeDeletedEvent",
    "NodeRegisteredDetail",
    "NodeRegisteredEvent",
    "PodUnschedulableDetail",
    "PodUnschedulableEvent",
    "RebalanceRecommendationDetail",
    "RebalanceRecommendationEvent",
    "SpotInterruptionDetail",
    "SpotInterruptionEvent",
    "delivered_event",
    "node_deleted_entry",
    "node_registered_entry",
    "parse_aws_event",
    "parse_cluster_event",
    "pod_problems",
    "pod_unschedulable_entry",
]

SOURCE: Final = "carpool.cluster"
EC2_SOURCE: Final = "aws.ec2"
HEALTH_SOURCE: Final = "aws.health"

POD_UNSCHEDULABLE: Final = "Pod Unschedulable"
NODE_REGISTERED: Final = "Node Registered"
NODE_DELETED: Final = "Node Deleted"
SPOT_INTERRUPTION: Final = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION: Final = "EC2 Instance Rebalance Recommendation"
INSTANCE_STATE_CHANGE: Final = "EC2 Instance State-change Notification"
HEALTH_EVENT: Final = "AWS Health Event"

CLUSTER_DETAIL_TYPES: Final = (POD_UNSCHEDULABLE, NODE_REGISTERED, NODE_DELETED)
AWS_DETAIL_TYPES: Final = (SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION, INSTANCE_STATE_CHANGE, HEALTH_EVENT)
#: EventBridge's limit for one PutEvents entry (publishers must check before sending).
MAX_ENTRY_BYTES: Final = 256 * 1024


class EventError(ValueError):
    """An event carpool cannot act on; the message names the event and the offending field."""

    def __init__(
        self,
        message: str,
        *,
        detail_type: str | None = None,
        event_id: str | None = None,
        problems: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.detail_type = detail_type
        self.event_id = event_id
        self.problems: list[tuple[str, str]] = problems or []


#: Kubernetes quantities are int64 values (milli-units for cpu): a bigger one cannot be a real request.
_MAX_MILLI_VALUE = 2**63 - 1
#: EC2 instance ids are `i-` and 8 or 17 hex digits; short test ids (`i-1`) stay acceptable, a 5,000-digit
#: one (which would reach DynamoDB as a key) does not.
INSTANCE_ID_PATTERN: Final = r"^i-[0-9a-z]{1,17}$"


def _timestamp(value: Any) -> Any:
    """A timestamp as EventBridge and Kubernetes write it (an RFC 3339 string) or a `datetime` built in
    code; a number is refused rather than read as seconds since 1970."""
    if isinstance(value, str | datetime):
        return value
    raise ValueError(f"expected an RFC 3339 timestamp string, got {type(value).__name__}")


def _container_problems(containers: list[Container], what: str, seen: set[str]) -> list[str]:
    problems = []
    for i, container in enumerate(containers):
        where = f"spec.{what}[{i}]"
        problem = dns_label_problem(container.name, f"{where}.name")
        if problem:
            problems.append(problem)
        elif container.name in seen:
            problems.append(f"{where}.name: duplicate container name {container.name!r}")
        seen.add(container.name)
        for kind, values in (("requests", container.resources.requests), ("limits", container.resources.limits)):
            problems += _quantity_problems(values, f"{where}.resources.{kind}")
    return problems


def _quantity_problems(values: Mapping[str, str], where: str) -> list[str]:
    """Kubernetes' `ValidateNonnegativeQuantity`, plus the int64 range every quantity lives in."""
    problems = []
    for name, raw in values.items():
        value = quantity.parse(raw)  # already checked to parse by the model
        if value < 0:
            problems.append(f"{where}[{name}]: {raw!r} must be greater than or equal to 0")
        elif value * 1000 > _MAX_MILLI_VALUE:
            problems.append(f"{where}[{name}]: {raw[:40]!r} is too large for a Kubernetes quantity")
    return problems


def pod_problems(pod: Pod) -> list[str]:
    """What the API server's pod validation would refuse in `pod`, as far as carpool reads it: names
    (a pod name is a DNS subdomain, a namespace and a container name DNS labels), at least one container,
    container names unique, requests, limits and overhead non-negative and in range."""
    problems = [p for p in (
        dns_subdomain_problem(pod.metadata.name or "", "metadata.name"),
        dns_label_problem(pod.metadata.namespace, "metadata.namespace") if pod.metadata.namespace is not None else None,
    ) if p]
    if not pod.spec.containers:
        problems.append("spec.containers: a pod has at least one container")
    seen: set[str] = set()
    problems += _container_problems(pod.spec.containers, "containers", seen)
    problems += _container_problems(pod.spec.init_containers, "initContainers", seen)
    problems += _quantity_problems(pod.spec.overhead, "spec.overhead")
    return problems


# --- details: cluster ---------------------------------------------------------------------------------
class PodUnschedulableDetail(KubeModel):
    cluster: str
    pod: Pod
    observed_at: datetime

    _observed_at_is_a_timestamp = field_validator("observed_at", mode="before")(_timestamp)

    @field_validator("pod")
    @classmethod
    def _valid_as_kubernetes_allows(cls, pod: Pod) -> Pod:
        """The pod bounded as the API server bounds it, here at the parser: a 5,000-character name would
        otherwise fail later, as a DynamoDB key, after the rest of the batch was already being
        provisioned; a pod without containers or with a negative request is no pod the cluster has."""
        problems = pod_problems(pod)
        if problems:
            raise ValueError("; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
        return pod


class NodeRegisteredDetail(KubeModel):
    cluster: str
    node: Node

    @field_validator("node")
    @classmethod
    def _named_as_kubernetes_allows(cls, node: Node) -> Node:
        problem = dns_subdomain_problem(node.metadata.name or "", "metadata.name")
        if problem:
            raise ValueError(problem)
        return node


class NodeDeletedDetail(KubeModel):
    cluster: str
    node_name: str
    provider_id: str | None = None

    @field_validator("node_name")
    @classmethod
    def _named_as_kubernetes_allows(cls, name: str) -> str:
        problem = dns_subdomain_problem(name, "nodeName")
        if problem:
            raise ValueError(problem)
        return name


# --- details: AWS -------------------------------------------------------------------------------------
class _Ec2Detail(BaseModel):
    """EC2 event details use hyphenated keys (`instance-id`)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", defer_build=True)

    instance_id: str = Field(alias="instance-id", pattern=INSTANCE_ID_PATTERN)


class SpotInterruptionDetail(_Ec2Detail):
    instance_action: str = Field(alias="instance-action")  # terminate | stop | hibernate


class RebalanceRecommendationDetail(_Ec2Detail):
    pass


class InstanceStateChangeDetail(_Ec2Detail):
    state: str  # pending | running | stopping | stopped | shutting-down | terminated


class AffectedEntity(KubeModel):
    entity_value: str


class HealthEventDetail(KubeModel):
    service: str
    event_type_category: str  # issue | accountNotification | scheduledChange | investigation
    event_type_code: str | None = None
    event_arn: str | None = None
    affected_entities: list[AffectedEntity] = Field(default_factory=list)
    start_time: str | None = None
    end_time: str | None = None

    def instance_ids(self) -> list[str]:
        """The affected entities that are EC2 instances (others, such as volumes, are not carpool's)."""
        return [e.entity_value for e in self.affected_entities if _INSTANCE_ID.match(e.entity_value)]


# --- envelopes ----------------------------------------------------------------------------------------
class _Envelope(EventBridgeModel):
    """EventBridge's envelope. `account` is optional because some deliveries (moto's EventBridge -> SQS
    path used by the simulation) leave it out; carpool never reads it.

    Validators are built on first use (`defer_build`, like every `KubeModel`): each function parses one
    or two of these envelopes, so building all seven (and the Pod and Node schemas under them) while the
    handler module loads would be wasted on the rest."""

    model_config = ConfigDict(defer_build=True)

    account: str = ""

    _time_is_a_timestamp = field_validator("time", mode="before")(_timestamp)


class PodUnschedulableEvent(_Envelope):
    source: Literal["carpool.cluster"]
    detail_type: Literal["Pod Unschedulable"] = Field(alias="detail-type")
    detail: PodUnschedulableDetail


class NodeRegisteredEvent(_Envelope):
    source: Literal["carpool.cluster"]
    detail_type: Literal["Node Registered"] = Field(alias="detail-type")
    detail: NodeRegisteredDetail


class NodeDeletedEvent(_Envelope):
    source: Literal["carpool.cluster"]
    detail_type: Literal["Node Deleted"] = Field(alias="detail-type")
    detail: NodeDeletedDetail


class SpotInterruptionEvent(_Envelope):
    source: Literal["aws.ec2"]
    detail_type: Literal["EC2 Spot Instance Interruption Warning"] = Field(alias="detail-type")
    detail: SpotInterruptionDetail

    def instance_ids(self) -> list[str]:
        return [self.detail.instance_id]


class RebalanceRecommendationEvent(_Envelope):
    source: Literal["aws.ec2"]
    detail_type: Literal["EC2 Instance Rebalance Recommendation"] = Field(alias="detail-type")
    detail: RebalanceRecommendationDetail

    def instance_ids(self) -> list[str]:
        return [self.detail.instance_id]


class InstanceStateChangeEvent(_Envelope):
    source: Literal["aws.ec2"]
    detail_type: Literal["EC2 Instance State-change Notification"] = Field(alias="detail-type")
    detail: InstanceStateChangeDetail

    def instance_ids(self) -> list[str]:
        return [self.detail.instance_id]


class HealthEvent(_Envelope):
    source: Literal["aws.health"]
    detail_type: Literal["AWS Health Event"] = Field(alias="detail-type")
    detail: HealthEventDetail

    def instance_ids(self) -> list[str]:
        return self.detail.instance_ids()


ClusterEvent = PodUnschedulableEvent | NodeRegisteredEvent | NodeDeletedEvent
AwsEvent = SpotInterruptionEvent | RebalanceRecommendationEvent | InstanceStateChangeEvent | HealthEvent

_CLUSTER_MODELS: dict[str, type[EventBridgeModel]] = {
    POD_UNSCHEDULABLE: PodUnschedulableEvent,
    NODE_REGISTERED: NodeRegisteredEvent,
    NODE_DELETED: NodeDeletedEvent,
}
_AWS_MODELS: dict[str, type[EventBridgeModel]] = {
    SPOT_INTERRUPTION: SpotInterruptionEvent,
    REBALANCE_RECOMMENDATION: RebalanceRecommendationEvent,
    INSTANCE_STATE_CHANGE: InstanceStateChangeEvent,
    HEALTH_EVENT: HealthEvent,
}

_E = TypeVar("_E", bound=EventBridgeModel)
_INSTANCE_ID = re.compile(INSTANCE_ID_PATTERN)


# --- parsing ------------------------------------------------------------------------------------------
def _as_dict(raw: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EventError(f"event is not valid JSON: {exc}") from None
        except RecursionError:
            raise EventError("event JSON nests too deeply to be an EventBridge event") from None
    if not isinstance(raw, Mapping):
        raise EventError(f"event must be a JSON object, got {type(raw).__name__}")
    return dict(raw)


def _parse(raw: Mapping[str, Any] | str | bytes, models: Mapping[str, type[_E]], family: str) -> _E:
    data = _as_dict(raw)
    detail_type, event_id = data.get("detail-type"), str(data.get("id", "?"))
    model = models.get(detail_type) if isinstance(detail_type, str) else None
    if model is None:
        raise EventError(
            f"event {event_id}: unsupported detail-type {detail_type!r} for {family} events "
            f"(expected one of {', '.join(models)})",
            detail_type=detail_type if isinstance(detail_type, str) else None,
            event_id=event_id,
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = describe_all(model, exc)
        listing = "; ".join(f"{path}: {message}" if path else message for path, message in problems)
        raise EventError(
            f"{detail_type} event {event_id}: {listing}",
            detail_type=detail_type,
            event_id=event_id,
            problems=problems,
        ) from None


def parse_cluster_event(raw: Mapping[str, Any] | str | bytes) -> ClusterEvent:
    """A `carpool.cluster` event, typed by its detail-type."""
    return _parse(raw, _CLUSTER_MODELS, "cluster")  # type: ignore[return-value]


def parse_aws_event(raw: Mapping[str, Any] | str | bytes) -> AwsEvent:
    """An EC2 interruption / state-change / rebalance or AWS Health event, typed by its detail-type."""
    return _parse(raw, _AWS_MODELS, "AWS")  # type: ignore[return-value]


# --- building -----------------------------------------------------------------------------------------
def _entry(detail_type: str, detail: BaseModel, now: datetime, bus_name: str) -> dict[str, Any]:
    return {
        "Time": now,
        "Source": SOURCE,
        "DetailType": detail_type,
        "Detail": detail.model_dump_json(by_alias=True, exclude_none=True),
        "EventBusName": bus_name,
    }


def pod_unschedulable_entry(cluster: str, pod: Pod, now: datetime, bus_name: str) -> dict[str, Any]:
    """A PutEvents entry announcing that `pod` was found unschedulable at `now`."""
    return _entry(
        POD_UNSCHEDULABLE, PodUnschedulableDetail(cluster=cluster, pod=pod, observed_at=now), now, bus_name
    )


def node_registered_entry(cluster: str, node: Node, now: datetime, bus_name: str) -> dict[str, Any]:
    """A PutEvents entry announcing that `node` joined the cluster."""
    return _entry(NODE_REGISTERED, NodeRegisteredDetail(cluster=cluster, node=node), now, bus_name)


def node_deleted_entry(
    cluster: str, node_name: str, provider_id: str | None, now: datetime, bus_name: str
) -> dict[str, Any]:
    """A PutEvents entry announcing that Node `node_name` left the cluster."""
    detail = NodeDeletedDetail(cluster=cluster, node_name=node_name, provider_id=provider_id)
    return _entry(NODE_DELETED, detail, now, bus_name)


def delivered_event(
    entry: Mapping[str, Any], *, event_id: str, account: str = "000000000000", region: str = "us-east-1"
) -> dict[str, Any]:
    """The event a rule target receives for a PutEvents `entry` (for the simulator and tests)."""
    when = entry.get("Time")
    return {
        "version": "0",
        "id": event_id,
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": account,
        "time": when.isoformat().replace("+00:00", "Z") if isinstance(when, datetime) else when,
        "region": region,
        "resources": list(entry.get("Resources", [])),
        "detail": json.loads(entry["Detail"]),
    }
