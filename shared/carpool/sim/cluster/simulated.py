"""An in-memory Kubernetes cluster implementing `carpool.ports.Cluster`, with a scheduler-lite binder.

The simulation needs a cluster that behaves like the real one where carpool can tell the difference:
pods stay Pending with PodScheduled=False/Unschedulable until a Ready node with room takes them, cordoned
or tainted nodes take nothing new, evictions honour PodDisruptionBudgets, a deleted node takes its pods
with it and their controllers recreate them, and a watch reports every change since a resource version.

Objects are kept as Kubernetes JSON dicts (the source of truth) and turned into `carpool.api` models only
when read, once per change: a 10,000-pod run would otherwise spend its time re-validating models.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from carpool import k8s_events, karpenter_lease
from carpool import resources as res
from carpool.adapters.k8s import reads
from carpool.adapters.k8s.reads import PodProjection
from carpool.api.k8s import TERMINAL_PHASES, DaemonSet, Node, Pod, PodDisruptionBudget
from carpool.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from carpool.disruption import podview
from carpool.disruption.podview import PodView, Shapes
from carpool.k8s_events import KubeEvent
from carpool.karpenter_lease import Lease
from carpool.karpenter_objects import KARPENTER_KINDS, KindNotServed, ObjectKind, ObjectList, kind_named
from carpool.ports import (
    EvictionBlocked,
    NodeChange,
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
from carpool.requirements import Requirements
from carpool.sim.clock import reached
from carpool.sim.cluster.api_answers import (
    MULTIPLE_PDBS,
    PDB_VIOLATION,
    ApiAnswer,
    api_status,
    can_ignore_pdb,
    labels_match,
    merge_patch,
    not_found,
    parse_label_selector,
    selects_something,
)
from carpool.sim.cluster.capacity_stamps import CapacityStamps
from carpool.sim.cluster.garbage import GarbageCollector, Owned
from carpool.sim.cluster.leader_election import lease_problem
from carpool.sim.cluster.objects import KarpenterStore, field_errors, invalid_message
from carpool.sim.cluster.podfilters import PodCheck, PodFilters, expression_holds
from carpool.sim.cluster.records import Record as _Record
from carpool.sim.cluster.specs import Cni
from carpool.taints import Taint, Toleration, untolerated

#: The pod spec fields `Pod.requests` reads (containers' resources and restartPolicy, overhead).
_REQUEST_FIELDS = ("containers", "initContainers", "overhead")
#: objects per list page, as the adapter asks for them (`carpool.adapters.k8s.cluster.LIST_CHUNK`)
LIST_PAGE = 500

#: How long kube-apiserver's watch cache holds a change: at least `eventFreshDuration` (75 s, the bookmark
#: period plus a margin; `k8s.io/apiserver/pkg/storage/cacher`), more while its buffer is not full. Here
#: never more (harsher than a quiet server): a watch resuming from before a pod change this old is answered
#: 410 Gone, and the reader lists again.
WATCH_HISTORY_SECONDS = 75.0

#: what a watch's `resource_versions` may call each kind it watches (any case; Pod and Node are always watched)
_WATCH_NAMES = {name: kind for kind, names in (("Pod", ("pod", "pods")), ("Node", ("node", "nodes")),
                                               *((k.kind, (k.kind.lower(), k.plural)) for k in KARPENTER_KINDS))
                for name in names}


def _watched_kind(name: str) -> str:
    """The kind a watch names ("pods", "NodePool", "ec2nodeclasses"); "" for one the cluster does not watch."""
    return _WATCH_NAMES.get(name.lower(), "")


#: Owner kinds whose pods come back (under a new name) when evicted or when their node goes away.
_RECREATING_OWNERS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "Job"})


@dataclass
class BindStats:
    """What one binding pass did (for the timeline and the tests)."""

    bound: int = 0
    pending: int = 0
    newly_unschedulable: int = 0


@dataclass
class _NodeView:
    """A node as the binder sees it during one pass: its labels, hard taints and remaining room."""

    name: str
    labels: dict[str, str]
    taints: list[Taint]
    free: res.Resources
    rv: int


#: the last time written and its text: the clock stands still within a tick, while thousands of pods are
#: created, bound or marked at the same time
_last_iso: tuple[datetime, str] | None = None


def _iso(at: datetime) -> str:
    global _last_iso
    last = _last_iso
    # the same datetime object (the clock's own) has the same fields; anything else is formatted anew
    if last is not None and last[0] is at:
        return last[1]
    text = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_iso = (at, text)
    return text


def pod_key(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def finished(raw: Mapping[str, Any]) -> bool:
    """Succeeded or Failed: what every `status.phase!=Succeeded,status.phase!=Failed` selection leaves out."""
    return (raw.get("status") or {}).get("phase") in TERMINAL_PHASES


def _condition(raw: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def node_ready(raw: Mapping[str, Any]) -> bool:
    cond = _condition(raw, "Ready")
    return cond is not None and cond.get("status") == "True"


def pod_unschedulable(raw: Mapping[str, Any]) -> bool:
    cond = _condition(raw, "PodScheduled")
    return cond is not None and cond.get("status") == "False" and cond.get("reason") == "Unschedulable"


def taints_of(raw: Mapping[str, Any]) -> list[Taint]:
    return [Taint(t["key"], t.get("effect", ""), t.get("value") or "") for t in (raw.get("spec") or {}).get("taints") or []]


def tolerations_of(spec: Mapping[str, Any]) -> list[Toleration]:
    out = []
    for t in spec.get("tolerations") or []:
        out.append(Toleration(t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or ""))
    return out


def node_affinity_terms(spec: Mapping[str, Any]) -> list[Requirements]:
    """The required node affinity terms (ORed); each term's expressions are ANDed."""
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    return [Requirements.from_specs(term.get("matchExpressions") or []) for term in required.get("nodeSelectorTerms") or []]


def node_matches(spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """nodeSelector and required node affinity of a pod spec against a node's labels."""
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    terms = node_affinity_terms(spec)
    return not terms or any(t.satisfied_by(labels) is None for t in terms)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions); an empty selector matches everything."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(expression_holds(labels, e["key"], e["operator"], e.get("values") or [])
               for e in selector.get("matchExpressions") or [])


def _finalized(raw: Mapping[str, Any]) -> bool:
    """Being deleted with no finalizer left: what the API server deletes when an update leaves it so."""
    meta = raw.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")


#: what a client's update cannot change (`rest.BeforeUpdate` keeps the stored values)
_SERVER_METADATA = frozenset({"resourceVersion", "uid", "creationTimestamp", "deletionTimestamp",
                              "deletionGracePeriodSeconds", "generation"})
#: the kinds that have owners here (what the garbage collector is told of)
_GARBAGE_KINDS = frozenset({"Node", *(k.kind for k in KARPENTER_KINDS)})


