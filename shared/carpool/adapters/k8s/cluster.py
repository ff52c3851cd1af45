"""`carpool.ports.Cluster` on lightkube, authenticated with an EKS token (no kubeconfig, no AWS CLI).

The Lambdas reach the EKS API with their IAM role: the cluster endpoint and CA come from the environment
the stack sets (`CARPOOL_CLUSTER_ENDPOINT`, `CARPOOL_CLUSTER_CA`) or, failing that, from EKS
DescribeCluster; the bearer token is a presigned STS URL (`token.py`), re-signed every 10 minutes.

Lists are read page by page through lightkube's HTTP client and each page's bytes are validated straight
into `carpool.api.k8s` models (`reads.py`: field selectors, metadata-only lists); single objects cross via
`model_validate(obj.to_dict())`. Watch lines are decoded here, by type first (`convert.watch_line`): a
BOOKMARK is its kind's zero value with only a resource version (`"spec":{"containers":null}` for a pod),
which lightkube's typed decode rejects. A list that cannot be converted fails loudly (deciding on a
partial view of the cluster could, say, consolidate a node whose pods were not seen); a watch event that
cannot be converted is logged and skipped (events are hints; the next list is the truth).

Two kinds of watch: `watch` follows pods and nodes, and Karpenter's kinds it is asked for (NodePool,
EC2NodeClass, NodeClaim, delivered as dicts: `karpenter_objects.py`), for a while (the watcher Lambda), on
the async client in a helper thread; `pod_view_changes` is one short synchronous watch that catches a kept pod snapshot
up (the disruption Lambda, once a minute) and ends as soon as the server has sent what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import httpx2
import msgspec
from lightkube import ALL_NS, ApiError, AsyncClient, Client, KubeConfig
from lightkube.config.models import Cluster as KubeCluster
from lightkube.config.models import User
from lightkube.core.resource import NamespacedResourceG
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import DaemonSet as DaemonSetResource
from lightkube.resources.core_v1 import Event as EventResource
from lightkube.resources.core_v1 import Node as NodeResource
from lightkube.resources.core_v1 import PersistentVolume as PvResource
from lightkube.resources.core_v1 import PersistentVolumeClaim as PvcResource
from lightkube.resources.core_v1 import Pod as PodResource
from lightkube.resources.policy_v1 import PodDisruptionBudget as PdbResource
from lightkube.resources.storage_v1 import StorageClass as StorageClassResource
from lightkube.types import PatchType

from carpool import environment, k8s_events
from carpool.adapters.k8s import convert, karpenter_objects, leases, reads
from carpool.adapters.k8s.token import EksTokenProvider
from carpool.api import k8s as api
from carpool.api import storage
from carpool.disruption import podview
from carpool.disruption.podview import PodView
from carpool.k8s_events import KubeEvent
from carpool.karpenter_lease import Lease
from carpool.karpenter_objects import KindNotServed, kind_named
from carpool.ports import (
    EvictionBlocked,
    NodeConflict,
    NodeGone,
    NodePatch,
    PodViewChange,
    PodViewChanges,
    ResourceVersionExpired,
    StorageObjects,
    WatchEvent,
    claimed,
)
from carpool.taints import Taint

log = logging.getLogger(__name__)

ENDPOINT_ENV = "CARPOOL_CLUSTER_ENDPOINT"
CA_ENV = "CARPOOL_CLUSTER_CA"
FIELD_MANAGER = "carpool"
CNI_NAMESPACE, CNI_DAEMONSET, CNI_CONTAINER = "kube-system", "aws-node", "aws-node"
LIST_CHUNK = 500
#: how many times a paginated list starts again after its continue token expired (410) before giving up
LIST_RESTARTS = 3
#: what every `watch` follows; Karpenter's kinds are followed too when `resource_versions` names them
WATCH_KINDS = ("Pod", "Node")
_CHANGE_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
ERROR = "ERROR"
#: a failed watch is opened again after this long, doubled for each failure in a row up to
#: `WATCH_RETRY_MAX` (seconds): a server that refuses or drops every stream is not hammered
WATCH_RETRY_FIRST = 0.5
WATCH_RETRY_MAX = 8.0
#: a catch-up watch (`pod_view_changes`) takes this long without a line as the end of what the server
#: holds: a watch sends every change after its version at once when it opens, then only new ones (seconds)
CATCH_UP_IDLE_SECONDS = 0.2
#: the longest a catch-up reads however busy the cluster (a steady trickle of changes would otherwise hold
#: the run); what it has not read by then comes with the next catch-up, from the version it returned
CATCH_UP_MAX_SECONDS = 3.0
#: the catch-up watch's `timeoutSeconds`: the server ends the stream on its side soon after the read stops
CATCH_UP_TIMEOUT_SECONDS = 5


class TokenSource(Protocol):
    """What the cluster needs from `EksTokenProvider` (tests pass a fixed token)."""

    @property
    def stale(self) -> bool: ...

    def token(self) -> str: ...


class ClusterSettings(Protocol):
    """The fields of `carpool.app.settings.Settings` the cluster adapter reads."""

    @property
    def cluster_name(self) -> str: ...

    @property
    def region(self) -> str: ...

    @property
    def cluster_endpoint(self) -> str: ...

    @property
    def cluster_ca(self) -> str: ...


class WatchExpired(Exception):
    """A kind's watch resource version is too old (HTTP 410, or an ERROR event with a 410 Status): list
    again, then watch from the list's resource version (the informer pattern; `watch` does so itself)."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"{kind} watch: resource version expired, re-list")
        self.kind = kind


