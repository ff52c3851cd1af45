"""The simulated cluster over HTTP, answering as kube-apiserver answers (codes and `metav1.Status` bodies).

`SimulatedCluster` implements carpool's `Cluster` port in memory; the lightkube adapter talks HTTP. To test
the adapter against the same cluster, `SimApiServer` serves the simulated cluster on 127.0.0.1 with the
API server's answers for what carpool calls:

- lists (`limit` + `continue`, as lightkube's `chunk_size` pages them), filtered by field selectors on
  the fields kube-apiserver can select on (anything else: 400 "field label not supported: <field>"),
  as `PartialObjectMetadataList` when the `Accept` header asks for it, and served from a snapshot taken at the
  first page's resource version, like etcd's MVCC read. A continue token whose revision was compacted
  away is `410 Expired` "The provided continue parameter is too old..." with an inconsistent token to
  resume at the latest revision (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/errors.go`);
  `expire_next_continue` is the hook that makes a compaction land between two pages;
- node GET / PATCH (JSON merge patch, `metadata.resourceVersion` as a precondition: 409) / DELETE (200
  with the node while finalizers hold it, a `Status` once it is gone), and 404 `nodes "<name>" not found`
  for a node that is gone;
- Karpenter's NodePools, EC2NodeClasses and NodeClaims under `/apis/<group>/v1/<plural>`: lists and
  watches as above, the rest in `carpool.sim.cluster.objects_http` (404 for a kind whose CRD the scenario
  did not install);
- pod DELETE with `gracePeriodSeconds` (200 with the pod, 404 when gone; no budget is consulted);
- the Eviction subresource (`SimulatedCluster.eviction`: 201, 404, 429, and 500 for a pod covered by
  more than one PodDisruptionBudget, as `pkg/registry/core/pod/storage/eviction.go` answers);
- watches (`?watch=true`) as the watch cache serves them: changes after `resourceVersion` typed by the
  field selector (DELETED for an object that stops matching), bookmarks in the real shape
  (`bookmark_object`), and a version older than the last `compact`, or whose first change of the kind is
  older than the cache holds (`WATCH_HISTORY_SECONDS` of simulated time), answered with one ERROR event
  carrying 410 Expired "too old resource version: <rv> (<oldest>)" (`errWatcher` in
  `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go`). `fault_next_watch` breaks a watch once.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from carpool.karpenter_objects import KARPENTER_KINDS, ObjectKind
from carpool.sim.cluster.api_answers import (
    ApiAnswer,
    LabelTerm,
    api_status,
    labels_match,
    not_found,
    parse_label_selector,
)
from carpool.sim.cluster.objects_http import NOT_SERVED, karpenter_kind_at, object_answer, served

if TYPE_CHECKING:
    from carpool.sim.cluster.simulated import SimulatedCluster

INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)
#: snapshots kept for open paginated lists (older ones count as compacted)
MAX_SNAPSHOTS = 16
#: the longest a simulated watch stays open, and how often it looks for changes (seconds)
WATCH_TIMEOUT = 60.0
WATCH_POLL = 0.05
#: bookmarks: at least once a minute, and one 2 s before the watch times out (`cacheWatcher.nextBookmarkTime`)
BOOKMARK_EVERY = 60.0
BOOKMARK_BEFORE_TIMEOUT = 2.0
#: what each field of a BOOKMARK's object holds besides `metadata.resourceVersion`: the kind's zero value as
#: Go's encoding/json writes it (fields without `omitempty` stay: a pod's `"containers":null`; a node's
#: `daemonEndpoints` and `nodeInfo` are structs, never omitted). Kinds not listed send `metadata` only.
_NODE_INFO = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion",
              "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture")
BOOKMARK_BODIES: dict[str, dict[str, Any]] = {
    "Pod": {"spec": {"containers": None}, "status": {}},
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                                    "nodeInfo": dict.fromkeys(_NODE_INFO, "")}},
}
#: list kinds by URL resource name
LIST_KINDS = {"pods": "Pod", "nodes": "Node", "poddisruptionbudgets": "PodDisruptionBudget", "daemonsets": "DaemonSet",
              "persistentvolumeclaims": "PersistentVolumeClaim", "persistentvolumes": "PersistentVolume",
              "storageclasses": "StorageClass", "events": "Event", **{k.plural: k.kind for k in KARPENTER_KINDS}}
#: the apiVersion of each list that is not core/v1's (Karpenter's custom resources)
LIST_API_VERSIONS = {k.plural: k.api_version for k in KARPENTER_KINDS}




#: selectable fields per list, as kube-apiserver converts field labels: pods after `PodToSelectableFields`
#: (pkg/registry/core/pod/strategy.go), nodes after `NodeToSelectableFields`, and every other kind after
#: the default conversion (`metadata.name`, `metadata.namespace`). Anything else is 400.
SELECTABLE = {
    "pods": frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                       "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                       "status.podIP", "status.nominatedNodeName"}),
    "nodes": frozenset({"metadata.name", "spec.unschedulable"}),
    # `EventToSelectableFields` (pkg/registry/core/event/strategy.go): what `kubectl describe` selects on
    "events": frozenset({"metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
                         "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
                         "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                         "reportingComponent", "source", "type"}),
}
DEFAULT_SELECTABLE = frozenset({"metadata.name", "metadata.namespace"})
#: the `Accept` media type parameter that asks for `PartialObjectMetadataList`
PARTIAL_METADATA = "as=PartialObjectMetadataList"


def _field(raw: Mapping[str, Any], path: str) -> str:
    """A selectable field's value as the API server formats it (booleans `true`/`false`, absent "")."""
    if path == "status.podIP":
        ips = (raw.get("status") or {}).get("podIPs") or []
        return str(ips[0].get("ip", "")) if ips else str((raw.get("status") or {}).get("podIP") or "")
    value: Any = raw
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if path in ("spec.hostNetwork", "spec.unschedulable"):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_field_selector(resource: str, selector: str) -> list[tuple[str, bool, str]]:
    """`a=v,b!=w` as (field, equal?, value) terms; ValueError("field label not supported: x") for a field
    the resource does not select on, as the API server answers (400 BadRequest)."""
    allowed = SELECTABLE.get(resource, DEFAULT_SELECTABLE)
    terms = []
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            path, value = term.split("!=", 1)
            equal = False
        elif "=" in term:
            path, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            equal = True
        else:
            raise ValueError(f"invalid selector: '{selector}'; can't understand '{term}'")
        if path not in allowed:
            raise ValueError(f"field label not supported: {path}")
        terms.append((path, equal, value))
    return terms


