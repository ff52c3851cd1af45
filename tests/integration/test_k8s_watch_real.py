"""The lightkube adapter's watch against a real kube-apiserver (`../shared/kube-apiserver`: build.sh,
start.sh, then `source $HOME/.cache/carpool-kube-apiserver/run/env`). Skipped without KUBE_ENDPOINT.

The simulated API server sends what we believe the real one sends; these tests check the belief: a pod
BOOKMARK (`"spec":{"containers":null}`) does not stop the pod watch, and a version the watch cache no
longer holds (410) is relisted. The 410 test needs a server whose watch cache started after version 1
(restart it with `KEEP_DATA=1 ./start.sh`); on a fresh one it is skipped. The catch-up test checks that a
finished pod leaves the unfinished pods' watch as DELETED, which `pod_view_changes` relies on."""

from __future__ import annotations

import base64
import os
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
from lightkube import Client
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod, ServiceAccount
from lightkube.types import PatchType

from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster, kube_config

ENDPOINT = os.environ.get("KUBE_ENDPOINT", "")
pytestmark = pytest.mark.skipif(not ENDPOINT, reason="needs a real kube-apiserver (KUBE_ENDPOINT)")


class EnvToken:
    stale = False

    def token(self) -> str:
        return os.environ["KUBE_TOKEN"]


@pytest.fixture
def access() -> ClusterAccess:
    return ClusterAccess(ENDPOINT, base64.b64encode(Path(os.environ["KUBE_CA_FILE"]).read_bytes()).decode())


@pytest.fixture
def namespace(access: ClusterAccess) -> Iterator[tuple[Client, str]]:
    """A namespace of its own, with the `default` ServiceAccount no controller manager creates here."""
    client = Client(config=kube_config(access, EnvToken().token()), field_manager="carpool-test")
    name = f"watch-{uuid.uuid4().hex[:8]}"
    client.create(Namespace(metadata=ObjectMeta(name=name)))
    client.create(ServiceAccount(metadata=ObjectMeta(name="default", namespace=name)))
    yield client, name
    for pod in client.list(Pod, namespace=name):
        client.delete(Pod, pod.metadata.name, namespace=name, grace_period=0)
    client.delete(Namespace, name)
    client.close()


def make_pod(client: Client, namespace: str, name: str, node: str | None = None) -> str:
    """A pod (unbound unless `node`: nothing schedules it); its resource version."""
    spec = PodSpec(containers=[Container(name="c", image="x")], automountServiceAccountToken=False, nodeName=node)
    made = client.create(Pod(metadata=ObjectMeta(name=name, namespace=namespace), spec=spec))
    return str(made.metadata.resourceVersion)


