"""The simulated cluster over HTTP, answering as kube-apiserver answers (codes and `metav1.Status` bodies).

`SimulatedCluster` implements carpool's `Cluster` port in memory; the lightkube adapter talks HTTP. To test
the adapter against the same cluster, `SimApiServer` serves the simulated cluster on 127.0.0.1 with the
API server's answers for what carpool calls:

- lists (`limit` + `continue`, as lightkube's `chunk_size` pages them) served from a snapshot taken at the
  first page's resource version, like etcd's MVCC read. A continue token whose revision was compacted
  away is `410 Expired` "The provided continue parameter is too old..." with an inconsistent token to
  resume at the latest revision (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/errors.go`);
  `expire_next_continue` is the hook that makes a compaction land between two pages;
- node GET / PATCH (JSON merge patch, `metadata.resourceVersion` as a precondition: 409) / DELETE, and
  404 `nodes "<name>" not found` for a node that is gone;
- the Eviction subresource (`SimulatedCluster.eviction`: 201, 404, 429, and 500 for a pod covered by
  more than one PodDisruptionBudget, as `pkg/registry/core/pod/storage/eviction.go` answers).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from carpool.sim.cluster import SimulatedCluster

MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)
#: snapshots kept for open paginated lists (older ones count as compacted)
MAX_SNAPSHOTS = 16
#: list kinds by URL resource name
LIST_KINDS = {"pods": "Pod", "nodes": "Node", "poddisruptionbudgets": "PodDisruptionBudget", "daemonsets": "DaemonSet"}


@dataclass(frozen=True)
class ApiAnswer:
    """One HTTP answer: the status code and the JSON body (an object, a list or a `metav1.Status`)."""

    code: int
    body: dict[str, Any]

    @property
    def text(self) -> str:
        """The Status message with its causes, the way a client would report it."""
        message = str(self.body.get("message", ""))
        causes = [c.get("message", "") for c in (self.body.get("details") or {}).get("causes") or []]
        return f"{message} ({'; '.join(causes)})" if causes else message


def api_status(code: int, message: str, reason: str = "", details: Mapping[str, Any] | None = None,
               continue_token: str | None = None) -> ApiAnswer:
    """A failure `metav1.Status` as the API server writes it (reason omitted when the server sets none,
    as for the eviction handler's multiple-budget answer)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1",
                            "metadata": {"continue": continue_token} if continue_token else {},
                            "status": "Failure", "message": message, "code": code}
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = dict(details)
    return ApiAnswer(code, body)


def not_found(resource: str, name: str) -> ApiAnswer:
    return api_status(404, f'{resource} "{name}" not found', "NotFound", {"name": name, "kind": resource})


