"""Field selectors, metadata-only lists and watch bookmarks of the simulated API server, as kube-apiserver
answers them: pods select on the fields of `PodToSelectableFields`, nodes on `metadata.name` and
`spec.unschedulable`, other kinds on name and namespace; any other field is 400 "field label not
supported"."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.sim.cluster import apiserver
from carpool.sim.cluster.api_answers import ApiAnswer
from carpool.sim.cluster.apiserver import (
    ListPages,
    SimApiServer,
    field_selector_matches,
    parse_field_selector,
)
from carpool.sim.cluster.simulated import SimulatedCluster

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def pod(name: str, node: str | None = None, phase: str = "Running", **spec: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"metadata": {"name": name, "namespace": "shop"},
                           "spec": {"containers": [{"name": "c", "image": "x"}], **spec}, "status": {"phase": phase}}
    if node:
        raw["spec"]["nodeName"] = node
        raw["status"]["podIPs"] = [{"ip": "10.0.0.9"}, {"ip": "fd00::9"}]
    return raw


@pytest.fixture
def cluster() -> SimulatedCluster:
    c = SimulatedCluster(lambda: NOW)
    c.add_node({"metadata": {"name": "n1"}, "spec": {"unschedulable": True}})
    c.add_node({"metadata": {"name": "n2"}})
    c.add_pod(pod("web-1", "n1"))
    c.add_pod(pod("web-2", "n2", hostNetwork=True))
    c.add_pod(pod("job-1", "n1", phase="Succeeded"))
    c.add_pod(pod("wait-1"))  # unbound: Pending
    return c


def names(answer: ApiAnswer) -> list[str]:
    return [i["metadata"]["name"] for i in answer.body["items"]]


@pytest.mark.parametrize(("selector", "expected"), [
    ("spec.nodeName=,status.phase=Pending", ["wait-1"]),
    ("spec.nodeName=n1", ["job-1", "web-1"]),
    ("status.phase!=Succeeded,status.phase!=Failed", ["wait-1", "web-1", "web-2"]),
    ("spec.hostNetwork=true", ["web-2"]),
    ("status.podIP==10.0.0.9,metadata.name!=web-1", ["job-1", "web-2"]),
    ("metadata.namespace=other", []),
])
def test_pod_lists_filter_on_selectable_fields(cluster: SimulatedCluster, selector: str, expected: list[str]) -> None:
    answer = ListPages(cluster).page("pods", None, None, selector)
    assert answer.code == 200 and names(answer) == expected


@pytest.mark.parametrize(("resource", "selector", "field"), [
    ("pods", "spec.priorityClassName=high", "spec.priorityClassName"),
    ("pods", "metadata.labels=app", "metadata.labels"),
    ("nodes", "metadata.namespace=x", "metadata.namespace"),
    ("poddisruptionbudgets", "spec.minAvailable=1", "spec.minAvailable"),
])
def test_a_field_the_resource_cannot_select_on_is_400(cluster: SimulatedCluster, resource: str, selector: str,
                                                      field: str) -> None:
    answer = ListPages(cluster).page(resource, None, None, selector)
    assert answer.code == 400 and answer.body["reason"] == "BadRequest"
    assert answer.body["message"] == f"field label not supported: {field}"


def test_node_lists_select_on_unschedulable(cluster: SimulatedCluster) -> None:
    assert names(ListPages(cluster).page("nodes", None, None, "spec.unschedulable=false")) == ["n2"]
    assert field_selector_matches({"spec": {"unschedulable": True}}, "spec.unschedulable=true", "nodes")


def test_a_term_without_an_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="can't understand 'spec.nodeName'"):
        parse_field_selector("pods", "spec.nodeName")


def test_metadata_only_lists_are_partial_object_metadata(cluster: SimulatedCluster) -> None:
    answer = ListPages(cluster).page("pods", 2, None, "", metadata_only=True)
    body = json.loads(answer.encoded())
    assert body["kind"] == "PartialObjectMetadataList" and body["apiVersion"] == "meta.k8s.io/v1"
    assert [i["kind"] for i in body["items"]] == ["PartialObjectMetadata"] * 2
    assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in body["items"])
    assert body["metadata"]["remainingItemCount"] == 2


def test_full_list_pages_are_sent_as_the_objects_json(cluster: SimulatedCluster) -> None:
    answer = ListPages(cluster).page("pods", None, None, "spec.nodeName=n2")
    body = json.loads(answer.encoded())
    assert body["kind"] == "PodList" and [i["metadata"]["name"] for i in body["items"]] == ["web-2"]
    assert body["items"][0]["spec"]["hostNetwork"] is True


def test_a_watch_streams_selected_changes_and_a_bookmark_before_it_times_out(cluster: SimulatedCluster,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apiserver, "WATCH_POLL", 0.01)
    since = cluster.resource_version
    cluster.add_pod(pod("wait-2"))
    cluster.add_pod(pod("web-3", "n2"))  # bound: not selected
    server = SimApiServer(cluster)
    refused, _ = server.watch(f"/api/v1/pods?watch=true&fieldSelector=spec.podCIDR%3Dx&resourceVersion={since}")
    assert refused is not None and refused.code == 400
    url = (f"/api/v1/pods?watch=true&resourceVersion={since}&timeoutSeconds=3&allowWatchBookmarks=true"
           "&fieldSelector=spec.nodeName%3D%2Cstatus.phase%3DPending")
    refused, lines = server.watch(url)
    assert refused is None
    started = time.monotonic()
    # a change while the watch is open (not selected): a bookmark is sent only past the watch's initial events
    def bound_pod() -> None:
        with server.lock:
            cluster.add_pod(pod("web-4", "n2"))

    later = threading.Timer(0.5, bound_pod)
    later.start()
    events = [json.loads(line) for line in lines]
    later.join()
    assert 2.9 <= time.monotonic() - started < 4
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [("ADDED", "wait-2"), ("BOOKMARK", None)]
    assert events[-1]["object"]["metadata"]["resourceVersion"] == cluster.resource_version


def test_bookmarks_come_every_minute_and_two_seconds_before_the_deadline() -> None:
    assert SimApiServer._next_bookmark(0.0, 300.0) == 60.0
    assert SimApiServer._next_bookmark(100.0, 130.0) == 128.0
    assert SimApiServer._next_bookmark(129.0, 130.0) == float("inf")


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=web", ["a"]),
    ("app==web", ["a"]),
    ("app!=web", ["b", "c"]),
    ("app", ["a", "b"]),
    ("!app", ["c"]),
    ("app in (web, db)", ["a", "b"]),
    ("app notin (web),tier", ["b"]),
    ("carpool.dev/nodeclaim,!karpenter.sh/initialized", ["c"]),
])
def test_node_lists_filter_on_label_selectors(selector: str, expected: list[str]) -> None:
    """apimachinery's `labels.Parse` operators: a missing key fails `=`/`in`/exists and passes `!=`/`notin`/`!`."""
    sim = SimulatedCluster(lambda: NOW)
    sim.add_node({"metadata": {"name": "a", "labels": {"app": "web"}}})
    sim.add_node({"metadata": {"name": "b", "labels": {"app": "db", "tier": "x"}}})
    sim.add_node({"metadata": {"name": "c", "labels": {"carpool.dev/nodeclaim": "c1"}}})
    assert names(ListPages(sim).page("nodes", None, None, label_selector=selector)) == expected


def test_a_label_selector_it_cannot_parse_is_400() -> None:
    answer = ListPages(SimulatedCluster(lambda: NOW)).page("nodes", None, None, label_selector="app=(x")
    assert answer.code == 400 and "unable to parse requirement" in answer.body["message"]
