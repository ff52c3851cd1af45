"""What the API server's pod validation refuses, as the provisioner reports it for each event's pod
(`carpool.api.events.pod_problems`), and explicit nulls meaning unset."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.api import events
from carpool.api.k8s import Pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _event(pod: dict[str, Any] | None = None) -> dict[str, Any]:
    pod = pod or {"metadata": {"name": "web-1", "namespace": "default"},
                  "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}
    entry = events.pod_unschedulable_entry("demo", Pod.model_validate(pod), NOW, "bus")
    return events.delivered_event(entry, event_id="e-1")


@pytest.mark.parametrize(("raw", "problem"), [
    ("100m", None), ("0", None), ("-1", "'-1' must be greater than or equal to 0"),
    ("9223372036854775", None), ("9223372036854776", "'9223372036854776' is too large for a Kubernetes quantity"),
    ("1" * 40 + "0" * 60, f"{('1' * 40)!r} is too large for a Kubernetes quantity"),
])
def test_quantity_range_problems_are_reported_for_short_and_long_quantities(raw: str, problem: str | None) -> None:
    pod = Pod.model_validate({"metadata": {"name": "p"},
                              "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": raw}}}]}})
    expected = [] if problem is None else [
        f"spec.containers[0].resources.requests[cpu]: {problem}",
        f"spec.containers[0].resources.limits[cpu]: {problem}",
    ]
    assert events.pod_problems(pod) == expected


def test_pod_problems_order_and_paths() -> None:
    pod = Pod.model_validate({
        "metadata": {"name": "Bad", "namespace": "team.a"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}],
                 "initContainers": [{"name": "c"}, {"name": "i", "resources": {"limits": {"memory": "-2"}}}],
                 "overhead": {"cpu": "-3"}},
    })
    assert [p.split(":")[0] if p.startswith("spec") else p.split(" ")[1] for p in events.pod_problems(pod)] == [
        "metadata.name", "metadata.namespace",
        "spec.containers[0].resources.requests[cpu]",
        "spec.initContainers[0].name",
        "spec.initContainers[1].resources.requests[memory]", "spec.initContainers[1].resources.limits[memory]",
        "spec.overhead[cpu]",
    ]


def test_explicit_nulls_still_mean_unset() -> None:
    event = _event()
    event["detail"]["pod"]["metadata"]["labels"] = None
    event["detail"]["pod"]["spec"]["containers"][0]["ports"] = None
    parsed = events.parse_cluster_event(json.dumps(event))
    assert parsed.detail.pod.labels == {}
    assert parsed.detail.pod.spec.containers[0].ports == []