def can_ignore_pdb(raw: Mapping[str, Any]) -> bool:
    """`canIgnorePDB`: Succeeded, Failed and Pending pods, and pods being deleted, are evicted without
    looking at budgets."""
    phase = (raw.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool((raw.get("metadata") or {}).get("deletionTimestamp"))


def selects_something(selector: Mapping[str, Any] | None) -> bool:
    """The eviction handler skips a budget with a nil or empty selector ("it should match nothing")."""
    return bool(selector) and bool(selector.get("matchLabels") or selector.get("matchExpressions"))  # type: ignore[union-attr]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _field(raw: Mapping[str, Any], path: str) -> str:
    value: Any = raw
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def field_selector_matches(raw: Mapping[str, Any], selector: str) -> bool:
    """`a.b=v,c!=w` field selectors (what carpool sends: `spec.nodeName=,status.phase=Pending`)."""
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(raw, path) == value:
                return False
        else:
            path, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            if _field(raw, path) != value:
                return False
    return True


def _token(snapshot: int, start: int) -> str:
    return base64.b64encode(json.dumps({"rv": snapshot, "start": start}).encode()).decode()


class ListPages:
    """Paginated lists of the simulated cluster, each served from a snapshot taken at its first page."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster
        self._snapshots: dict[int, list[dict[str, Any]]] = {}
        self._expire_next = 0
        self.served: list[tuple[str, str | None, int]] = []

    def expire_next_continue(self, times: int = 1) -> None:
        """Compaction overtakes the next `times` open lists: their next continue token is too old (410)."""
        self._expire_next += times

    def page(self, resource: str, limit: int | None, token: str | None, field_selector: str = "") -> ApiAnswer:
        kind = LIST_KINDS[resource]
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
            items = self._snapshots[snapshot_rv] if snapshot_rv >= 0 else self._items(kind, field_selector)
        else:
            snapshot_rv, start = rv, 0
            items = self._items(kind, field_selector)
            self._snapshots[rv] = items
            while len(self._snapshots) > MAX_SNAPSHOTS:
                self._snapshots.pop(min(self._snapshots))
        end = len(items) if not limit else min(len(items), start + limit)
        meta: dict[str, Any] = {"resourceVersion": str(snapshot_rv if snapshot_rv >= 0 else rv)}
        if end < len(items):
            meta["continue"] = _token(snapshot_rv, end)
            meta["remainingItemCount"] = len(items) - end
        self.served.append((resource, token, 200))
        return ApiAnswer(200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": meta, "items": items[start:end]})

    def _items(self, kind: str, field_selector: str) -> list[dict[str, Any]]:
        store = self._cluster.store(kind)
        raws = [json.loads(json.dumps(store[k].raw)) for k in sorted(store)]
        return [r for r in raws if field_selector_matches(r, field_selector)]


class SimApiServer:
    """The simulated cluster on http://127.0.0.1:<port>, for lightkube (`LightkubeCluster`) to talk to."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.lists = ListPages(cluster)
        #: (method, path) of every request, in order
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> SimApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, method: str, url: str, content_type: str, body: bytes) -> ApiAnswer:
        """Route one request (under the server's lock: the cluster is not thread-safe)."""
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        segments = [s for s in parts.path.split("/") if s]
        with self._lock:
            self.requests.append((method, parts.path))
            return self._route(method, segments, query, content_type, body)

    def _route(self, method: str, seg: list[str], query: dict[str, str], content_type: str, body: bytes) -> ApiAnswer:
        path = "/".join(seg)
        if method == "GET" and seg and seg[-1] in LIST_KINDS and "watch" not in query:
            if len(seg) >= 3 and seg[-3] == "namespaces":  # a namespaced list: filter by namespace
                query["fieldSelector"] = ",".join(filter(None, [query.get("fieldSelector"),
                                                                f"metadata.namespace={seg[-2]}"]))
            limit = int(query["limit"]) if query.get("limit") else None
            return self.lists.page(seg[-1], limit, query.get("continue"), query.get("fieldSelector", ""))
        if path.startswith("api/v1/nodes/") and len(seg) == 4:
            return self._node(method, seg[3], content_type, body)
        if method == "POST" and len(seg) == 7 and seg[:3] == ["api", "v1", "namespaces"] and seg[6] == "eviction":
            return self.cluster.eviction(f"{seg[3]}/{seg[5]}")
        if method == "GET" and len(seg) == 7 and seg[4] == "daemonsets":
            found = self.cluster.store("DaemonSet").get(f"{seg[3]}/{seg[6]}")
            return ApiAnswer(200, found.raw) if found is not None else not_found("daemonsets.apps", seg[6])
        return api_status(404, "the server could not find the requested resource", "NotFound")

    def _node(self, method: str, name: str, content_type: str, body: bytes) -> ApiAnswer:
        if method == "GET":
            raw = self.cluster.node_raw(name)
            return ApiAnswer(200, json.loads(json.dumps(raw))) if raw is not None else not_found("nodes", name)
        if method == "DELETE":
            if self.cluster.node_raw(name) is None:
                return not_found("nodes", name)
            self.cluster.delete_node(name)
            return ApiAnswer(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        if method == "PATCH":
            if content_type not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                return api_status(415, f"the body of the request was in an unknown format: {content_type}",
                                  "UnsupportedMediaType")
            return self.cluster.merge_patch_node(name, json.loads(body or b"{}"))
        return api_status(405, f"{method} is not supported", "MethodNotAllowed")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        answer: Callable[[str, str, str, bytes], ApiAnswer] = self.answer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                result = answer(self.command, self.path, self.headers.get("Content-Type", ""),
                                self.rfile.read(length) if length else b"")
                data = json.dumps(result.body).encode()
                self.send_response(result.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve  # noqa: N815 - http.server's naming

        return Handler


__all__ = ["ApiAnswer", "ListPages", "SimApiServer", "api_status", "can_ignore_pdb", "merge_patch", "not_found"]