def field_selector_matches(raw: Mapping[str, Any], selector: str, resource: str = "pods") -> bool:
    """Whether an object passes a field selector (every term holds)."""
    return all((_field(raw, path) == value) == equal
               for path, equal, value in parse_field_selector(resource, selector))


def _matches(raw: Mapping[str, Any], terms: list[tuple[str, bool, str]]) -> bool:
    return all((_field(raw, path) == value) == equal for path, equal, value in terms)




def selected_change(passed_before: bool, passes_now: bool, change: str) -> str | None:
    """The type a field-selector watch sends for a change, as `cacheWatcher.convertToWatchEvent` decides
    it: ADDED for an object that starts to pass the selector, MODIFIED while it passes, DELETED once it
    stops (a pod that finished, for `status.phase!=Succeeded`), nothing for one it never passed. A change
    that is itself a deletion (`change`) passes nothing after it. kube-apiserver sends the previous
    object with a DELETED; the simulated server has only the latest, which carries the same key."""
    if passes_now:
        return "MODIFIED" if passed_before and change != "ADDED" else "ADDED"
    return "DELETED" if passed_before else None


def partial_metadata(raw: Mapping[str, Any]) -> dict[str, Any]:
    """An object as `PartialObjectMetadata`: its metadata only."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": raw.get("metadata") or {}}


def bookmark_object(kind: str, resource_version: str) -> dict[str, Any]:
    """A BOOKMARK's object as kube-apiserver sends it: `cacheWatcher` makes the kind's empty object and
    sets only its resource version, and the encoder writes every field that has no `omitempty`
    (`metadata.creationTimestamp` as null, a pod's `spec.containers` as null)."""
    custom = next((k for k in KARPENTER_KINDS if k.kind == kind), None)
    if custom is not None:  # an `unstructured.Unstructured`: only what was set
        return {"kind": kind, "apiVersion": custom.api_version, "metadata": {"resourceVersion": resource_version}}
    return {"kind": kind, "apiVersion": "v1",
            "metadata": {"resourceVersion": resource_version, "creationTimestamp": None},
            **json.loads(json.dumps(BOOKMARK_BODIES.get(kind, {})))}


def watch_line(event_type: str, obj: Mapping[str, Any]) -> bytes:
    """One watch event as kube-apiserver streams it: compact JSON, one line."""
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _token(snapshot: int, start: int) -> str:
    return base64.b64encode(json.dumps({"rv": snapshot, "start": start}).encode()).decode()


class ListPages:
    """Paginated lists of the simulated cluster, each served from a snapshot taken at its first page."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster
        self._snapshots: dict[int, list[bytes]] = {}
        self._expire_next = 0
        self.served: list[tuple[str, str | None, int]] = []
        self._log_position = 0
        self._by_node: dict[str, set[str]] = {}
        self._node_of: dict[str, str] = {}

    def expire_next_continue(self, times: int = 1) -> None:
        """Compaction overtakes the next `times` open lists: their next continue token is too old (410)."""
        self._expire_next += times

    def page(self, resource: str, limit: int | None, token: str | None, field_selector: str = "",
             metadata_only: bool = False, label_selector: str = "") -> ApiAnswer:
        kind = LIST_KINDS[resource]
        try:
            terms = parse_field_selector(resource, field_selector)
            label_terms = parse_label_selector(label_selector)
        except ValueError as e:
            self.served.append((resource, token, 400))
            return api_status(400, str(e), "BadRequest")
        rv = int(self._cluster.resource_version)
        if token:
            try:
                cont = json.loads(base64.b64decode(token))
                snapshot_rv, start = int(cont["rv"]), int(cont["start"])
            except (ValueError, KeyError, TypeError):
                return api_status(400, f"continue key is not valid: {token}", "BadRequest")
            if self._expire_next > 0 and snapshot_rv >= 0:
                self._expire_next -= 1
                self._snapshots.pop(snapshot_rv, None)
            if snapshot_rv >= 0 and snapshot_rv not in self._snapshots:
                self.served.append((resource, token, 410))
                return api_status(410, INCONSISTENT_CONTINUE, "Expired", continue_token=_token(-1, start))
            items = self._snapshots[snapshot_rv] if snapshot_rv >= 0 else self._items(kind, terms, label_terms)
        else:
            snapshot_rv, start = rv, 0
            items = self._items(kind, terms, label_terms)
            self._snapshots[rv] = items
            while len(self._snapshots) > MAX_SNAPSHOTS:
                self._snapshots.pop(min(self._snapshots))
        end = len(items) if not limit else min(len(items), start + limit)
        meta: dict[str, Any] = {"resourceVersion": str(snapshot_rv if snapshot_rv >= 0 else rv)}
        if end < len(items):
            meta["continue"] = _token(snapshot_rv, end)
            meta["remainingItemCount"] = len(items) - end
        self.served.append((resource, token, 200))
        page = items[start:end]
        if metadata_only:
            body = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                    "items": [partial_metadata(json.loads(raw)) for raw in page]}
            return ApiAnswer(200, body)
        head = {"kind": f"{kind}List", "apiVersion": LIST_API_VERSIONS.get(resource, "v1"), "metadata": meta}
        data = json.dumps(head).encode()[:-1] + b', "items": [' + b",".join(page) + b"]}"
        return ApiAnswer(200, {**head, "items": EncodedItems(page)}, data)

    def _items(self, kind: str, terms: list[tuple[str, bool, str]],
               label_terms: Sequence[LabelTerm] = ()) -> list[bytes]:
        """The snapshot: each matching object's JSON as of now (encoded once per change, like the
        watch cache's serialized objects). A pod list selecting one `spec.nodeName` is answered from an
        index of pods by node, as the watch cache answers it (kube-apiserver registers a `spec.nodeName`
        indexer for pods, `pod.Indexers` in pkg/registry/core/pod/strategy.go), so a drain's list costs
        the node's pods, not the cluster's."""
        store = self._cluster.store(kind)
        node = next((v for path, equal, v in terms if path == "spec.nodeName" and equal), None)
        keys = sorted(store) if kind != "Pod" or node is None else sorted(self._pods_by_node().get(node, ()))
        return [self._cluster.encoded(store[k]) for k in keys
                if k in store and _matches(store[k].raw, terms) and labels_match(store[k].raw, label_terms)]

    def _pods_by_node(self) -> dict[str, set[str]]:
        """The index of pods by `spec.nodeName` ("" for unbound pods), brought up to date from the
        cluster's change log."""
        self._log_position, changed = self._cluster.changed_keys("Pod", self._log_position)
        pods = self._cluster.store("Pod")
        for key in changed:
            old = self._node_of.pop(key, None)
            if old is not None:
                self._by_node[old].discard(key)
            if key in pods:
                node = str((pods[key].raw.get("spec") or {}).get("nodeName") or "")
                self._node_of[key] = node
                self._by_node.setdefault(node, set()).add(key)
        return self._by_node


class EncodedItems(Sequence[dict[str, Any]]):
    """A list page's items, kept encoded (the HTTP answer sends the bytes) and decoded when read here."""

    def __init__(self, encoded: list[bytes]) -> None:
        self._encoded = encoded

    def __len__(self) -> int:
        return len(self._encoded)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [json.loads(raw) for raw in self._encoded[index]]
        return json.loads(self._encoded[index])


@dataclass(frozen=True)
class Served:
    """One request as the server saw it."""

    method: str
    path: str
    query: Mapping[str, str]
    accept: str
    code: int

    @property
    def metadata_only(self) -> bool:
        return PARTIAL_METADATA in self.accept


class SimApiServer:
    """The simulated cluster on http://127.0.0.1:<port>, for lightkube (`LightkubeCluster`) to talk to."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.lists = ListPages(cluster)
        #: (method, path) of every request, in order
        self.requests: list[tuple[str, str]] = []
        #: every request with its query, `Accept` and answer code; `bytes_sent` counts the bodies
        self.log: list[Served] = []
        self.bytes_sent = 0
        self._lock: threading.RLock = threading.RLock()
        self._watch_faults: dict[str, list[ApiAnswer | bytes]] = {}
        self._compacted = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def lock(self) -> threading.RLock:
        """Held while a request reads or changes the cluster: hold it to change the cluster while the
        server is answering (e.g. during a watch)."""
        return self._lock

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> SimApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fault_next_watch(self, resource: str, fault: ApiAnswer | bytes) -> None:
        """The next watch of `resource` ("pods", "nodes") fails, once per call: an `ApiAnswer` is its HTTP
        answer (a 500 from an overloaded server), bytes are all its stream sends before it closes (an
        event no typed client decodes, a stream cut short by a load balancer: `b""`)."""
        with self._lock:
            self._watch_faults.setdefault(resource, []).append(fault)

    def compact(self) -> None:
        """etcd's compaction overtakes the watch cache: a watch from a resource version older than the
        current one is answered with a single ERROR event, 410 Expired, until a list gives a newer one."""
        with self._lock:
            self._compacted = int(self.cluster.resource_version)

    def answer(self, method: str, url: str, content_type: str, body: bytes, accept: str = "") -> ApiAnswer:
        """Route one request (under the server's lock: the cluster is not thread-safe)."""
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        segments = [s for s in parts.path.split("/") if s]
        with self._lock:
            self.requests.append((method, parts.path))
            answer = self._route(method, segments, query, content_type, body, accept)
            self.log.append(Served(method, parts.path, query, accept, answer.code))
            return answer

    def watch(self, url: str) -> tuple[ApiAnswer | None, Iterator[bytes]]:
        """`GET <list>?watch=true`: 400 for a field the resource cannot select on, else the stream of
        watch events (one JSON line each) after `resourceVersion`, filtered by the field selector, until
        `timeoutSeconds`. With `allowWatchBookmarks=true` a BOOKMARK (`bookmark_object`: the kind's zero
        value with only `metadata.resourceVersion`) comes every minute and 2 s before the stream times
        out, as the watch cache sends them. A version older than the last `compact`, or one whose first
        change of the kind is older than `WATCH_HISTORY_SECONDS` of the cluster's simulated time
        (`SimulatedCluster.watch_expired`; a clock that stands still expires nothing), gets one ERROR
        event (410 Expired) and the stream closes; a fault set by `fault_next_watch` comes first.

        The simulated cluster keeps no earlier states of an object, so an object changed after the
        watch's version that was not created since counts as matching the selector at that version: a
        pod that had already finished and is deleted later is sent a DELETED kube-apiserver would not
        send (a watcher takes a DELETED of a pod it does not hold as nothing)."""
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        segments = [s for s in parts.path.split("/") if s]
        resource = segments[-1]
        with self._lock:
            self.requests.append(("GET", parts.path))
            custom = karpenter_kind_at(segments)
            if custom is not None and not served(self.cluster, custom):
                self.log.append(Served("GET", parts.path, query, "", 404))
                return api_status(404, NOT_SERVED, "NotFound"), iter(())
            try:
                terms = parse_field_selector(resource, query.get("fieldSelector", ""))
            except ValueError as e:
                refused = api_status(400, str(e), "BadRequest")
                self.log.append(Served("GET", parts.path, query, "", 400))
                return refused, iter(())
            faults = self._watch_faults.get(resource)
            fault = faults.pop(0) if faults else None
            if isinstance(fault, ApiAnswer):
                self.log.append(Served("GET", parts.path, query, "", fault.code))
                return fault, iter(())
            self.log.append(Served("GET", parts.path, query, "", 200))
            if fault is not None:
                return None, iter((fault,))
            kind = LIST_KINDS.get(resource, "")
            since = int(query.get("resourceVersion") or 0) or int(self.cluster.resource_version)
            oldest = self._compacted if since < self._compacted else self.cluster.watch_expired(kind, since)
            if oldest is not None:
                expired = api_status(410, f"too old resource version: {since} ({oldest})", "Expired")
                return None, iter((watch_line("ERROR", expired.body),))
            # the cacher registers the watcher under its lock: the kind's changes up to here are its initial
            # events, whether or not the stream has sent them yet
            opened = max([since, *(rv for _etype, rv, _raw, _created in self.cluster.changes_since(kind, since))])
        deadline = time.monotonic() + min(float(query.get("timeoutSeconds") or WATCH_TIMEOUT), WATCH_TIMEOUT)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        return None, self._events(kind, terms, since, deadline, bookmarks, opened)

    def _events(self, kind: str, terms: list[tuple[str, bool, str]], since: int, deadline: float,
                bookmarks: bool, opened: int) -> Iterator[bytes]:
        """The watch's lines. A bookmark carries the latest version and, as `cacheWatcher.process` filters
        every event, comes only when that is newer than the watch's initial events (the kind's changes up
        to its registration, `opened`, whether or not the stream has sent them yet): a watch of a cluster
        that does not change while it is open gets none.
        Each change is typed by whether the object passes the field selector before and after it
        (`selected_change`); `passed` remembers what this watch last told of each object."""
        bookmark_at = self._next_bookmark(time.monotonic(), deadline)
        passed: dict[tuple[str, str], bool] = {}
        while True:
            with self._lock:
                changes = self.cluster.changes_since(kind, since)
                latest = int(self.cluster.resource_version)
            for etype, rv, raw, created in changes:
                since = max(since, rv)
                meta = raw.get("metadata") or {}
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                before = passed.get(key, not created)
                now_passes = etype != "DELETED" and _matches(raw, terms)
                passed[key] = now_passes
                sent = selected_change(before, now_passes, etype)
                if sent is not None:
                    yield watch_line(sent, raw)
            now = time.monotonic()
            if bookmarks and now >= bookmark_at:
                bookmark_at = self._next_bookmark(now, deadline)
                if latest > opened:  # filtered out otherwise, its time spent all the same
                    since = max(since, latest)
                    yield watch_line("BOOKMARK", bookmark_object(kind, str(since)))
            if now >= deadline:
                return
            time.sleep(WATCH_POLL)

    @staticmethod
    def _next_bookmark(now: float, deadline: float) -> float:
        """The watch cache's `nextBookmarkTime`: a minute from now, or 2 s before the watch's deadline
        when that comes first (once past it, no more before the stream closes)."""
        pretimeout = deadline - BOOKMARK_BEFORE_TIMEOUT
        return min(now + BOOKMARK_EVERY, pretimeout) if pretimeout > now else math.inf

    def _route(self, method: str, seg: list[str], query: dict[str, str], content_type: str, body: bytes,
               accept: str = "") -> ApiAnswer:
        path = "/".join(seg)
        custom = karpenter_kind_at(seg)
        if custom is not None:
            return self._karpenter(method, custom, seg, query, content_type, body, accept)
        if method == "GET" and seg and seg[-1] in LIST_KINDS and "watch" not in query:
            if len(seg) >= 3 and seg[-3] == "namespaces":  # a namespaced list: filter by namespace
                query["fieldSelector"] = ",".join(filter(None, [query.get("fieldSelector"),
                                                                f"metadata.namespace={seg[-2]}"]))
            limit = int(query["limit"]) if query.get("limit") else None
            return self.lists.page(seg[-1], limit, query.get("continue"), query.get("fieldSelector", ""),
                                   metadata_only=PARTIAL_METADATA in accept,
                                   label_selector=query.get("labelSelector", ""))
        if path.startswith("api/v1/nodes/") and len(seg) == 4:
            return self._node(method, seg[3], content_type, body)
        if method == "DELETE" and len(seg) == 6 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "pods":
            return self.cluster.pod_deletion(f"{seg[3]}/{seg[5]}", query.get("gracePeriodSeconds"))
        if method == "POST" and len(seg) == 7 and seg[:3] == ["api", "v1", "namespaces"] and seg[6] == "eviction":
            return self.cluster.eviction(f"{seg[3]}/{seg[5]}")
        if len(seg) >= 5 and seg[:3] == ["api", "v1", "namespaces"] and seg[4] == "events":
            return self._event(method, seg[3], seg[5] if len(seg) == 6 else None, content_type, body)
        if seg[:3] == ["apis", "coordination.k8s.io", "v1"] and len(seg) >= 6 and seg[5] == "leases":
            return self._lease(method, seg[4], seg[6] if len(seg) == 7 else None, body)
        if method == "GET" and len(seg) == 7 and seg[4] == "daemonsets":
            found = self.cluster.store("DaemonSet").get(f"{seg[3]}/{seg[6]}")
            return ApiAnswer(200, found.raw) if found is not None else not_found("daemonsets.apps", seg[6])
        return api_status(404, "the server could not find the requested resource", "NotFound")

    def _karpenter(self, method: str, kind: ObjectKind, seg: list[str], query: dict[str, str], content_type: str,
                   body: bytes, accept: str) -> ApiAnswer:
        """Karpenter's kinds (`carpool.sim.cluster.objects_http`): the collection's list as every other
        kind's, the rest there; 404 for every path of a kind whose CRD is not installed."""
        if not served(self.cluster, kind) or len(seg) > 6 or (len(seg) == 6 and seg[5] != "status"):
            return api_status(404, NOT_SERVED, "NotFound")
        if len(seg) == 4 and method == "GET":
            limit = int(query["limit"]) if query.get("limit") else None
            return self.lists.page(kind.plural, limit, query.get("continue"), query.get("fieldSelector", ""),
                                   metadata_only=PARTIAL_METADATA in accept,
                                   label_selector=query.get("labelSelector", ""))
        return object_answer(self.cluster, method, kind, seg[4] if len(seg) > 4 else None, len(seg) == 6,
                             content_type, body)

    def _event(self, method: str, namespace: str, name: str | None, content_type: str, body: bytes) -> ApiAnswer:
        """core/v1 Events of one namespace: POST creates (409 for a name taken), GET and merge PATCH one."""
        if method == "POST" and name is None:
            return self.cluster.event_create(namespace, json.loads(body or b"{}"))
        if method == "GET" and name is not None:
            return self.cluster.event_get(namespace, name)
        if method == "PATCH" and name is not None:
            if content_type not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                return api_status(415, f"the body of the request was in an unknown format: {content_type}",
                                  "UnsupportedMediaType")
            return self.cluster.event_patch(namespace, name, json.loads(body or b"{}"))
        return api_status(405, f"{method} is not supported", "MethodNotAllowed")

    def _lease(self, method: str, namespace: str, name: str | None, body: bytes) -> ApiAnswer:
        """coordination.k8s.io/v1 Leases of one namespace: GET one, POST creates (409 for a name taken), PUT
        replaces one (what a leader elector does)."""
        if method == "GET" and name is not None:
            return self.cluster.lease_get(namespace, name)
        if method in ("POST", "PUT"):
            raw = json.loads(body or b"{}")
            meta = raw.setdefault("metadata", {})
            meta["namespace"] = namespace
            wanted = meta.get("name") or ""
            if method == "POST" and f"{namespace}/{wanted}" in self.cluster.leases:
                return api_status(409, f'leases.coordination.k8s.io "{wanted}" already exists', "AlreadyExists",
                                  {"name": wanted, "group": "coordination.k8s.io", "kind": "leases"})
            if method == "PUT" and wanted != name:
                return api_status(400, "the name of the object does not match the name on the URL", "BadRequest")
            answer = self.cluster.put_lease(raw)
            return ApiAnswer(201, answer.body) if method == "POST" and answer.code < 300 else answer
        return api_status(405, f"{method} is not supported", "MethodNotAllowed")

    def _node(self, method: str, name: str, content_type: str, body: bytes) -> ApiAnswer:
        if method == "GET":
            raw = self.cluster.node_raw(name)
            return ApiAnswer(200, json.loads(json.dumps(raw))) if raw is not None else not_found("nodes", name)
        if method == "DELETE":
            before = self.cluster.node_raw(name)
            if before is None:
                return not_found("nodes", name)
            uid = (before.get("metadata") or {}).get("uid", "")
            self.cluster.delete_node(name)
            held = self.cluster.node_raw(name)  # finalizers keep it, being deleted: the answer is the node
            if held is not None:
                return ApiAnswer(200, json.loads(json.dumps(held)))
            return ApiAnswer(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                   "details": {"name": name, "kind": "nodes", "uid": uid}})
        if method == "PATCH":
            if content_type not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                return api_status(415, f"the body of the request was in an unknown format: {content_type}",
                                  "UnsupportedMediaType")
            return self.cluster.merge_patch_node(name, json.loads(body or b"{}"))
        return api_status(405, f"{method} is not supported", "MethodNotAllowed")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        answer: Callable[..., ApiAnswer] = self.answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                if self.command == "GET" and "watch=" in self.path:
                    self._watch()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                result = answer(self.command, self.path, self.headers.get("Content-Type", ""),
                                self.rfile.read(length) if length else b"", self.headers.get("Accept", ""))
                data = result.encoded()
                server.bytes_sent += len(data)
                self.send_response(result.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _watch(self) -> None:
                refused, lines = server.watch(self.path)
                if refused is not None:
                    data = refused.encoded()
                    self.send_response(refused.code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
                try:
                    for line in lines:
                        self.wfile.write(line)
                        self.wfile.flush()
                        server.bytes_sent += len(line)
                except (BrokenPipeError, ConnectionResetError):  # the client went away: so does the watch
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815 - http.server's naming

        return Handler


__all__ = ["ListPages", "SimApiServer", "bookmark_object", "watch_line"]