def when(condition: Callable[[], bool], action: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + 30
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def adapter_for(access: ClusterAccess) -> LightkubeCluster:
    return LightkubeCluster("real", "us-east-1", access=access, tokens=EnvToken())


def test_a_real_pod_bookmark_moves_the_watch_on(access: ClusterAccess, namespace: tuple[Client, str]) -> None:
    client, ns = namespace
    adapter = adapter_for(access)
    adapter.pending_pods()
    adapter.list_nodes()
    versions = dict(adapter.resource_versions)
    opened = time.monotonic()
    bound: list[str] = []
    # while the watch is open: a pending pod (an ADDED), then a pod the selection leaves out, which only
    # the watch cache's bookmark 2 s before the deadline carries the watch past (a bookmark is sent only
    # when newer than the watch's initial events)
    late = when(lambda: time.monotonic() > opened + 1, lambda: make_pod(client, ns, "late"))
    run = when(lambda: time.monotonic() > opened + 2, lambda: bound.append(make_pod(client, ns, "run-1", node="x")))

    events = list(adapter.watch(versions, timeout_seconds=8))
    late.join()
    run.join()

    names = [(e.type, e.obj.name) for e in events if e is not None and e.kind == "Pod" and e.obj.namespace == ns]
    assert names == [("ADDED", "late")]
    assert int(adapter.resource_versions["Pod"]) >= int(bound[0]), "no bookmark moved the resume point"


def test_a_real_410_relists_the_pods_and_watches_on(access: ClusterAccess, namespace: tuple[Client, str]) -> None:
    client, ns = namespace
    with httpx2.Client(verify=ssl.create_default_context(cafile=os.environ["KUBE_CA_FILE"]),
                       headers={"Authorization": f"Bearer {EnvToken().token()}"}) as http:
        probe = http.get(f"{ENDPOINT}/api/v1/namespaces/{ns}/pods",
                         params={"watch": "true", "resourceVersion": "1", "timeoutSeconds": "1"})
    if probe.status_code != 410 and '"code":410' not in probe.text:
        pytest.skip("the watch cache still holds version 1 (restart the server with KEEP_DATA=1)")
    make_pod(client, ns, "missed")
    adapter = adapter_for(access)
    adapter.list_nodes()
    versions = {"Pod": "1", "Node": adapter.resource_versions["Node"]}
    late = when(lambda: adapter.resource_versions.get("Pod", "1") != "1", lambda: make_pod(client, ns, "late"))

    events = list(adapter.watch(versions, timeout_seconds=5))
    late.join()

    names = [(e.type, e.obj.name) for e in events if e is not None and e.kind == "Pod" and e.obj.namespace == ns]
    assert names[0] == ("ADDED", "missed")  # the relist
    assert ("ADDED", "late") in names[1:]  # the watch resumed from the list's version


def test_a_real_catch_up_brings_the_pod_changes_after_the_list(access: ClusterAccess,
                                                               namespace: tuple[Client, str]) -> None:
    client, ns = namespace
    make_pod(client, ns, "first")
    make_pod(client, ns, "job", node="x")
    adapter = adapter_for(access)
    views, version = adapter.pod_views_versioned()
    assert {f"{ns}/first", f"{ns}/job"} <= {v.key for v in views}
    make_pod(client, ns, "second")
    # the kubelet's report of a finished pod: it leaves the `status.phase!=` selection as a DELETED
    client.patch(Pod.Status, "job", {"status": {"phase": "Succeeded"}}, namespace=ns, patch_type=PatchType.MERGE)
    client.delete(Pod, "first", namespace=ns, grace_period=0)  # MODIFIED (deletionTimestamp), then DELETED

    caught = adapter.pod_view_changes(version)

    mine = [(c.key, c.view is not None) for c in caught.changes if c.key.startswith(f"{ns}/")]
    assert mine[:2] == [(f"{ns}/second", True), (f"{ns}/job", False)]
    assert mine[-1] == (f"{ns}/first", False)
    assert int(caught.resource_version) > int(version)
    assert [c.key for c in adapter.pod_view_changes(caught.resource_version).changes
            if c.key.startswith(f"{ns}/")] == []


def test_a_real_label_selected_pod_list_leaves_out_finished_and_other_pods(
        access: ClusterAccess, namespace: tuple[Client, str]) -> None:
    """`pods_selected` (the provisioner's count of the pods a spread or affinity selects) asks the real
    server with a label selector and the unfinished-pods field selector, in one namespace or all."""
    client, ns = namespace
    for name, app in (("web-1", "web"), ("web-2", "web"), ("db-1", "db")):
        spec = PodSpec(containers=[Container(name="c", image="x")], automountServiceAccountToken=False)
        client.create(Pod(metadata=ObjectMeta(name=name, namespace=ns, labels={"app": app}), spec=spec))
    client.patch(Pod.Status, "web-2", {"status": {"phase": "Succeeded"}}, namespace=ns, patch_type=PatchType.MERGE)
    adapter = adapter_for(access)

    assert sorted(p.metadata.name for p in adapter.pods_selected(ns, "app=web")) == ["web-1"]
    assert sorted(p.metadata.name for p in adapter.pods_selected(ns, "app in (web,db)")) == ["db-1", "web-1"]
    everywhere = [p for p in adapter.pods_selected(None, "app=db") if p.metadata.namespace == ns]
    assert [p.metadata.name for p in everywhere] == ["db-1"]
