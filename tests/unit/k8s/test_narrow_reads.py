"""The adapter's narrow reads: field selectors, metadata-only lists, page bytes validated straight into
carpool's models, and watches with bookmarks (against an in-process fake API server)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from test_lightkube_cluster import FakeApi, cluster_on, consume, pod, quiet_server

from carpool.adapters.k8s import reads
from carpool.api.k8s import Pod


def page(items: list[dict[str, Any]], rv: str = "50", cont: str | None = None, kind: str = "PodList") -> httpx2.Response:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return httpx2.Response(200, json={"apiVersion": "v1", "kind": kind, "metadata": meta, "items": items})


def with_managed_fields(raw: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]
    return raw


def test_pods_on_node_asks_the_server_to_filter() -> None:
    api, seen = FakeApi(), []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.params.get("fieldSelector"))
        return page([with_managed_fields(pod("web"))])

    api.on("GET", "/api/v1/pods", answer)
    cluster = cluster_on(api)
    (on_node,) = cluster.pods_on_node("ip-10-0-0-1.ec2.internal")
    assert seen == ["spec.nodeName=ip-10-0-0-1.ec2.internal"]
    assert isinstance(on_node, Pod) and on_node.requests()["cpu"] == 500
    assert on_node.metadata.managed_fields is None  # never kept
    assert "Pod" not in cluster.resource_versions  # neither is where the pod watch resumes


def test_pod_keys_read_partial_object_metadata_pages() -> None:
    api, accepts = FakeApi(), []

    def answer(request: httpx2.Request) -> httpx2.Response:
        accepts.append(request.headers["accept"])
        items = [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                  "metadata": {"name": n, "namespace": "shop", "resourceVersion": "3"}} for n in ("a", "b")]
        if "continue" not in request.url.params:
            return page(items[:1], cont="next", kind="PartialObjectMetadataList")
        return page(items[1:], kind="PartialObjectMetadataList")

    api.on("GET", "/api/v1/pods", answer)
    cluster = cluster_on(api)
    assert cluster.pod_keys() == {"shop/a", "shop/b"}
    assert accepts == [reads.METADATA_ACCEPT] * 2
    assert cluster.read_stats.pages == 2 and cluster.read_stats.bytes > 0


def test_a_page_that_does_not_validate_fails_the_whole_list() -> None:
    api = FakeApi()
    bad = pod("web")
    bad["spec"]["containers"][0]["ports"] = [{"hostPort": 70000}]
    api.on("GET", "/api/v1/pods", lambda r: page([bad]))
    with pytest.raises(ValueError):
        cluster_on(api).pods_on_node("ip-10-0-0-1.ec2.internal")


def test_parse_page_reads_items_and_list_metadata() -> None:
    body = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9", "continue": "c1"},
                       "items": [pod("a"), pod("b")]}).encode()
    parsed = reads.parse_page(body, Pod)
    assert parsed.metadata.resource_version == "9" and parsed.metadata.continue_token == "c1"
    assert [p.key for p in parsed.items or []] == ["default/a", "default/b"]
    assert reads.parse_page(b'{"metadata": {"resourceVersion": "1"}, "items": null}', Pod).items is None


def test_the_pod_watch_follows_the_pending_selection_with_bookmarks() -> None:
    api, seen = FakeApi(), []

    def pods(request: httpx2.Request) -> httpx2.Response:
        seen.append(dict(request.url.params))
        if len(seen) > 1:
            return httpx2.Response(200, content=quiet_server())  # reconnected: nothing more happens
        lines = [{"type": "ADDED", "object": pod("wait", rv="61")},
                 {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "70"}}}]
        return httpx2.Response(200, content="".join(json.dumps(e) + "\n" for e in lines).encode())

    api.on("GET", "/api/v1/pods", pods)
    api.on("GET", "/api/v1/nodes", lambda r: httpx2.Response(200, content=quiet_server()))
    cluster = cluster_on(api)
    events = consume(cluster, {"Pod": "60", "Node": "40"}, timeout=0.5)
    assert [(e.type, e.kind, e.obj.name, e.resource_version) for e in events] == [("ADDED", "Pod", "wait", "61")]
    first = seen[0]
    assert first["fieldSelector"] == reads.PENDING_UNBOUND and first["allowWatchBookmarks"] == "true"
    assert first["resourceVersion"] == "60" and first["watch"] == "true"
    # the stream ended and lightkube reconnected from the bookmark, not from the last pod it saw
    assert seen[1]["resourceVersion"] == "70"
    assert cluster.resource_versions["Pod"] == "70"