class WatchBroken(Exception):
    """The server ended a kind's watch stream with an ERROR event other than 410, or closed it before
    sending anything: `watch` opens it again from its latest version after a pause; `pod_view_changes`
    raises it (its caller lists again or tries next run)."""

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(f"{kind} watch: {why}")
        self.kind = kind


@dataclass
class ReadStats:
    """List pages read and their bytes, since the adapter was made (what a run costs the API server)."""

    pages: int = 0
    bytes: int = 0

    def add(self, size: int) -> None:
        self.pages += 1
        self.bytes += size


@dataclass(frozen=True)
class ClusterAccess:
    """Where the API server is and the base64 PEM of its CA."""

    endpoint: str
    ca_data: str


def cluster_access(
    cluster_name: str, region: str | None = None, eks_client: Any | None = None
) -> ClusterAccess:
    """From the environment when the stack set it (no API call on a cold start), else DescribeCluster."""
    endpoint, ca = environment.get(ENDPOINT_ENV, ""), environment.get(CA_ENV, "")
    if endpoint and ca:
        return ClusterAccess(endpoint, ca)
    if eks_client is None:
        from carpool.adapters.aws import session

        eks_client = session.client("eks", region=region)
    cluster = eks_client.describe_cluster(name=cluster_name)["cluster"]
    return ClusterAccess(cluster["endpoint"], cluster["certificateAuthority"]["data"])


def kube_config(access: ClusterAccess, token: str) -> KubeConfig:
    """A one-cluster, one-user config (what `KubeConfig.from_server` gives, plus token and CA)."""
    return KubeConfig.from_one(
        cluster=KubeCluster(server=access.endpoint, certificate_auth_data=access.ca_data or None),
        user=User(token=token),
    )


def status_code(error: Exception) -> int | None:
    """The HTTP status of a lightkube `ApiError` (from a Status body, e.g. a watch ERROR event) or of a
    plain httpx status error (a watch request refused before streaming), else None."""
    status = getattr(error, "status", None)
    if getattr(status, "code", None):
        return int(status.code)  # type: ignore[union-attr]
    response = getattr(error, "response", None)
    return int(response.status_code) if response is not None else None


class _ConfiguredElsewhere:
    """The token source of a client that carries its own credentials (`LightkubeCluster.from_client`)."""

    stale = False

    def token(self) -> str:
        raise RuntimeError("this cluster's client carries its own credentials")


