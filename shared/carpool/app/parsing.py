"""Record-body parsers for each queue: a body of the wrong kind is a clear, per-record error."""

from __future__ import annotations

from carpool.api import events as ev


def _expect(event: object, kinds: tuple[type, ...], queue: str) -> object:
    if not isinstance(event, kinds):
        detail_type = getattr(event, "detail_type", type(event).__name__)
        raise ev.EventError(f"detail-type {detail_type!r} does not belong on the {queue} queue")
    return event


def pod_unschedulable(body: str) -> ev.PodUnschedulableEvent:
    event = _expect(ev.parse_cluster_event(body), (ev.PodUnschedulableEvent,), "provisioner")
    assert isinstance(event, ev.PodUnschedulableEvent)
    return event


def node_lifecycle(body: str) -> ev.NodeRegisteredEvent | ev.NodeDeletedEvent:
    event = _expect(ev.parse_cluster_event(body), (ev.NodeRegisteredEvent, ev.NodeDeletedEvent), "registrar")
    assert isinstance(event, ev.NodeRegisteredEvent | ev.NodeDeletedEvent)
    return event


def aws_event(body: str) -> ev.AwsEvent:
    return ev.parse_aws_event(body)
