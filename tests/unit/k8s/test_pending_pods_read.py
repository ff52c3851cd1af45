"""The provisioner's confirm read: one list of unbound Pending pods, filtered by the API server."""

from __future__ import annotations

from typing import Any

import httpx2
from lightkube import AsyncClient, Client

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster


class FixedToken:
    stale = False

    def token(self) -> str:
        return "k8s-aws-v1.test"


def test_pending_pods_asks_the_api_server_for_unbound_pending_pods_only() -> None:
    seen: list[httpx2.Request] = []

    def api(request: httpx2.Request) -> Any:
        seen.append(request)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Pending"}}
        return httpx2.Response(200, json={"apiVersion": "v1", "kind": "PodList",
                                          "metadata": {"resourceVersion": "77"}, "items": [pod]})

    transport = httpx2.MockTransport(api)
    cluster = LightkubeCluster(
        "test", "us-east-1", access=ClusterAccess("https://k8s.test", ""), tokens=FixedToken(),
        client_factory=lambda config: Client(config=config, transport=transport),
        async_client_factory=lambda config: AsyncClient(config=config, transport=transport),
    )
    (pod,) = cluster.pending_pods()
    assert pod.key == "default/web" and pod.metadata.uid == "u1"
    (request,) = seen
    assert request.url.path == "/api/v1/pods"
    assert request.url.params["fieldSelector"] == "spec.nodeName=,status.phase=Pending"
    assert request.url.params["limit"] == "500"
    assert cluster.resource_versions["Pod"] == "77"  # the pod watch follows this selection from here