class LightkubeCluster:
    """The Kubernetes API as carpool uses it. `resource_versions` holds the collection versions of the last
    pod and node lists, to start a `watch` from."""

    def __init__(
        self,
        cluster_name: str,
        region: str,
        access: ClusterAccess | None = None,
        tokens: TokenSource | None = None,
        client_factory: Callable[[KubeConfig], Client] | None = None,
        async_client_factory: Callable[[KubeConfig], AsyncClient] | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        self._access = access
        self._region = region
        self._tokens = tokens or EksTokenProvider(cluster_name, region)
        self._factory = client_factory or (lambda config: Client(config=config, field_manager=FIELD_MANAGER))
        self._async_factory = async_client_factory or (
            lambda config: AsyncClient(config=config, field_manager=FIELD_MANAGER)
        )
        self._client_obj: Client | None = None
        self.resource_versions: dict[str, str] = {}
        self.read_stats = ReadStats()
        #: the scheduling shapes of `pod_views_versioned` and the `pod_view_changes` after it: a warm
        #: Lambda's catch-ups convert a workload's shape once, not once per run
        self._shapes = podview.Shapes()

    @classmethod
    def from_settings(cls, settings: ClusterSettings) -> LightkubeCluster:
        """The production cluster from `carpool.app.settings.Settings`: endpoint and CA from the settings
        when the stack provided them, else EKS DescribeCluster on first use."""
        access = (
            ClusterAccess(settings.cluster_endpoint, settings.cluster_ca)
            if settings.cluster_endpoint and settings.cluster_ca
            else None
        )
        return cls(settings.cluster_name, settings.region, access=access)

    @classmethod
    def from_client(cls, cluster_name: str, client: Client) -> LightkubeCluster:
        """A cluster reached through a client configured elsewhere (the CLI: the user's own kubeconfig,
        as kubectl reaches it), for the synchronous reads and writes (no `watch`)."""
        made = cls(cluster_name, "", tokens=_ConfiguredElsewhere(), client_factory=lambda _config: client)
        made._client_obj = client
        return made

    # -- connection ---------------------------------------------------------------------------------------
    @property
    def access(self) -> ClusterAccess:
        if self._access is None:
            self._access = cluster_access(self.cluster_name, self._region)
        return self._access

    def _config(self) -> KubeConfig:
        return kube_config(self.access, self._tokens.token())

    def client(self) -> Client:
        """The lightkube client as it is now (rebuilt when the token is due): what the adapters of other
        kinds built on the same access use (`karpenter_objects.LightkubeKarpenterObjects`)."""
        return self._client()

    def _client(self) -> Client:
        """The lightkube client, rebuilt whenever the token is due for refresh."""
        if self._client_obj is None or self._tokens.stale:
            if self._client_obj is not None:
                self._client_obj.close()
            self._client_obj = self._factory(self._config())
        return self._client_obj

    # -- reads ----------------------------------------------------------------------------------------------
    def _list(self, resource: Any, model: type[Any], kind: str | None = None, *, fields: str | None = None,
              metadata_only: bool = False, per_page: Callable[[list[Any]], list[Any]] | None = None,
              namespace: str | None = None, selector: str | None = None) -> list[Any]:
        """Every object of a list (or of its metadata-only form) as `model`, straight from the page bytes
        (through `per_page` when given). With `kind`, the list's resource version is kept for `watch`.
        A namespaced resource is listed across namespaces unless `namespace` is given."""
        items, version = self._paged(resource, model, fields=fields, metadata_only=metadata_only,
                                     per_page=per_page, namespace=namespace, selector=selector)
        if kind is not None:
            self.resource_versions[kind] = version
        return items

    def _paged(self, resource: Any, model: type[Any], *, fields: str | None = None,
               metadata_only: bool = False, per_page: Callable[[list[Any]], list[Any]] | None = None,
               namespace: str | None = None, selector: str | None = None) -> tuple[list[Any], str]:
        """Every object of a list, paged by `LIST_CHUNK`, and the list's resource version.

        A list that takes longer than etcd keeps old revisions (the API server compacts every 5 minutes)
        loses its continue token: the next page answers 410 Expired "The provided continue parameter is
        too old...". The list then starts again from the first page, at most `LIST_RESTARTS` times. The
        inconsistent token that 410 offers is not used: the remainder would mix two points in time, and
        carpool decides on what it lists (consolidating a node whose pods were not all seen)."""
        for attempt in range(1, LIST_RESTARTS + 1):
            try:
                return self._read_pages(resource, model, fields, metadata_only, per_page, namespace, selector)
            except ApiError as e:
                if status_code(e) != 410 or attempt == LIST_RESTARTS:
                    raise
                log.warning("listing %s: continue token expired (%s); listing again from the start (%d of %d)",
                            getattr(resource, "__name__", resource), e, attempt + 1, LIST_RESTARTS)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _read_pages(self, resource: Any, model: type[Any], fields: str | None,
                    metadata_only: bool, per_page: Callable[[list[Any]], list[Any]] | None = None,
                    namespace: str | None = None, selector: str | None = None) -> tuple[list[Any], str]:
        """One paginated list through lightkube's HTTP client (auth, TLS, base URL), each page's bytes
        validated into `model` at once (`reads.parse_page`): no lightkube objects, no dict round trip.
        `per_page` turns each page's items into what is kept (a projection), so a long list holds one
        page of parsed items at most."""
        items: list[Any] = []
        version = ""
        for page, page_version in self._pages(resource, model, fields, metadata_only, namespace, selector):
            items.extend(per_page(page) if per_page is not None else page)
            version = page_version
        return items, version

    def _pages(self, resource: Any, model: type[Any], fields: str | None, metadata_only: bool = False,
               namespace: str | None = None, selector: str | None = None) -> Iterator[tuple[list[Any], str]]:
        """The list's pages as they arrive, each with the list's resource version."""
        generic = self._client()._client
        namespaced = issubclass(resource, NamespacedResourceG)
        request = generic.prepare_request(
            "list", res=resource, namespace=(namespace or ALL_NS) if namespaced else None,
            params={"limit": LIST_CHUNK, "fieldSelector": fields or None, "labelSelector": selector or None},
            headers={"Accept": reads.METADATA_ACCEPT} if metadata_only else None,
        )
        while True:
            response = generic.send(generic.build_adapter_request(request))
            generic.raise_for_status(response)
            self.read_stats.add(len(response.content))
            page = reads.parse_page(response.content, model)
            yield list(reads.without_managed_fields(page.items or ())), page.metadata.resource_version
            if not page.metadata.continue_token:
                return
            request.params["continue"] = page.metadata.continue_token

    def _streamed(self, resource: Any, model: type[Any], kind: str | None, fields: str | None = None,
                  selector: str | None = None) -> Iterator[list[Any]]:
        """A list a page at a time (with `kind`, its resource version is kept for `watch`). A continue token
        that expires mid-list (410) starts the list again from its first page: the pages already handed
        on come again, which a reader that only publishes what it finds can take."""
        for attempt in range(1, LIST_RESTARTS + 1):
            try:
                for page, version in self._pages(resource, model, fields, selector=selector):
                    if kind is not None:
                        self.resource_versions[kind] = version
                    yield page
                return
            except ApiError as e:
                if status_code(e) != 410 or attempt == LIST_RESTARTS:
                    raise
                log.warning("listing %s a page at a time: continue token expired (%s); from the start again",
                            kind, e)

    def list_pods(self) -> list[api.Pod]:
        return self._list(PodResource, api.Pod, "Pod")

    def pods_on_node(self, node_name: str) -> list[api.Pod]:
        """Pods bound to one node (field selector `spec.nodeName=<node>`)."""
        return self._list(PodResource, api.Pod, fields=reads.on_node(node_name))

    def pod_views(self, node_name: str | None = None) -> list[PodView]:
        """Unfinished pods as `PodView`s (every node's, or one node's; "" for unbound pods), each page
        projected as it arrives (`reads.PodProjection`): a few hundred bytes per pod are kept, and pods
        of one workload share their scheduling shape."""
        shapes = podview.Shapes()
        fields = reads.NOT_FINISHED if node_name is None else f"{reads.on_node(node_name)},{reads.NOT_FINISHED}"
        return self._list(PodResource, reads.PodProjection, fields=fields,
                          per_page=lambda page: [p.view(shapes) for p in page])

    def pod_views_versioned(self) -> tuple[list[PodView], str]:
        """`pod_views()` of every node and the list's resource version, where `pod_view_changes` resumes.
        The list starts the adapter's shapes afresh (what the catch-ups after it share): a relist is when
        the shapes of workloads that are gone can be let go."""
        shapes = self._shapes = podview.Shapes()
        return self._paged(PodResource, reads.PodProjection, fields=reads.NOT_FINISHED,
                           per_page=lambda page: [p.view(shapes) for p in page])

    def pod_view_changes(self, since: str) -> PodViewChanges:
        """The unfinished pods' changes after `since`, from one watch request of the `reads.NOT_FINISHED`
        selection with bookmarks, read until the server has been quiet for `CATCH_UP_IDLE_SECONDS`, closes
        the stream, or `CATCH_UP_MAX_SECONDS` pass (`_catch_up_lines`), then closed.

        Each line is decoded by its type first (`_CatchUp`). Raises `ResourceVersionExpired` for a 410
        (HTTP answer or ERROR event; also for an empty or "0" `since`, which would replay every pod as
        ADDED), `WatchBroken` for another ERROR event, lightkube's `ApiError` for another HTTP error."""
        if since in ("", "0"):
            raise ResourceVersionExpired("Pod", since)
        deadline = time.monotonic() + CATCH_UP_MAX_SECONDS
        catch_up = _CatchUp(since, self._shapes)
        generic = self._client()._client
        response = generic.send(generic.build_adapter_request(_catch_up_request(generic, since)), stream=True)
        try:
            if response.is_error:
                response.read()
                if response.status_code == 410:
                    raise ResourceVersionExpired("Pod", since)
                generic.raise_for_status(response)
            for line in _catch_up_lines(response, deadline):
                catch_up.take(line)
        finally:
            response.close()
            self.read_stats.add(response.num_bytes_downloaded)
        return PodViewChanges(catch_up.changes, catch_up.version)

    def pod_keys(self) -> set[str]:
        """Keys of every pod, from a metadata-only list (`PartialObjectMetadataList`: no spec or status is
        sent or decoded)."""
        names = self._list(PodResource, reads.ObjectName, metadata_only=True)
        return {n.key for n in names}

    def pods_selected(self, namespace: str | None, selector: str) -> list[api.Pod]:
        """Unfinished pods a label selector selects, in one namespace or all (both selectors server-side)."""
        return self._list(PodResource, api.Pod, fields=reads.NOT_FINISHED, namespace=namespace, selector=selector)

    def pending_pods(self) -> list[api.Pod]:
        """Unbound Pending pods, filtered by the API server (`spec.nodeName` and `status.phase` are
        selectable pod fields). Its resource version is where the pod `watch` starts: the watch follows
        the same selection."""
        return self._list(PodResource, api.Pod, "Pod", fields=reads.PENDING_UNBOUND)

    def list_nodes(self) -> list[api.Node]:
        return self._list(NodeResource, api.Node, "Node")

    def node_names(self) -> set[str]:
        """Every node's name, from a metadata-only list; its resource version is where the node `watch`
        starts."""
        return {n.metadata.name for n in self._list(NodeResource, reads.ObjectName, "Node", metadata_only=True)}

    def uninitialized_node_pages(self) -> Iterator[list[api.Node]]:
        """Launched nodes not initialized yet (server-side label selector), a list page at a time."""
        return self._streamed(NodeResource, api.Node, None, selector=reads.UNINITIALIZED_NODES)

    def pending_pod_pages(self) -> Iterator[list[api.Pod]]:
        """`pending_pods`, a list page at a time (`_streamed`)."""
        return self._streamed(PodResource, api.Pod, "Pod", reads.PENDING_UNBOUND)

    def joining_nodes(self) -> list[api.Node]:
        """Nodes registered for a claim, not initialized yet (server-side label selector)."""
        return self._list(NodeResource, api.Node, selector=reads.JOINING_NODES)

    def get_node(self, name: str) -> api.Node | None:
        try:
            return convert.to_model(self._client().get(NodeResource, name), api.Node)
        except ApiError as e:
            if status_code(e) == 404:
                return None
            raise

    def list_daemonsets(self) -> list[api.DaemonSet]:
        return self._list(DaemonSetResource, api.DaemonSet)

    def list_pdbs(self) -> list[api.PodDisruptionBudget]:
        return self._list(PdbResource, api.PodDisruptionBudget)

    def get_lease(self, namespace: str, name: str) -> Lease | None:
        """One GET of the Lease (`leases.read_lease`: 404 None, 403 `LeaseForbidden`)."""
        return leases.read_lease(self._client(), namespace, name)

    def storage_for(self, pods: Sequence[api.Pod]) -> StorageObjects:
        """The claims the pods name, listed per namespace (one list per namespace with such pods, not
        every claim of the cluster), the volumes bound to them (one cluster-scoped list, kept only when a
        claim names a volume), and the StorageClasses. Nothing is read for pods without claims."""
        wanted = claimed(pods)
        if not wanted:
            return StorageObjects([], [], [])
        claims = [c for namespace, names in sorted(wanted.items())
                  for c in self._list(PvcResource, storage.PersistentVolumeClaim, namespace=namespace)
                  if c.name in names]
        bound = {c.spec.volume_name for c in claims if c.spec.volume_name}
        volumes = ([v for v in self._list(PvResource, storage.PersistentVolume) if v.name in bound]
                   if bound else [])
        classes = self._list(StorageClassResource, storage.StorageClass)
        return StorageObjects(claims, volumes, classes)

    def cni_env(self) -> dict[str, str]:
        """The VPC CNI's settings (ENABLE_PREFIX_DELEGATION, AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG...);
        empty when the cluster runs another CNI."""
        try:
            ds = self._client().get(DaemonSetResource, CNI_DAEMONSET, namespace=CNI_NAMESPACE)
        except ApiError as e:
            if status_code(e) == 404:
                return {}
            raise
        return convert.container_env(convert.as_dict(ds), CNI_CONTAINER)

    # -- writes ---------------------------------------------------------------------------------------------
    def cordon(self, node_name: str) -> None:
        """Mark the node unschedulable. Raises NodeGone when the node no longer exists (404)."""
        self._set_unschedulable(node_name, True)

    def uncordon(self, node_name: str) -> None:
        """Mark the node schedulable again. Raises NodeGone when the node no longer exists (404)."""
        self._set_unschedulable(node_name, False)

    def _set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
        try:
            self._client().patch(NodeResource, node_name, {"spec": {"unschedulable": unschedulable}})
        except ApiError as e:
            if status_code(e) == 404:
                raise NodeGone(node_name) from e
            raise

    def taint(self, node_name: str, taint: Taint) -> None:
        """Add (or update) one taint; the whole list is patched with the version read (409 -> retry).
        Raises NodeGone when the node no longer exists (404 on the read or the write)."""
        for attempt in range(3):
            node = self._get_node(node_name)
            existing = [convert.as_dict(t) for t in (node.spec.taints or [])] if node.spec else []
            taints = convert.taints_with(existing, taint)
            if taints is None:
                return
            version = node.metadata.resourceVersion if node.metadata else None
            patch = {
                "metadata": {"resourceVersion": version},
                "spec": {"taints": taints},
            }
            try:
                self._client().patch(NodeResource, node_name, patch, patch_type=PatchType.MERGE)
                return
            except ApiError as e:
                code = status_code(e)
                if code == 404:
                    raise NodeGone(node_name) from e
                if code != 409 or attempt == 2:
                    raise

    def _get_node(self, name: str) -> Any:
        try:
            return self._client().get(NodeResource, name)
        except ApiError as e:
            if status_code(e) == 404:
                raise NodeGone(name) from e
            raise

    def patch_node(self, name: str, patch: NodePatch, *, attempts: int = 5) -> api.Node:
        """A JSON merge patch of what changes, carrying the resourceVersion that was read: the API server
        answers 409 Conflict when the node changed since (Karpenter's `MergeFromWithOptimisticLock`), and
        the patch is computed again from a fresh read. 404 at either step raises NodeGone."""
        for _ in range(attempts):
            raw = self._read_node(name)
            meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
            change = patch.change(meta.get("labels") or {}, meta.get("annotations") or {}, spec.get("taints") or [],
                                  meta.get("finalizers") or [], deleting=bool(meta.get("deletionTimestamp")),
                                  owner_references=meta.get("ownerReferences") or [])
            if not change:
                return convert.to_model(raw, api.Node)
            body = convert.node_merge_patch(meta.get("resourceVersion"), change)
            try:
                written = self._client().patch(NodeResource, name, body, patch_type=PatchType.MERGE)
            except ApiError as e:
                code = status_code(e)
                if code == 404:
                    raise NodeGone(name) from e
                if code == 409:
                    log.info("node %s changed while carpool patched it; reading it again", name)
                    continue
                raise
            return convert.to_model(written, api.Node)
        raise NodeConflict(name, attempts)

    def _read_node(self, name: str) -> dict[str, Any]:
        """The node's Kubernetes JSON (taints as the API has them, timeAdded included)."""
        try:
            return convert.as_dict(self._client().get(NodeResource, name))
        except ApiError as e:
            if status_code(e) == 404:
                raise NodeGone(name) from e
            raise

    def evict(self, pod_key: str) -> None:
        """Eviction API (the API server enforces PodDisruptionBudgets). Blocked (`EvictionBlocked`, with
        the server's message and causes): 429 when a budget has no disruption left, and 500 "This pod has
        more than one PodDisruptionBudget, which the eviction subresource does not support." when several
        budgets select the pod (no eviction succeeds until one goes). A pod already gone is evicted (404)."""
        namespace, name = convert.split_pod_key(pod_key)
        eviction = PodResource.Eviction(metadata=ObjectMeta(name=name, namespace=namespace))
        try:
            self._client().create(eviction, name=name, namespace=namespace)
        except ApiError as e:
            code = status_code(e)
            if code == 404:
                return
            if code == 429 or (code == 500 and convert.is_budget_refusal(e.status.message)):
                raise EvictionBlocked(f"{pod_key}: {convert.status_text(e.status)}") from e
            raise

    def record_event(self, event: KubeEvent, now: datetime) -> None:
        """POST the event; 409 (written before under the same name) reads it and merge-patches one more
        occurrence: Kubernetes' event aggregation, across invocations that share no recorder."""
        client = self._client()
        try:
            created: EventResource = EventResource.from_dict(k8s_events.manifest(event, now))  # type: ignore[assignment]
            client.create(created, namespace=event.namespace)
            return
        except ApiError as e:
            if status_code(e) != 409:
                raise
        found = client.get(EventResource, event.name, namespace=event.namespace)
        client.patch(EventResource, event.name, k8s_events.repeated(found.count or 1, now),
                     namespace=event.namespace, patch_type=PatchType.MERGE)

    def delete_pod(self, pod_key: str, grace_period_seconds: int) -> None:
        """DELETE the pod with `grace_period_seconds` (the drain deadline's last resort: no budget is asked).
        A pod already gone (404) is deleted."""
        namespace, name = convert.split_pod_key(pod_key)
        try:
            self._client().delete(PodResource, name, namespace=namespace, grace_period=grace_period_seconds)
        except ApiError as e:
            if status_code(e) != 404:
                raise

    def delete_node(self, node_name: str) -> None:
        try:
            self._client().delete(NodeResource, node_name)
        except ApiError as e:
            if status_code(e) != 404:
                raise

    # -- watch ----------------------------------------------------------------------------------------------
    def watch(self, resource_versions: Mapping[str, str], timeout_seconds: float,
              idle_seconds: float | None = None) -> Iterator[WatchEvent | None]:
        """Pod and node changes, and those of each Karpenter kind `resource_versions` names (NodePool,
        EC2NodeClass, NodeClaim: their objects as dicts), for `timeout_seconds`, streamed as they arrive;
        with `idle_seconds`, a None each time that long passes without one (a micro-batching caller flushes
        what it gathered). A kind named without a version is watched from now on the real server's terms
        (ADDED for every object first).

        Each kind is watched on its own (`_follow`): a dropped stream, an error or an undecodable event of
        one never ends the other's. A 410 relists that kind and hands the list on as ADDED events; a
        Karpenter kind the server does not serve (404: no CRD) is logged and left. The iterator ends at the
        deadline, not before.

        lightkube's sync watch reconnects forever and cannot be interrupted while it waits for a quiet
        server, so both watches run on lightkube's AsyncClient in a helper thread, under one
        `asyncio.timeout`: at the deadline they are cancelled cleanly and the thread ends (nothing lingers
        in a frozen Lambda)."""
        stream: _EventStream = _EventStream()
        pump = threading.Thread(
            target=stream.run,
            args=(self._watch_all(dict(resource_versions), timeout_seconds, stream),),
            name="carpool-watch",
            daemon=True,
        )
        pump.start()
        try:
            yield from stream.events(idle_seconds)
        finally:
            stream.cancel()
            pump.join(timeout=5)

    async def _watch_all(self, versions: dict[str, str], timeout: float, stream: _EventStream) -> None:
        """Every kind side by side until the deadline. Not a TaskGroup: one kind's failure must not cancel
        the others (each `_follow` handles its own failures and returns only when its kind is lost)."""
        client = self._async_factory(self._config())
        deadline = asyncio.get_running_loop().time() + timeout
        kinds = [*WATCH_KINDS, *karpenter_objects.watched_kinds(versions)]
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.gather(*(self._follow(client, _KindWatch(kind, versions.get(kind) or None), deadline,
                                                    stream) for kind in kinds))
        except TimeoutError:
            pass
        finally:
            await client.close()

    async def _follow(self, client: AsyncClient, watch: _KindWatch, deadline: float, stream: _EventStream) -> None:
        """One kind's watch until the deadline. A stream that ends is opened again from the kind's latest
        version (bookmarks move it, so a quiet, narrow watch does not fall behind etcd's compaction); a
        failure is logged and retried after a pause that doubles with each failure in a row; a 410 relists
        the kind. Only a relist that fails ends this kind's watch (the next run's resync covers the gap)."""
        while True:
            try:
                await self._stream(client, watch, deadline, stream)
                await asyncio.sleep(0)  # a server that ends every stream at once must not starve the deadline
            except WatchExpired as e:
                log.warning("%s; listing %ss again", e, watch.kind)
                if not await self._relisted(client, watch, stream):
                    return
            except KindNotServed as e:
                log.error("%s watch ends: %s", watch.kind, e)
                return
            except Exception as e:  # noqa: BLE001 - transport, HTTP or server errors alike: events are hints, retry
                pause = watch.failed()
                log.warning("%s watch failed (%s: %s); resuming from version %s in %.1f s",
                            watch.kind, type(e).__name__, e, watch.version, pause)
                await asyncio.sleep(pause)

    async def _stream(self, client: AsyncClient, watch: _KindWatch, deadline: float, stream: _EventStream) -> None:
        """One watch request from the kind's version (with bookmarks; pods follow the `pending_pods`
        selection), each line handled as it arrives, until the server ends the stream. Raises
        `WatchExpired` on 410 (an HTTP answer or an ERROR event), `KindNotServed` on a 404 of a Karpenter
        kind, `WatchBroken` for a stream closed before it sent anything, or what the transport raised."""
        generic, watched = client._client, _WATCHED[watch.kind]
        remaining = deadline - asyncio.get_running_loop().time()
        request = generic.prepare_request(
            "list", res=watched.resource, namespace=watched.namespace, watch=True,
            params={"timeoutSeconds": max(1, math.ceil(remaining)), "resourceVersion": watch.version or None,
                    "allowWatchBookmarks": "true", "fieldSelector": watched.fields},
        )
        request.timeout = generic._watch_timeout  # no read timeout: a quiet watch is not a dead one
        response = await generic.send(generic.build_adapter_request(request), stream=True)
        try:
            if response.is_error:
                await response.aread()
                if response.status_code == 410:
                    raise WatchExpired(watch.kind)
                if response.status_code == 404 and watch.kind in karpenter_objects.RESOURCES:
                    raise KindNotServed(kind_named(watch.kind))
                generic.raise_for_status(response)
            lines = 0
            async for line in response.aiter_lines():
                if line.strip():
                    lines += 1
                    self._on_line(watch, line, stream)
            if not lines:
                raise WatchBroken(watch.kind, "the stream closed before sending anything")
        finally:
            await response.aclose()

    def _on_line(self, watch: _KindWatch, line: str, stream: _EventStream) -> None:
        """One watch event, decoded by its type first: a BOOKMARK (its kind's zero value, which no typed
        decode accepts) only moves the resume point; a change moves it and is handed on if it converts
        (else logged and skipped); an ERROR ends the stream."""
        decoded = _decoded(watch.kind, line)
        if decoded is None:
            return
        event, version = decoded
        watch.received()
        if event.type == ERROR:
            raise _stream_error(watch.kind, event.object) or WatchExpired(watch.kind)
        if version:
            watch.version = self.resource_versions[watch.kind] = version
        if event.type in _CHANGE_TYPES:
            stream.put(_event(event.type, watch.kind, event.object, _WATCHED[watch.kind], version))

    async def _relisted(self, client: AsyncClient, watch: _KindWatch, stream: _EventStream) -> bool:
        """After a 410: list the kind as the watcher's resync does, hand each object on as ADDED (an
        informer's relist; what was seen already is harmless downstream) and resume from the list's
        version. False, logged, when the list fails: this kind's watch ends, the other goes on."""
        try:
            items, version = await self._list_watched(client, watch.kind)
        except Exception as e:  # noqa: BLE001 - whatever the cause, this kind is lost until the next resync
            log.error("%s watch ends: listing after 410 failed (%s: %s)", watch.kind, type(e).__name__, e)
            return False
        for item in items:
            stream.put(WatchEvent(type="ADDED", kind=watch.kind, obj=item,
                                  resource_version=_WATCHED[watch.kind].version_of(item)))
        watch.version = self.resource_versions[watch.kind] = version
        log.info("%s watch: relisted %d at version %s, watching from there", watch.kind, len(items), version)
        return True

    async def _list_watched(self, client: AsyncClient, kind: str) -> tuple[list[Any], str]:
        """`_read_pages` on the async client: what the kind's watch follows (pods: `reads.PENDING_UNBOUND`,
        as `pending_pods`; nodes and Karpenter's kinds: all), page by page, and the list's resource version."""
        generic, watched = client._client, _WATCHED[kind]
        request = generic.prepare_request("list", res=watched.resource, namespace=watched.namespace,
                                          params={"limit": LIST_CHUNK, "fieldSelector": watched.fields})
        items: list[Any] = []
        while True:
            response = await generic.send(generic.build_adapter_request(request))
            generic.raise_for_status(response)
            self.read_stats.add(len(response.content))
            page, version, token = watched.page(response.content)
            items.extend(page)
            if not token:
                return items, version
            request.params["continue"] = token


def _decoded(kind: str, line: str) -> tuple[Any, str | None] | None:
    """A watch line decoded by its type first (a BOOKMARK is its kind's zero value, which no typed decode
    accepts), with the version it moves to (None for an ERROR); None, logged, for a line that is not a
    watch event."""
    try:
        event = convert.watch_line(line)
        return event, convert.raw_version(event.object) if event.type != ERROR else None
    except ValueError as e:
        log.warning("%s watch: skipping a line that is not a watch event (%s): %.200s", kind, e, line)
        return None


def _stream_error(kind: str, status_object: Any) -> WatchBroken | None:
    """What an ERROR event ends a stream with: None for a 410 (the version expired: the caller raises its
    own named error for it), else `WatchBroken` naming the Status."""
    status = convert.watch_status(status_object)
    if status.code == 410:
        return None
    return WatchBroken(kind, f"error {status.code} {status.reason}: {status.message}")


def _catch_up_request(generic: Any, since: str) -> Any:
    """The catch-up's watch request (a lightkube `BasicRequest`): the unfinished pods from `since`, with
    bookmarks. Its read timeout is `CATCH_UP_MAX_SECONDS` while the answer is awaited (`_catch_up_lines`
    lowers it for the stream); connect, write and pool limits are the client's."""
    request = generic.prepare_request(
        "list", res=PodResource, namespace=ALL_NS, watch=True,
        params={"resourceVersion": since, "allowWatchBookmarks": "true", "fieldSelector": reads.NOT_FINISHED,
                "timeoutSeconds": CATCH_UP_TIMEOUT_SECONDS},
    )
    limits = generic._watch_timeout
    request.timeout = httpx2.Timeout(connect=limits.connect, read=CATCH_UP_MAX_SECONDS, write=limits.write,
                                     pool=limits.pool)
    return request


def _catch_up_lines(response: httpx2.Response, deadline: float) -> Iterator[str]:
    """The watch stream's lines until the server closes it, sends nothing for `CATCH_UP_IDLE_SECONDS`, or
    the `time.monotonic()` deadline passes (checked after each line).

    The request's read timeout covered waiting for the answer (the server may first wait for its cache
    to reach the version); it is lowered to the idle time for the body. httpcore reads the timeout from
    the request's `extensions` when the body is first iterated, so the change is made before that. A
    transport failure mid-stream also ends the read: the lines before it are whole and in order, and the
    next catch-up resumes after the last of them."""
    response.request.extensions["timeout"]["read"] = CATCH_UP_IDLE_SECONDS
    try:
        for line in response.iter_lines():
            if line.strip():
                yield line
            if time.monotonic() >= deadline:
                return
    except httpx2.ReadTimeout:
        return
    except httpx2.TransportError as e:
        log.warning("pod catch-up: the stream broke (%s: %s); resuming from its last event next time",
                    type(e).__name__, e)


class _CatchUp:
    """What one catch-up watch has read so far: the pods' changes in order and the version to resume from
    (the last event's or bookmark's; `since` while nothing came)."""

    def __init__(self, since: str, shapes: podview.Shapes) -> None:
        self._since, self._shapes = since, shapes
        self.changes: list[PodViewChange] = []
        self.version = since

    def take(self, line: str) -> None:
        """One line, by its type first: a BOOKMARK only moves the version; ADDED/MODIFIED is the pod's view
        (or its removal once it finished), DELETED its removal; an ERROR raises (410:
        `ResourceVersionExpired`). A line or pod that does not decode is logged and skipped, its version
        still taken: the stream goes on past it, and so does the next catch-up."""
        decoded = _decoded("Pod", line)
        if decoded is None:
            return
        event, version = decoded
        if event.type == ERROR:
            raise _stream_error("Pod", event.object) or ResourceVersionExpired("Pod", self._since)
        if event.type in _CHANGE_TYPES:
            change = _pod_view_change(event.type, event.object, self._shapes)
            if change is not None:
                self.changes.append(change)
        if version:
            self.version = version


def _pod_view_change(change: str, raw: msgspec.Raw, shapes: podview.Shapes) -> PodViewChange | None:
    """A change event's pod as a `PodViewChange`: its view, or None for the view once it was deleted or
    finished (a finished pod leaves a `NOT_FINISHED` watch as DELETED; an ADDED/MODIFIED one that
    already shows it is taken the same way). None, logged, when the pod does not convert."""
    try:
        pod = reads.parse_projection(raw)
        if change == "DELETED" or pod.finished:
            return PodViewChange(pod.key, None)
        return PodViewChange(pod.key, pod.view(shapes))
    except ValueError as e:  # msgspec's and pydantic's errors alike
        log.warning("pod catch-up: skipping a %s event that does not convert: %s", change, e)
        return None


@dataclass(frozen=True)
class _Watched:
    """What one kind's watch follows, the list that replaces it after a 410, and what its objects are
    delivered as: pods and nodes as carpool's models, Karpenter's kinds as dicts."""

    resource: Any
    fields: str | None
    namespace: str | None
    #: one object's JSON as the event carries it (raises ValueError when it does not convert)
    decode: Callable[[bytes], Any]
    #: a list page's bytes: its items (as `decode` gives them), the list's resource version, continue token
    page: Callable[[bytes], tuple[list[Any], str, str | None]]
    version_of: Callable[[Any], str | None]


def _typed(resource: Any, model: type[api.Pod] | type[api.Node], fields: str | None,
           namespace: str | None) -> _Watched:
    """A watch whose objects are validated into `model`."""
    def page(content: bytes) -> tuple[list[Any], str, str | None]:
        parsed = reads.parse_page(content, model)
        return (list(reads.without_managed_fields(parsed.items or ())), parsed.metadata.resource_version,
                parsed.metadata.continue_token)

    return _Watched(resource, fields, namespace, model.model_validate_json, page,
                    lambda item: item.metadata.resource_version)


_WATCHED = {
    "Pod": _typed(PodResource, api.Pod, reads.PENDING_UNBOUND, ALL_NS),
    "Node": _typed(NodeResource, api.Node, None, None),
    **{kind: _Watched(resource, None, None, karpenter_objects.decode_object, karpenter_objects.decode_page,
                      karpenter_objects.object_version)
       for kind, resource in karpenter_objects.RESOURCES.items()},
}


@dataclass
class _KindWatch:
    """One kind's watch in progress: where it resumes, and how many failures came in a row."""

    kind: str
    version: str | None
    failures: int = 0

    def failed(self) -> float:
        """Count a failure; the pause before the next attempt."""
        self.failures += 1
        return float(min(WATCH_RETRY_MAX, WATCH_RETRY_FIRST * 2 ** (self.failures - 1)))

    def received(self) -> None:
        self.failures = 0


def _event(change: str, kind: str, raw: bytes | msgspec.Raw, watched: _Watched,
           version: str | None) -> WatchEvent | None:
    try:
        converted = watched.decode(bytes(raw))
    except ValueError as e:  # pydantic.ValidationError and msgspec.DecodeError are ValueErrors
        log.warning("skipping %s %s event that does not convert: %s", kind, change, e)
        return None
    return WatchEvent(type=change, kind=kind, obj=converted, resource_version=version)


class _EventStream:
    """Hands events from the asyncio thread to the caller's generator; carries the end and any error."""

    _END = object()

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._ready = threading.Event()

    def put(self, event: WatchEvent | None) -> None:
        if event is not None:
            self._queue.put(event)

    def run(self, coro: Any) -> None:
        async def main() -> None:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            self._ready.set()
            await coro

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass
        except Exception as e:  # noqa: BLE001 - handed to the consumer, who re-raises it
            self._queue.put(e)
        finally:
            self._ready.set()
            self._queue.put(self._END)

    def events(self, idle_seconds: float | None = None) -> Iterator[WatchEvent | None]:
        """The events until the pump ends; with `idle_seconds`, None whenever that long passes without one.
        An error of the pump (e.g. no client could be built) is raised here."""
        while True:
            try:
                item = self._queue.get(timeout=idle_seconds)
            except queue.Empty:
                yield None
                continue
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def cancel(self) -> None:
        """Stop the pump early (the consumer closed the generator)."""
        self._ready.wait(timeout=5)
        if self._loop is not None and self._task is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between: nothing left to cancel
                self._loop.call_soon_threadsafe(self._task.cancel)