def _node_admits(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    return node_matches(spec, (node.get("metadata") or {}).get("labels") or {})


def _node_tolerated(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    return untolerated(taints_of(node), tolerations_of(spec)) is None


def _describe(change: NodeChange) -> str:
    parts = [f"{k}={v}" for k, v in sorted(change.labels.items())]
    if change.taints is not None:
        parts.append("taints=[" + ",".join(f"{t['key']}:{t.get('effect', '')}" for t in change.taints) + "]")
    return " ".join(parts)


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1]) * total
        return -(-pct // 100) if round_up else pct // 100
    return int(value)


#: the storage kinds the simulated API server keeps, as the models carpool reads them into
STORAGE_MODELS: dict[str, type[Any]] = {"PersistentVolumeClaim": PersistentVolumeClaim,
                                        "PersistentVolume": PersistentVolume, "StorageClass": StorageClass}


class SimulatedCluster:
    """`carpool.ports.Cluster` in memory, plus what the simulation drives: kubelets register nodes here,
    the runner applies workloads, and `bind()` plays kube-scheduler."""

    def __init__(self, clock: Callable[[], datetime], cni: Cni | None = None, elapsed: Callable[[], float] | None = None) -> None:
        self._clock = clock
        self._elapsed = elapsed or (lambda: 0.0)
        self._cni = cni or Cni()
        self._rv = itertools.count(1)
        self._last_rv = 0
        self.pods: dict[str, _Record] = {}
        self.nodes: dict[str, _Record] = {}
        self.daemonsets: dict[str, _Record] = {}
        self.pdbs: dict[str, _Record] = {}
        #: claims by "namespace/name"; volumes and classes (cluster-scoped) by name
        self.claims: dict[str, _Record] = {}
        self.volumes: dict[str, _Record] = {}
        self.storageclasses: dict[str, _Record] = {}
        #: core/v1 Events by "namespace/name" (what `kubectl describe` shows under Events)
        self.events: dict[str, _Record] = {}
        self._event_lock = threading.Lock()
        #: coordination.k8s.io/v1 Leases by "namespace/name" (Karpenter's leader election: `put_lease`)
        self.leases: dict[str, _Record] = {}
        #: called before a Lease is read: the run writes what a Karpenter controller renewed meanwhile
        #: (`carpool.sim.cluster.leader_election.renewer`)
        self.before_lease_read: Callable[[], None] | None = None
        self._log_rvs: list[int] = []
        #: (type, kind, record) per change, in resource-version order; models are built when read
        self._log: list[tuple[str, str, _Record]] = []
        #: the simulated moment (elapsed seconds) of each change of `_log`
        self._log_times: list[float] = []
        self._names = itertools.count(1)
        #: how long each bound pod waited (seconds of simulated time), for the result
        self.unbound_seconds: list[float] = []
        #: when each pod and node reached each step on the way to capacity (`carpool.sim.run.time_to_capacity`)
        self.stamps = CapacityStamps()
        #: every action carpool took through this port: (elapsed, verb, target)
        self.actions: list[tuple[float, str, str]] = []
        self._fit_cache: dict[tuple[str, str, int], bool] = {}
        #: node -> the elapsed time from which the kube-scheduler binds to it (`Truth.bind_seconds`: the
        #: waiting pods' backoff after the node turned Ready); absent: at once
        self.binding_from: dict[str, float] = {}
        #: a pod's request by the `repr` of the spec fields it is computed from (`_REQUEST_FIELDS`)
        self._requests_by_shape: dict[str, res.Resources] = {}
        #: node -> writes another client will make to it between carpool's next reads and writes
        self._competing_writes: dict[str, int] = {}
        #: blocks a watching invocation until simulated time `until` or a change (see `watch`)
        self.waiter: Callable[[float, Callable[[], bool]], None] | None = None
        #: lets a reader's simulated time pass for decoding the bytes it read (see `_charge`)
        self.charge: Callable[[int], None] | None = None
        #: called with the node's name before a cordon is written (the simulation's `BindRace`s)
        self.before_cordon: Callable[[str], None] | None = None
        #: Karpenter's NodePools, EC2NodeClasses and NodeClaims (`carpool.sim.cluster.objects`), on this
        #: cluster's change log; `karpenter.installed` says which CRDs the scenario installed
        self.karpenter = KarpenterStore(clock, self._record_change, lambda: self.resource_version)
        #: kube-controller-manager's garbage collector (background propagation, at once)
        self.garbage = GarbageCollector(self._garbage_kinds(), self._owner_exists)

    # -- bookkeeping --------------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self._last_rv = next(self._rv)
        return self._last_rv

    @property
    def resource_version(self) -> str:
        return str(self._last_rv)

    def _record_change(self, etype: str, kind: str, rec: _Record) -> None:
        if kind == "Node" and etype == "MODIFIED" and _finalized(rec.raw):
            self._node_gone(rec.raw["metadata"]["name"])  # its last finalizer removed: the update deletes it
            return
        rv = self._next_rv()
        rec.rv = rv
        rec.raw.setdefault("metadata", {})["resourceVersion"] = str(rv)
        rec.model = rec.view = None
        self._log_rvs.append(rv)
        self._log.append((etype, kind, rec))
        self._log_times.append(self._elapsed())
        if kind in _GARBAGE_KINDS:
            self._collect_garbage(etype, kind, rec.raw)

    def _collect_garbage(self, etype: str, kind: str, raw: Mapping[str, Any]) -> None:
        """The garbage collector, told of each change as its informers are (`carpool.sim.cluster.garbage`):
        a Karpenter object gone takes its dependents with it; a dependent written naming only owners that
        do not exist goes too."""
        meta = raw.get("metadata") or {}
        if etype == "DELETED":
            if kind != "Node":
                self.garbage.owner_gone(str(meta.get("uid") or ""))
        elif meta.get("ownerReferences"):
            self.garbage.attempt_to_delete(kind, str(meta.get("name")))

    def _owner_exists(self, kind: str, name: str, uid: str) -> bool | None:
        """Whether the owner a reference names is there (same name and uid); None for a kind the garbage
        collector does not resolve (not kept here, or a Karpenter kind whose CRD is not installed)."""
        if kind == "Node":
            found = self.nodes.get(name)
        elif kind in self.karpenter.stores and kind_named(kind) in self.karpenter.installed:
            found = self.karpenter.stores[kind].get(name)
        else:
            return None
        return found is not None and (found.raw.get("metadata") or {}).get("uid") == uid

    def _garbage_kinds(self) -> dict[str, Owned]:
        """How the garbage collector reaches each kind that has owners here."""
        def karpenter(kind: ObjectKind) -> Owned:
            def set_owners(name: str, refs: list[dict[str, Any]]) -> None:
                self.karpenter.patch_object(kind, name, {"metadata": {"ownerReferences": refs}})

            return Owned(lambda: self.karpenter.stores[kind.kind], lambda name: self.karpenter.delete_object(kind, name),
                         set_owners)

        def set_node_owners(name: str, refs: list[dict[str, Any]]) -> None:
            self.update_node(name, lambda raw: raw["metadata"].update(ownerReferences=refs) is None)

        return {**{k.kind: karpenter(k) for k in KARPENTER_KINDS},
                "Node": Owned(lambda: self.nodes, self._node_deletion, set_node_owners)}

    def _model(self, kind: str, rec: _Record) -> Any:
        if kind in self.karpenter.stores:  # Karpenter's kinds cross as JSON, a copy for each reader
            return json.loads(self.encoded(rec))
        if rec.model is None:
            models: dict[str, type[Any]] = {"Pod": Pod, "Node": Node, "DaemonSet": DaemonSet,
                                            "PodDisruptionBudget": PodDisruptionBudget, **STORAGE_MODELS}
            cls = models[kind]
            rec.model = cls.model_validate(rec.raw)
        return rec.model

    # -- the Cluster port -----------------------------------------------------------------------------
    def list_pods(self) -> list[Pod]:
        return [self._model("Pod", r) for r in self.pods.values()]

    def active_pods(self) -> list[Pod]:
        """What the field selector `status.phase!=Succeeded,status.phase!=Failed` answers."""
        return [self._model("Pod", r) for r in self.pods.values() if not finished(r.raw)]

    def pods_on_node(self, node_name: str) -> list[Pod]:
        """What the field selector `spec.nodeName=<node>` answers."""
        return [self._model("Pod", r) for r in self.pods.values() if (r.raw.get("spec") or {}).get("nodeName") == node_name]

    def pod_views(self, node_name: str | None = None) -> list[PodView]:
        """What the field selector `status.phase!=Succeeded,status.phase!=Failed` (plus
        `spec.nodeName=<node>` when given) answers, as `PodView`s.

        Views are made the way the API adapter makes them from a list page (`PodProjection`, scheduling
        shapes shared per read), once per change of each pod; a `PodView` is frozen and shares its
        parts the way the adapter's views of one read do."""
        shapes = Shapes()
        out = []
        for rec in self.pods.values():
            raw = rec.raw
            if finished(raw):
                continue
            if node_name is not None and ((raw.get("spec") or {}).get("nodeName") or "") != node_name:
                continue
            if rec.view is None:
                rec.view = self._view(rec, shapes)
            out.append(rec.view)
        return out

    def pod_views_versioned(self) -> tuple[list[PodView], str]:
        """Every node's unfinished pods and the list's resource version (charged as the list is read)."""
        views = self.pod_views()
        self._charge(r for r in self.pods.values() if not finished(r.raw))
        return views, self.resource_version

    def pod_view_changes(self, since: str) -> PodViewChanges:
        """What a watch of the unfinished pods from `since` sends at once: each pod changed since, in its
        latest state (an informer catching up), None for one deleted or finished (the field selector's
        watch sends DELETED). 410 (`ResourceVersionExpired`) when the first pod change after `since` is
        older than the watch cache holds (`WATCH_HISTORY_SECONDS`). The version to resume from is the
        last change's, not the cluster's: no bookmark comes in so short a read."""
        start = int(since) if str(since).isdigit() else -1
        if start < 0 or self.watch_expired("Pod", start) is not None:
            raise ResourceVersionExpired("Pod", since)
        i = bisect.bisect_right(self._log_rvs, start)
        latest: dict[int, tuple[int, str, _Record]] = {}
        for rv, (etype, kind, rec) in zip(self._log_rvs[i:], self._log[i:], strict=True):
            if kind == "Pod":
                latest[id(rec)] = (rv, etype, rec)
        ordered = sorted(latest.values(), key=lambda e: e[0])
        self._charge(rec for _rv, _etype, rec in ordered)
        shapes, changes = Shapes(), []
        for _rv, etype, rec in ordered:
            if etype == "DELETED" or finished(rec.raw):
                changes.append(PodViewChange(pod_key(rec.raw), None))
                continue
            if rec.view is None:
                rec.view = self._view(rec, shapes)
            changes.append(PodViewChange(pod_key(rec.raw), rec.view))
        return PodViewChanges(changes, str(ordered[-1][0]) if ordered else str(since))

    def _view(self, rec: _Record, shapes: Shapes) -> PodView:
        try:
            projected = msgspec.convert(rec.raw, PodProjection)
        except msgspec.ValidationError:  # JSON no API server would send (a null list): read the model
            return podview.from_pod(self._model("Pod", rec))
        return projected.view(shapes)

    def pod_keys(self) -> set[str]:
        return set(self.pods)

    def pending_pods(self) -> list[Pod]:
        """What the API server's field selector `spec.nodeName=,status.phase=Pending` answers."""
        recs = [r for r in self.pods.values()
                if not (r.raw.get("spec") or {}).get("nodeName") and (r.raw.get("status") or {}).get("phase") == "Pending"]
        self._charge(recs)
        return [self._model("Pod", r) for r in recs]

    def pods_selected(self, namespace: str | None, selector: str) -> list[Pod]:
        """What the label selector (and the `status.phase!=Succeeded,status.phase!=Failed` field selector)
        answers in `namespace` (every namespace with None), charged for what it sends."""
        recs = [r for r in self._labelled("Pod", selector) if not finished(r.raw)
                and (namespace is None or ((r.raw.get("metadata") or {}).get("namespace") or "default") == namespace)]
        self._charge(recs)
        return [self._model("Pod", r) for r in recs]

    def joining_nodes(self) -> list[Node]:
        """What the adapter's label selector (`reads.JOINING_NODES`) answers."""
        recs = self._labelled("Node", reads.JOINING_NODES)
        self._charge(recs)
        return [self._model("Node", r) for r in recs]

    def _labelled(self, kind: str, selector: str) -> list[_Record]:
        """The `kind` objects a label selector selects, read as kube-apiserver reads it (the same parser the
        simulated API server answers with)."""
        terms = parse_label_selector(selector)
        return [r for r in self.store(kind).values() if labels_match(r.raw, terms)]

    def list_nodes(self) -> list[Node]:
        self._charge(self.nodes.values())
        return [self._model("Node", r) for r in self.nodes.values()]

    def node_names(self) -> set[str]:
        """What a metadata-only node list answers (charged for the metadata it sends)."""
        if self.charge is not None:
            self.charge(sum(len(json.dumps(r.raw.get("metadata") or {})) for r in self.nodes.values()))
        return set(self.nodes)

    def uninitialized_node_pages(self) -> Iterator[list[Node]]:
        """What the adapter's label selector (`reads.UNINITIALIZED_NODES`) answers, in pages of `LIST_PAGE`,
        each read (and charged) when the reader asks for it."""
        return self._pages("Node", self._labelled("Node", reads.UNINITIALIZED_NODES))

    def pending_pod_pages(self) -> Iterator[list[Pod]]:
        """`pending_pods` in pages of `LIST_PAGE`."""
        recs = [r for r in self.pods.values()
                if not (r.raw.get("spec") or {}).get("nodeName") and (r.raw.get("status") or {}).get("phase") == "Pending"]
        return self._pages("Pod", recs)

    def _pages(self, kind: str, recs: list[_Record]) -> Iterator[list[Any]]:
        for start in range(0, len(recs), LIST_PAGE):
            page = recs[start:start + LIST_PAGE]
            self._charge(page)
            yield [self._model(kind, r) for r in page]

    def _charge(self, records: Iterable[_Record]) -> None:
        """A read of `records` takes the reader simulated time in proportion to their JSON's size, what the
        API server sends and the reader decodes (`charge`, set by the simulation for readers that run on
        the simulated clock)."""
        if self.charge is not None:
            self.charge(sum(len(self.encoded(r)) for r in records))

    def get_node(self, name: str) -> Node | None:
        rec = self.nodes.get(name)
        return self._model("Node", rec) if rec is not None else None

    def list_daemonsets(self) -> list[DaemonSet]:
        return [self._model("DaemonSet", r) for r in self.daemonsets.values()]

    def list_pdbs(self) -> list[PodDisruptionBudget]:
        return [self._model("PodDisruptionBudget", r) for r in self.pdbs.values()]

    def get_lease(self, namespace: str, name: str) -> Lease | None:
        """The port's `get_lease`, from what a GET of the Lease answers (`lease_get`)."""
        answer = self.lease_get(namespace, name)
        return karpenter_lease.from_json(answer.body) if answer.code == 200 else None

    def lease_get(self, namespace: str, name: str) -> ApiAnswer:
        """GET .../namespaces/<ns>/leases/<name>: 200 with the Lease, 404 as the API server words it."""
        if self.before_lease_read is not None:
            self.before_lease_read()
        rec = self.leases.get(f"{namespace}/{name}")
        if rec is None:
            return api_status(404, f'leases.coordination.k8s.io "{name}" not found', "NotFound",
                              {"name": name, "group": "coordination.k8s.io", "kind": "leases"})
        return ApiAnswer(200, copy.deepcopy(rec.raw))

    def put_lease(self, raw: Mapping[str, Any]) -> ApiAnswer:
        """Create the Lease or replace it (a leader's create, then its updates): 400 for what the API
        server cannot decode (`leader_election.lease_problem`), else 201 / 200 with the Lease as stored."""
        lease = copy.deepcopy(dict(raw))
        problem = lease_problem(lease)
        if problem is not None:
            return api_status(400, problem, "BadRequest")
        meta = lease.setdefault("metadata", {})
        key = f"{meta.setdefault('namespace', 'default')}/{meta['name']}"
        old = self.leases.get(key)
        meta["uid"] = old.raw["metadata"]["uid"] if old is not None else str(uuid.uuid5(uuid.NAMESPACE_URL, key))
        meta.setdefault("creationTimestamp", _iso(self._clock()) if old is None else old.raw["metadata"].get("creationTimestamp"))
        rec = _Record(lease, 0)
        self.leases[key] = rec
        self._record_change("MODIFIED" if old is not None else "ADDED", "Lease", rec)
        return ApiAnswer(200 if old is not None else 201, copy.deepcopy(lease))

    def storage_for(self, pods: Sequence[Pod]) -> StorageObjects:
        """What the API server answers to the reads the lightkube adapter makes: the named claims of
        each namespace, the volumes they are bound to, every StorageClass; nothing without claims."""
        wanted = claimed(pods)
        if not wanted:
            return StorageObjects([], [], [])
        claims = [self._model("PersistentVolumeClaim", rec) for ns, names in wanted.items() for name in sorted(names)
                  if (rec := self.claims.get(f"{ns}/{name}")) is not None]
        bound = {c.spec.volume_name for c in claims if c.spec.volume_name}
        volumes = [self._model("PersistentVolume", self.volumes[n]) for n in sorted(bound) if n in self.volumes]
        classes = [self._model("StorageClass", r) for r in self.storageclasses.values()]
        return StorageObjects(claims, volumes, classes)

    def cni_env(self) -> dict[str, str]:
        """What `aws-node`'s env would say for the scenario's CNI settings."""
        return {
            "ENABLE_PREFIX_DELEGATION": str(self._cni.prefix_delegation).lower(),
            "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": str(self._cni.custom_networking).lower(),
            "WARM_ENI_TARGET": "1",
        }

    def cordon(self, node_name: str) -> None:
        if self.before_cordon is not None:
            self.before_cordon(node_name)
        rec = self._node(node_name)
        self.actions.append((self._elapsed(), "cordon", node_name))
        if not rec.raw.setdefault("spec", {}).get("unschedulable"):
            rec.raw["spec"]["unschedulable"] = True
            self._record_change("MODIFIED", "Node", rec)

    def uncordon(self, node_name: str) -> None:
        rec = self._node(node_name)
        self.actions.append((self._elapsed(), "uncordon", node_name))
        if rec.raw.setdefault("spec", {}).pop("unschedulable", None):
            self._record_change("MODIFIED", "Node", rec)

    def taint(self, node_name: str, taint: Taint) -> None:
        rec = self._node(node_name)
        self.actions.append((self._elapsed(), "taint", f"{node_name} {taint}"))
        taints = rec.raw.setdefault("spec", {}).setdefault("taints", [])
        if any(t["key"] == taint.key and t.get("effect") == taint.effect for t in taints):
            return
        entry = {"key": taint.key, "effect": taint.effect}
        if taint.value:
            entry["value"] = taint.value
        taints.append(entry)
        self._record_change("MODIFIED", "Node", rec)

    def patch_node(self, name: str, patch: NodePatch, *, attempts: int = 5) -> Node:
        """Like a merge patch under the resourceVersion read: a write that another client's write overtook
        (see `compete_for`) is refused with a conflict and the patch starts again from a fresh read."""
        for _ in range(attempts):
            rec = self.nodes.get(name)
            if rec is None:
                raise NodeGone(name)
            read_rv = rec.rv
            meta, spec = rec.raw.setdefault("metadata", {}), rec.raw.setdefault("spec", {})
            change = patch.change(meta.get("labels") or {}, meta.get("annotations") or {}, spec.get("taints") or [])
            if not change:
                return self._model("Node", rec)
            self._competing_write(name)
            if name not in self.nodes:
                raise NodeGone(name)
            if rec.rv != read_rv:
                self.actions.append((self._elapsed(), "patch-conflict", name))
                continue
            self._apply(rec, change)
            self.stamps.node_changed(name, rec.raw, self._elapsed())
            self.actions.append((self._elapsed(), "patch-node", f"{name} {_describe(change)}"))
            return self._model("Node", rec)
        raise NodeConflict(name, attempts)

    def _apply(self, rec: _Record, change: NodeChange) -> None:
        meta, spec = rec.raw["metadata"], rec.raw["spec"]
        if change.labels:
            meta["labels"] = {**(meta.get("labels") or {}), **change.labels}
        if change.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **change.annotations}
        if change.taints is not None:
            spec["taints"] = [dict(t) for t in change.taints]
        self._record_change("MODIFIED", "Node", rec)

    def compete_for(self, name: str, writes: int = 1) -> None:
        """Make another client (a kubelet status update, a CNI agent) write to the node `writes` times, each
        between one of carpool's reads of it and carpool's write: the way a real 409 Conflict happens."""
        self._competing_writes[name] = self._competing_writes.get(name, 0) + writes

    def _competing_write(self, name: str) -> None:
        if self._competing_writes.get(name, 0) > 0:
            self._competing_writes[name] -= 1
            rec = self.nodes[name]
            for cond in (rec.raw.get("status") or {}).get("conditions") or []:
                cond["lastHeartbeatTime"] = _iso(self._clock())  # what the kubelet's status update writes
            self._record_change("MODIFIED", "Node", rec)

    def evict(self, pod_key: str) -> None:
        """The port's eviction: the Eviction subresource's answer (`eviction`) as the lightkube adapter
        reads it. 404 is done; 429 (a budget has no disruption left) and 500 (several budgets cover the
        pod) are `EvictionBlocked`, carrying the API server's message and causes."""
        answer = self.eviction(pod_key)
        if answer.code < 300 or answer.code == 404:
            return
        if answer.code in (429, 500):
            raise EvictionBlocked(f"{pod_key}: {answer.text}")
        raise RuntimeError(f"evicting {pod_key}: HTTP {answer.code}: {answer.text}")

    def eviction(self, pod_key: str) -> ApiAnswer:
        """What `POST .../pods/<name>/eviction` answers, after `pkg/registry/core/pod/storage/eviction.go`:
        a pod that is gone is 404; a Pending, finished or terminating pod is deleted without looking at
        budgets; every budget whose selector matches the pod is collected, and more than one is
        `500 This pod has more than one PodDisruptionBudget...` (nothing is evicted); one budget without a
        disruption left is `429 TooManyRequests` with a `DisruptionBudget` cause; else the pod goes."""
        ns, name = pod_key.split("/", 1) if "/" in pod_key else ("default", pod_key)
        rec = self.pods.get(f"{ns}/{name}")
        if rec is None:
            return not_found("pods", name)
        if not can_ignore_pdb(rec.raw):
            covering = self._covering_pdbs(rec)
            if len(covering) > 1:
                self.actions.append((self._elapsed(), "eviction-blocked", f"{pod_key} by {','.join(covering)}"))
                return api_status(500, MULTIPLE_PDBS)
            if covering:
                refused = self._budget_refusal(rec, covering[0])
                if refused is not None:
                    self.actions.append((self._elapsed(), "eviction-blocked", f"{pod_key} by {covering[0]}"))
                    return refused
        self.actions.append((self._elapsed(), "evict", pod_key))
        self._remove_pod(f"{ns}/{name}", recreate=True)
        return ApiAnswer(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    def delete_node(self, node_name: str) -> None:
        """DELETE of the Node object (`_node_deletion`): with finalizers it stays, being deleted, until they
        are removed; once it is gone, pod garbage collection removes its pods (controllers recreate them)."""
        if node_name not in self.nodes:
            return
        self.actions.append((self._elapsed(), "delete-node", node_name))
        self._node_deletion(node_name)

    def _node_deletion(self, name: str) -> None:
        """A DELETE of a Node as the API server does it (`Store.Delete`): without finalizers the node goes;
        with them `markAsDeleting` sets `deletionTimestamp` and `deletionGracePeriodSeconds: 0` (MODIFIED)
        and the node stays, taking no new pods, until an update removes the last one (`_record_change`
        then deletes it); a second DELETE changes nothing."""
        rec = self.nodes.get(name)
        if rec is None:
            return
        meta = rec.raw.setdefault("metadata", {})
        if not meta.get("finalizers"):
            self._node_gone(name)
        elif not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = _iso(self._clock())
            meta["deletionGracePeriodSeconds"] = 0
            self._record_change("MODIFIED", "Node", rec)

    def watch(self, resource_versions: Mapping[str, str], timeout_seconds: float = 0.0,
              idle_seconds: float | None = None) -> Iterator[WatchEvent | None]:
        """Changes since the given resource versions (keys: `Pod`/`pods`, `Node`/`nodes`, and Karpenter's
        `NodePool`/`nodepools`, `EC2NodeClass`/`ec2nodeclasses`, `NodeClaim`/`nodeclaims`; any case). Pods and
        nodes are always watched, Karpenter's kinds when named (their objects as JSON copies; a kind whose
        CRD is not installed is `KindNotServed`, as the API server's 404).

        A kind without a version starts like a fresh watch: ADDED for every current object. With a
        `waiter` installed (the simulation's loop: `carpool.sim.run.discrete.Processes.wait`), the stream
        follows simulated time as an API server's does: each change is delivered at the moment it
        happens, None after every `idle_seconds` without one, until `timeout_seconds` have passed.
        Without one (unit tests) it delivers what has happened and ends."""
        named = {_watched_kind(k): v for k, v in resource_versions.items()}
        karpenter = [k for k in KARPENTER_KINDS if k.kind in named]
        for served in karpenter:
            if served not in self.karpenter.installed:
                raise KindNotServed(served)
        since = {k.lower(): int(v) for k, v in named.items() if k and str(v).isdigit()}
        fresh = [("Pod", self.pods), ("Node", self.nodes), *((k.kind, self.karpenter.stores[k.kind]) for k in karpenter)]
        for kind, store in fresh:
            if kind.lower() not in since:
                for rec in list(store.values()):
                    yield WatchEvent("ADDED", kind, self._model(kind, rec), str(rec.rv))
                since[kind.lower()] = self._last_rv
        deadline = round(self._elapsed() + timeout_seconds, 6)  # a moment the clock can show
        while True:
            changes = self._changes_after(since)
            self._charge(rec for _event, rec in changes)
            yield from (event for event, _rec in changes)
            if self.waiter is None or reached(self._elapsed(), deadline):
                return
            position = self._last_rv
            wake = min(deadline, round(self._elapsed() + idle_seconds, 6)) if idle_seconds else deadline
            self.waiter(wake, lambda position=position: self._last_rv > position)  # type: ignore[misc]
            if self._last_rv == position and idle_seconds and not reached(self._elapsed(), deadline):
                yield None

    def _changes_after(self, since: dict[str, int]) -> list[tuple[WatchEvent, _Record]]:
        """One event per object changed after `since` (its latest state, like an informer catching up),
        in resource-version order; moves `since` past them."""
        start = min(since.values(), default=self._last_rv)
        i = bisect.bisect_right(self._log_rvs, start)
        latest: dict[tuple[str, int], tuple[int, str, str, _Record]] = {}
        for rv, (etype, kind, rec) in zip(self._log_rvs[i:], self._log[i:], strict=True):
            if kind.lower() in since and rv > since[kind.lower()]:
                latest[(kind, id(rec))] = (rv, etype, kind, rec)
        for kind in since:
            since[kind] = max(since[kind], self._last_rv)
        return [(WatchEvent(etype, kind, self._model(kind, rec), str(rv)), rec)
                for rv, etype, kind, rec in sorted(latest.values(), key=lambda e: e[0])]

    def changes_since(self, kind: str, since: int) -> list[tuple[str, int, dict[str, Any], bool]]:
        """(type, resource version, JSON copy, created) of each `kind` object changed after `since`, once
        per object in its latest state (what the HTTP watch streams); `created` when the object did not
        exist at `since` (its first change after it is its creation), which a field-selector watch needs
        to tell an object that stopped matching (DELETED) from one that never did (nothing)."""
        i = bisect.bisect_right(self._log_rvs, since)
        latest: dict[int, tuple[str, int, _Record, bool]] = {}
        for rv, (etype, k, rec) in zip(self._log_rvs[i:], self._log[i:], strict=True):
            if k == kind:
                created = latest[id(rec)][3] if id(rec) in latest else etype == "ADDED"
                latest[id(rec)] = (etype, rv, rec, created)
        return [(etype, rv, json.loads(self.encoded(rec)), created)
                for etype, rv, rec, created in sorted(latest.values(), key=lambda e: e[1])]

    def watch_expired(self, kind: str, since: int) -> int | None:
        """When a watch of `kind` from `since` asks for changes the watch cache no longer holds (its first
        `kind` change after `since` is older than `WATCH_HISTORY_SECONDS`): the version the cache holds
        changes after, as kube-apiserver's "too old resource version: <since> (<oldest - 1>)" names it.
        None while the changes are held, and always while the simulated clock does not move past the
        window (an HTTP server on a clock that stands still never expires a watch)."""
        cutoff = self._elapsed() - WATCH_HISTORY_SECONDS
        first = bisect.bisect_right(self._log_rvs, since)
        held = bisect.bisect_left(self._log_times, cutoff, lo=first)  # change times only grow
        if not any(k == kind for _etype, k, _rec in self._log[first:held]):
            return None
        return self._log_rvs[held] - 1 if held < len(self._log_rvs) else self._last_rv

    # -- what the simulation drives ---------------------------------------------------------------------
    def add_pod(self, raw: Mapping[str, Any], controller: str | None = None, *, owned: bool = False) -> str:
        """Create a pod (Pending, not yet looked at by the scheduler). The cluster keeps a copy of `raw`
        unless `owned` says the caller hands over a dict nothing else refers to (a fresh `to_json_dict()`):
        copying 10,000 pods of a burst costs seconds."""
        pod = dict(raw) if owned else copy.deepcopy(dict(raw))
        meta = pod.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName') or 'pod-'}{next(self._names):05d}"
        meta.setdefault("uid", f"uid-{meta['namespace']}-{meta['name']}")
        meta["creationTimestamp"] = _iso(self._clock())
        spec = pod.setdefault("spec", {})
        status = pod.setdefault("status", {})
        if not spec.get("nodeName"):
            status["phase"] = "Pending"
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        key = pod_key(pod)
        rec = _Record(pod, 0, created_at=self._elapsed(), controller=controller)
        etype = "MODIFIED" if key in self.pods else "ADDED"
        self.pods[key] = rec
        self._record_change(etype, "Pod", rec)
        return key

    def delete_pod(self, key: str, grace_period_seconds: int | None = None) -> None:
        """A pod's DELETE. Without a grace period: its workload removing it (a scale-down, a finished
        job). With one: a DELETE through the API (carpool's drain at its deadline), which no
        PodDisruptionBudget guards; the pod's controller replaces it as after any deletion of its pod.
        The pod goes at once, as an evicted one does here."""
        if grace_period_seconds is not None and key in self.pods:
            self.actions.append((self._elapsed(), "delete", f"{key} grace={grace_period_seconds}s"))
        self._remove_pod(key, recreate=grace_period_seconds is not None)

    def finish_pod(self, key: str, phase: str = "Succeeded") -> None:
        """A pod's containers ended for good (a Job's pod Succeeded; Failed under `restartPolicy: Never`):
        its phase, as the kubelet's status update writes it. The pod stays until its owner or the pod
        garbage collector deletes it, holding nothing on its node, and leaves every `status.phase!=`
        selection of it (a watch of unfinished pods sends DELETED)."""
        rec = self.pods[key]
        rec.raw.setdefault("status", {})["phase"] = phase
        self._record_change("MODIFIED", "Pod", rec)

    def pod_deletion(self, key: str, grace_period_seconds: str | None) -> ApiAnswer:
        """What `DELETE .../pods/<name>?gracePeriodSeconds=N` answers: 404 for a pod that is gone, 400 for a
        grace that is not a non-negative integer, else 200 with the pod (no budget is consulted)."""
        rec = self.pods.get(key)
        if rec is None:
            return not_found("pods", key.split("/", 1)[-1])
        grace = 30 if grace_period_seconds is None else grace_period_seconds
        if not str(grace).isdigit():
            return api_status(400, f"invalid gracePeriodSeconds {grace!r}", "BadRequest")
        raw = copy.deepcopy(rec.raw)
        self.delete_pod(key, int(grace))
        return ApiAnswer(200, raw)

    # -- events (kube-apiserver's core/v1 Event: create, get, merge patch) ----------------------------------
    def record_event(self, event: KubeEvent, now: datetime) -> None:
        """The port's `record_event`, as the HTTP adapter does it against this server (callers write events
        from worker threads: one at a time here, as the API server serializes writes)."""
        with self._event_lock:
            answer = self.event_create(event.namespace, k8s_events.manifest(event, now))
            if answer.code == 409:
                found = self.events[f"{event.namespace}/{event.name}"]
                count = int(found.raw.get("count") or 1)
                self.event_patch(event.namespace, event.name, k8s_events.repeated(count, now))

    def event_create(self, namespace: str, raw: Mapping[str, Any]) -> ApiAnswer:
        """POST .../namespaces/<ns>/events: 201 with the event, 409 AlreadyExists for a name taken, 400 for
        an event without a name, a reason or an involved object (the API server's `ValidateEvent`)."""
        event = copy.deepcopy(dict(raw))
        meta = event.setdefault("metadata", {})
        meta["namespace"] = namespace
        name = meta.get("name") or ""
        if not name or not event.get("reason") or not (event.get("involvedObject") or {}).get("name"):
            return api_status(422, f"Event {name!r} is invalid: metadata.name, reason and involvedObject are required",
                              "Invalid")
        key = f"{namespace}/{name}"
        if key in self.events:
            return api_status(409, f'events "{name}" already exists', "AlreadyExists")
        rec = _Record(event, 0)
        self.events[key] = rec
        self._record_change("ADDED", "Event", rec)
        return ApiAnswer(201, copy.deepcopy(event))

    def event_get(self, namespace: str, name: str) -> ApiAnswer:
        rec = self.events.get(f"{namespace}/{name}")
        return ApiAnswer(200, copy.deepcopy(rec.raw)) if rec is not None else not_found("events", name)

    def event_patch(self, namespace: str, name: str, patch: Mapping[str, Any]) -> ApiAnswer:
        rec = self.events.get(f"{namespace}/{name}")
        if rec is None:
            return not_found("events", name)
        rec.raw = merge_patch(rec.raw, patch)
        self._record_change("MODIFIED", "Event", rec)
        return ApiAnswer(200, copy.deepcopy(rec.raw))

    def events_of(self, kind: str, name: str) -> list[dict[str, Any]]:
        """The events on one object, oldest first (what `kubectl describe <kind> <name>` lists)."""
        found = [r.raw for r in self.events.values()
                 if (r.raw.get("involvedObject") or {}).get("kind") == kind
                 and (r.raw.get("involvedObject") or {}).get("name") == name]
        return sorted(found, key=lambda e: str(e.get("firstTimestamp")))

    def add_daemonset(self, raw: Mapping[str, Any]) -> None:
        ds = copy.deepcopy(dict(raw))
        meta = ds.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        rec = _Record(ds, 0)
        self.daemonsets[pod_key(ds)] = rec
        self._record_change("ADDED", "DaemonSet", rec)
        for name in list(self.nodes):
            self._place_daemon_pods(name)

    def add_pdb(self, raw: Mapping[str, Any]) -> None:
        pdb = copy.deepcopy(dict(raw))
        pdb.setdefault("metadata", {}).setdefault("namespace", "default")
        rec = _Record(pdb, 0)
        self.pdbs[pod_key(pdb)] = rec
        self._record_change("ADDED", "PodDisruptionBudget", rec)

    def add_storage(self, raw: Mapping[str, Any]) -> None:
        """Create or replace a StorageClass, PersistentVolume or PersistentVolumeClaim as given: the
        simulation plays no volume controller, so a claim is bound (`spec.volumeName`, the
        `pv.kubernetes.io/bind-completed` annotation, phase Bound) only when its manifest says so."""
        obj = copy.deepcopy(dict(raw))
        kind = obj.get("kind", "")
        meta = obj.setdefault("metadata", {})
        if kind == "PersistentVolumeClaim":
            meta.setdefault("namespace", "default")
            key, store = pod_key(obj), self.claims
        elif kind in STORAGE_MODELS:
            key, store = meta["name"], self.volumes if kind == "PersistentVolume" else self.storageclasses
        else:
            raise ValueError(f"not a storage object: {kind!r}")
        rec = _Record(obj, 0)
        etype = "MODIFIED" if key in store else "ADDED"
        store[key] = rec
        self._record_change(etype, kind, rec)

    def add_node(self, raw: Mapping[str, Any]) -> str:
        """Register a node (what a kubelet does); DaemonSet pods are placed on it at once."""
        node = copy.deepcopy(dict(raw))
        name = node["metadata"]["name"]
        node["metadata"]["creationTimestamp"] = _iso(self._clock())
        rec = _Record(node, 0, created_at=self._elapsed())
        self.nodes[name] = rec
        self.stamps.node_created(name, node, self._elapsed())
        self._record_change("ADDED", "Node", rec)
        self._place_daemon_pods(name)
        return name

    def update_node(self, name: str, change: Callable[[dict[str, Any]], bool]) -> None:
        """Apply `change` to a node's JSON; it returns whether anything changed (then a MODIFIED event)."""
        rec = self.nodes.get(name)
        if rec is not None and change(rec.raw):
            self._record_change("MODIFIED", "Node", rec)

    def remove_node(self, name: str) -> None:
        """The cloud node lifecycle controller's DELETE of a node whose instance is gone: the same deletion
        as any client's (`_node_deletion`), so a node with finalizers stays until they are removed."""
        self._node_deletion(name)

    def _node_gone(self, name: str) -> None:
        """The Node object is deleted for good (DELETED); the pod garbage collector then deletes the pods
        bound to it (`gcOrphaned`: at once here, after 40 s of quarantine in kube-controller-manager)."""
        rec = self.nodes.pop(name, None)
        if rec is None:
            return
        self._record_change("DELETED", "Node", rec)
        for key in [k for k, p in self.pods.items() if (p.raw.get("spec") or {}).get("nodeName") == name]:
            self._remove_pod(key, recreate=True)

    def node_raw(self, name: str) -> dict[str, Any] | None:
        rec = self.nodes.get(name)
        return rec.raw if rec else None

    @staticmethod
    def encoded(rec: _Record) -> bytes:
        """The object's JSON, encoded once per change (what the API server's watch cache keeps)."""
        if rec.encoding is None or rec.encoding[0] != rec.rv or rec.encoding[1] != id(rec.raw):
            rec.encoding = (rec.rv, id(rec.raw), json.dumps(rec.raw).encode())
        return rec.encoding[2]

    def changed_keys(self, kind: str, position: int) -> tuple[int, set[str]]:
        """Keys of the `kind` objects changed since the change log's `position`, and the position now
        (the log only grows): what keeps an index of the API server's cache up to date."""
        keys = {pod_key(rec.raw) if kind == "Pod" else rec.raw["metadata"]["name"]
                for _, k, rec in self._log[position:] if k == kind}
        return len(self._log), keys

    def store(self, kind: str) -> Mapping[str, _Record]:
        """The objects of one kind by key (what `carpool.sim.cluster.apiserver` lists)."""
        return {"Pod": self.pods, "Node": self.nodes, "DaemonSet": self.daemonsets,
                "PodDisruptionBudget": self.pdbs, "PersistentVolumeClaim": self.claims,
                "PersistentVolume": self.volumes, "StorageClass": self.storageclasses, "Event": self.events,
                "Lease": self.leases, **self.karpenter.stores}[kind]

    def merge_patch_node(self, name: str, patch: Mapping[str, Any]) -> ApiAnswer:
        """A JSON merge patch of a node as the API server applies it: 404 for a node that is gone, 409 when
        the patch carries a `metadata.resourceVersion` that is no longer the node's, else the patched node
        (the resourceVersion moves on)."""
        rec = self.nodes.get(name)
        if rec is None:
            return not_found("nodes", name)
        self._competing_write(name)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and str(wanted) != str(rec.rv):
            return api_status(409, f'Operation cannot be fulfilled on nodes "{name}": the object has been modified; '
                              "please apply your changes to the latest version and try again", "Conflict",
                              {"name": name, "kind": "nodes"})
        patched = merge_patch(rec.raw, {k: v for k, v in patch.items() if k != "metadata"} | {
            "metadata": {k: v for k, v in (patch.get("metadata") or {}).items() if k not in _SERVER_METADATA}})
        problems = KarpenterStore.finalizer_problems(rec.raw["metadata"], patched["metadata"])
        if problems:
            return api_status(422, f'Node "{name}" is invalid: {invalid_message(problems)}', "Invalid",
                              {"name": name, "kind": "Node", "causes": field_errors(problems)})
        rec.raw = patched
        self.actions.append((self._elapsed(), "patch-node", name))
        self.stamps.node_changed(name, rec.raw, self._elapsed())
        self._record_change("MODIFIED", "Node", rec)
        return ApiAnswer(200, json.loads(json.dumps(rec.raw)))

    def pods_of(self, controller: str) -> list[str]:
        return [k for k, r in self.pods.items() if r.controller == controller]

    def controller_pods(self, controller: str) -> list[tuple[str, Mapping[str, Any]]]:
        """(key, JSON) of a controller's pods, oldest first: what its informer's lister gives a controller
        (node, phase, conditions, timestamps, annotations). Read only."""
        return [(k, r.raw) for k, r in self.pods.items() if r.controller == controller]

    def now(self) -> datetime:
        """The cluster's clock (what a controller's `metav1.Now()` reads)."""
        return self._clock()

    # -- Karpenter's objects (`carpool.karpenter_objects.KarpenterObjects`, `carpool.sim.cluster.objects`) ---
    def list_objects(self, kind: ObjectKind) -> ObjectList:
        return self.karpenter.list_objects(kind)

    def get_object(self, kind: ObjectKind, name: str) -> dict[str, Any] | None:
        return self.karpenter.get_object(kind, name)

    def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.actions.append((self._elapsed(), "create-object", f"{kind.kind}/{(obj.get('metadata') or {}).get('name')}"))
        return self.karpenter.create_object(kind, obj)

    def patch_object(self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        return self.karpenter.patch_object(kind, name, patch, resource_version=resource_version)

    def patch_status(self, kind: ObjectKind, name: str, status: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        return self.karpenter.patch_status(kind, name, status, resource_version=resource_version)

    def delete_object(self, kind: ObjectKind, name: str) -> None:
        self.object_deletion(kind, name)

    def object_deletion(self, kind: ObjectKind, name: str) -> tuple[dict[str, Any], bool] | None:
        """A client's DELETE of a Karpenter object (`KarpenterStore.delete`: the object after it and whether
        it is gone; None when there was none), in `actions` as carpool's."""
        self.actions.append((self._elapsed(), "delete-object", f"{kind.kind}/{name}"))
        return self.karpenter.delete(kind, name)

    def apply_object(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """`kubectl apply` of a NodePool, EC2NodeClass or NodeClaim (`KarpenterStore.apply_object`)."""
        return self.karpenter.apply_object(raw)

    # -- pods and controllers -----------------------------------------------------------------------
    def _remove_pod(self, key: str, recreate: bool) -> None:
        rec = self.pods.pop(key, None)
        if rec is None:
            return
        self._record_change("DELETED", "Pod", rec)
        if recreate and self._recreated(rec):
            self.add_pod(self._replacement(rec.raw), controller=rec.controller, owned=True)

    def _recreated(self, rec: _Record) -> bool:
        owners = (rec.raw.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("kind") == "DaemonSet" for o in owners):
            return False
        return rec.controller is not None or any(o.get("kind") in _RECREATING_OWNERS for o in owners)

    def _replacement(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The pod a ReplicaSet would create instead: same template, new name, not scheduled."""
        pod = copy.deepcopy(dict(raw))
        meta = pod["metadata"]
        owners = meta.get("ownerReferences") or []
        if not any(o.get("kind") == "StatefulSet" for o in owners):
            base = meta["name"].rsplit("-r", 1)[0]
            meta["name"] = f"{base}-r{next(self._names)}"
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            meta.pop(k, None)
        pod["spec"].pop("nodeName", None)
        pod["status"] = {"phase": "Pending"}
        return pod

    def _place_daemon_pods(self, node_name: str) -> None:
        node = self.nodes[node_name].raw
        labels = node["metadata"].get("labels") or {}
        for ds_key, ds in self.daemonsets.items():
            template = copy.deepcopy(((ds.raw.get("spec") or {}).get("template")) or {})
            spec = template.setdefault("spec", {})
            if untolerated(taints_of(node), tolerations_of(spec)) is not None or not node_matches(spec, labels):
                continue
            meta = template.setdefault("metadata", {})
            ns, name = ds_key.split("/", 1)
            meta.update({"name": f"{name}-{node_name}", "namespace": ns,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}]})
            spec["nodeName"] = node_name
            template["status"] = {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}
            self.add_pod(template, owned=True)

    # -- PDBs ------------------------------------------------------------------------------------------
    def _covering_pdbs(self, rec: _Record) -> list[str]:
        """Every budget of the pod's namespace whose selector matches the pod (the eviction handler's
        `getPodDisruptionBudgets`: a nil or empty selector matches nothing there)."""
        meta = rec.raw.get("metadata") or {}
        ns, labels = meta.get("namespace") or "default", meta.get("labels") or {}
        out = []
        for pdb_key, pdb in self.pdbs.items():
            pmeta, selector = pdb.raw.get("metadata") or {}, (pdb.raw.get("spec") or {}).get("selector")
            if (pmeta.get("namespace") or "default") != ns or not selects_something(selector):
                continue
            if selector_matches(selector, labels):
                out.append(pdb_key)
        return out

    def _budget_refusal(self, rec: _Record, pdb_key: str) -> ApiAnswer | None:
        """The one covering budget's verdict (`checkAndDecrement`): None when the eviction may go on. An
        unhealthy pod of a budget that is met anyway may always go."""
        ns, pdb_name = pdb_key.split("/", 1)
        pspec = self.pdbs[pdb_key].raw.get("spec") or {}
        current, desired = self._budget(ns, pspec)
        if not self._healthy(rec.raw) and current >= desired > 0:
            return None
        if current - desired > 0:
            return None
        return api_status(429, PDB_VIOLATION, "TooManyRequests", details={"causes": [{
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"}]})

    def _budget(self, ns: str, pspec: Mapping[str, Any]) -> tuple[int, int]:
        """(currentHealthy, desiredHealthy) of a budget, as the disruption controller computes them."""
        covered = [p.raw for p in self.pods.values()
                   if (p.raw["metadata"].get("namespace") or "default") == ns
                   and selector_matches(pspec.get("selector"), p.raw["metadata"].get("labels") or {})]
        expected, healthy = len(covered), sum(1 for p in covered if self._healthy(p))
        if "minAvailable" in pspec and pspec["minAvailable"] is not None:
            return healthy, _int_or_percent(pspec["minAvailable"], expected, round_up=True)
        if pspec.get("maxUnavailable") is not None:
            return healthy, expected - _int_or_percent(pspec["maxUnavailable"], expected, round_up=True)
        return healthy, expected  # no bound given: nothing may be unavailable beyond what already is

    @staticmethod
    def _healthy(raw: Mapping[str, Any]) -> bool:
        return bool((raw.get("spec") or {}).get("nodeName")) and (raw.get("status") or {}).get("phase") == "Running"

    def _node(self, name: str) -> _Record:
        """The node to write to; the API server answers 404 for one that is gone (`NodeGone`)."""
        rec = self.nodes.get(name)
        if rec is None:
            raise NodeGone(name)
        return rec

    # -- the binder (scheduler-lite) ----------------------------------------------------------------------
    def requests(self, rec: _Record) -> res.Resources:
        """The pod's effective request (`Pod.requests`, sidecar-aware). Pods of one template share their
        containers: one model of those parts serves them all, so binding a fresh burst validates no pod."""
        if rec.requests is None:
            if rec.model is not None:
                rec.requests = dict(rec.model.requests())
            else:
                rec.requests = dict(self._requests_of_spec(rec.raw.get("spec") or {}))
        return rec.requests

    def _requests_of_spec(self, spec: Mapping[str, Any]) -> res.Resources:
        parts = {k: spec[k] for k in _REQUEST_FIELDS if k in spec}
        shape = repr(parts)
        found = self._requests_by_shape.get(shape)
        if found is None:
            if len(self._requests_by_shape) > 100_000:
                self._requests_by_shape.clear()
            found = self._requests_by_shape[shape] = Pod.model_validate({"spec": parts}).requests()
        return found

    def _signature(self, rec: _Record) -> str:
        """Pods that would be placed identically share a signature (one fit check serves them all)."""
        if rec.signature is None:
            spec = rec.raw.get("spec") or {}
            rec.signature = json.dumps([sorted(self.requests(rec).items()), spec.get("nodeSelector"),
                                        (spec.get("affinity") or {}).get("nodeAffinity"),
                                        spec.get("tolerations")], sort_keys=True, default=str)
        return rec.signature

    def _node_views(self) -> list[_NodeView]:
        used: dict[str, res.Resources] = {}
        for p in self.pods.values():
            node = (p.raw.get("spec") or {}).get("nodeName")
            if node:
                used[node] = res.add(used.get(node, {}), self.requests(p))
        views = []
        for name, rec in self.nodes.items():
            raw = rec.raw
            if not node_ready(raw) or (raw.get("spec") or {}).get("unschedulable") or raw["metadata"].get("deletionTimestamp"):
                continue
            if self.binding_from.get(name, 0.0) > self._elapsed():
                continue  # the pods that waited for it are still backing off
            allocatable = res.parse((raw.get("status") or {}).get("allocatable") or {})
            views.append(_NodeView(name, raw["metadata"].get("labels") or {}, taints_of(raw),
                                   res.subtract(allocatable, used.get(name, {})), rec.rv))
        return views

    def _admits(self, sig: str, rec: _Record, view: _NodeView) -> bool:
        """Static checks (taints, selectors, affinity), cached per pod signature and node version."""
        key = (sig, view.name, view.rv)
        ok = self._fit_cache.get(key)
        if ok is None:
            spec = rec.raw.get("spec") or {}
            ok = untolerated(view.taints, tolerations_of(spec)) is None and node_matches(spec, view.labels)
            self._fit_cache[key] = ok
        return ok

    def bind(self) -> BindStats:
        """Bind pending pods (oldest first) to the first Ready node that passes the kube-scheduler's filters
        modelled here: taints, node selector and affinity, resources, and (`sim/podfilters.py`) required
        pod affinity and anti-affinity, both ways, and DoNotSchedule topology spread. Mark the rest
        Unschedulable, as kube-scheduler would.

        The real scheduler scores the nodes that pass; this takes the first (nodes in registration order),
        so what only scores (preferred affinities, ScheduleAnyway spread) is not modelled: a DoNotSchedule
        spread still comes out even, since every node of a domain ahead by maxSkew is filtered out."""
        stats = BindStats()
        pending = [(k, r) for k, r in self.pods.items() if not (r.raw.get("spec") or {}).get("nodeName")
                   and not (r.raw.get("metadata") or {}).get("deletionTimestamp")]
        if not pending:
            return stats
        views = self._node_views()
        filters = PodFilters({n: r.raw for n, r in self.nodes.items()}, lambda: (r.raw for r in self.pods.values()),
                             _node_admits, _node_tolerated)
        cursors: dict[str, int] = {}
        for key, rec in pending:
            req = self.requests(rec)
            i = self._first_fit(rec, req, views, cursors, filters.check(rec.raw))
            if i < len(views):
                views[i].free = res.subtract(views[i].free, req)
                self._bind(key, rec, views[i].name)
                filters.add(rec.raw, views[i].name)
                stats.bound += 1
            else:
                stats.pending += 1
                if self._mark_unschedulable(rec, len(views)):
                    stats.newly_unschedulable += 1
        if len(self._fit_cache) > 200_000:
            self._fit_cache.clear()
        return stats

    def _first_fit(self, rec: _Record, req: res.Resources, views: list[_NodeView], cursors: dict[str, int],
                   check: PodCheck | None) -> int:
        """The index of the first view that takes the pod (`len(views)` if none). Nodes before a signature's
        cursor fail its static checks or lack room for the rest of the pass, so pods of one template do not
        test them again; a pod with inter-pod constraints scans on from there without moving the cursor,
        since another pod of the signature may pass where it fails."""
        sig = self._signature(rec)
        i = cursors.get(sig, 0)
        while i < len(views) and not (self._admits(sig, rec, views[i]) and res.fits(req, views[i].free)):
            i += 1
        cursors[sig] = i
        if check is not None:
            while i < len(views) and not (self._admits(sig, rec, views[i]) and res.fits(req, views[i].free)
                                          and check.allows(views[i].labels)):
                i += 1
        return i

    def _bind(self, key: str, rec: _Record, node_name: str) -> None:
        now = _iso(self._clock())
        before = rec.view
        rec.raw.setdefault("spec", {})["nodeName"] = node_name
        rec.raw["status"] = {"phase": "Running", "startTime": now, "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}
        self.unbound_seconds.append(self._elapsed() - rec.created_at)
        self.stamps.pod_bound(key, node_name, self._elapsed())
        self._record_change("MODIFIED", "Pod", rec)
        if before is not None and not before.terminal:
            # the binding changed the node and the status only: the pod's view as of now follows from
            # the one before (a burst's pods are listed pending, then again bound, all of them)
            rec.view = podview.bound(before, node_name)

    def _mark_unschedulable(self, rec: _Record, ready_nodes: int) -> bool:
        if pod_unschedulable(rec.raw):
            return False
        status = rec.raw.setdefault("status", {})
        status["phase"] = "Pending"
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"] + [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": f"0/{len(self.nodes)} nodes are available: {ready_nodes} ready node(s) cannot take the pod.",
            "lastTransitionTime": _iso(self._clock())}]
        self.stamps.pod_pending(pod_key(rec.raw), self._elapsed())
        self._record_change("MODIFIED", "Pod", rec)
        return True

    # -- views for the runner ------------------------------------------------------------------------------
    def pending_count(self) -> int:
        return sum(1 for r in self.pods.values() if not (r.raw.get("spec") or {}).get("nodeName"))

    def user_pods(self) -> Iterable[_Record]:
        """Pods that are not DaemonSet pods (what a scenario's workload counts)."""
        for r in self.pods.values():
            owners = (r.raw.get("metadata") or {}).get("ownerReferences") or []
            if not any(o.get("kind") == "DaemonSet" for o in owners):
                yield r


__all__ = ["BindStats", "SimulatedCluster", "node_matches", "node_ready", "pod_unschedulable", "selector_matches"]
