"""The disruption executor: carries out `carpool.disruption` decisions of every reason (consolidation,
drift, expiry, repair, and the interruptions `carpool.app.interrupt` records) across runs of the
disruption Lambda (every minute), so a node is only drained once its replacement has joined, and only
terminated once drained (Karpenter's `disruption/queue.go`).

Per run:
0. read the cluster once: nodes, and every unfinished pod as a compact `PodView` (one paged list, each
   page projected as it arrives; full `Pod` models are read only for the nodes a launch is about, by
   field selector `spec.nodeName`). After step 2 only what it changed is read again (nodes, the pods of
   the nodes it drained or removed, the unbound pods), not every pod;
1. record pod changes per node (consolidateAfter's clock);
2. advance disruptions already in progress:
   - replace: wait until every replacement claim is REGISTERED. A replacement that is gone (its claim
     timed out or failed) or has not registered `REPLACEMENT_TIMEOUT` after the decision abandons the
     decision, as Karpenter's orchestration queue does: the node's taint and cordon are removed, the node
     is kept with its pods, nothing is launched again (a later plan may decide anew);
   - then drain (Eviction API: PDB-blocked pods wait for the next run; do-not-disrupt pods block a
     voluntary drain), and once no pod is left, read again from the API server after the cordon (never
     from the run's snapshot): terminate the instance, release the claim, delete the Node;
3. plan (`carpool.disruption.planner`) and start new decisions: a replacement is launched *first* through
   `provision_pods` (which nominates the pods to it, so they are not provisioned twice), then the node is
   cordoned and tainted `karpenter.sh/disrupted:NoSchedule`; a consolidation (empty, underutilized) is
   validated again after the cordon: the node's pods are read again, and a pod the kube-scheduler bound
   to it since the snapshot the plan used aborts the decision (taint and cordon removed, a replacement
   launched for it terminated), as Karpenter's validation does. Then the decision is recorded; deletes
   drain at once.

Each action (a claim's step, a decision, a leftover node) is its own failure unit
(`carpool.app.isolation`): one that fails, such as a TerminateInstances refused by termination
protection or a service control policy, is reported and the run goes on with the others.
   No decision and no drain step starts once the run is `START_SECONDS` old (but the first of each, so
   every run makes progress however long its reads took): decisions left are planned
   again next run; a run that left drains in progress for the next one plans nothing new (new decisions
   would only queue more drains behind them).

What is persisted, where: on the disrupted node's claim, `Claim.disruption` (`DisruptionProgress`:
reason, action, replacement claim names, decision time, termination deadline), `Claim.abandoned_for` (the
replacements of an abandoned decision) and `Claim.pods_digest`/`pods_changed_at`, written with
`saving.amend` (a save conditional on the version read). The claim keeps status REGISTERED on purpose: `ledger.active()`
omits TERMINATING claims, so with that status the orphan sweep in `carpool.app.cleanup` would terminate the
instance before it is drained (its id would be known to no active claim), the watcher would re-register it
(it re-publishes Ready nodes whose claim is not REGISTERED) and the registrar could not release it when the
node disappears. The progress survives all three untouched.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from carpool import delivery, k8s_events, labels, observability
from carpool.amis import ResolvedAmi
from carpool.api.k8s import Node, Pod
from carpool.api.loader import Manifests
from carpool.api.nodeclass import EC2NodeClass
from carpool.app import discovery, drain, images, interrupt, pod_snapshot, pools, recorder, termination
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.isolation import isolated
from carpool.app.provisioning import provision
from carpool.app.wiring import Dependencies
from carpool.catalog import Catalog
from carpool.disruption import candidates, planner
from carpool.disruption import deadline as drain_deadline
from carpool.disruption.decision import Decision, Kind, Reason
from carpool.disruption.podview import PodView
from carpool.scheduling import convert
from carpool.state import saving
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress

log = logging.getLogger(__name__)
#: how long a replace decision waits for its replacement to register before it is abandoned: Karpenter's
#: orchestration queue times a command out after `minRetryDuration` (10 minutes; more only with over 7,500
#: commands queued), then removes the candidates' taint and keeps them (`disruption/queue.go`)
REPLACEMENT_TIMEOUT = timedelta(minutes=10)
#: the reasons whose decision depends on the node's pods as planned (validated again after the cordon)
_VALIDATED = frozenset({Reason.EMPTY, Reason.UNDERUTILIZED})
#: no new decision (launch, cordon) and no node's drain step starts once a run is this old: decisions left
#: are planned again in the next run, drains go on there (their nodes are cordoned and recorded), and the
#: run ends within the disruption Lambda's timeout (`carpool.delivery.TIMEOUT_SECONDS`). A run this old
#: after advancing disruptions in flight plans nothing (the plan would only serve one decision); with none
#: in flight it plans and starts its first decision however old it is, so every run can make progress.
START_SECONDS = 35.0
#: where a warm environment keeps the last consolidation search that found nothing (`planner.Consolidated`)
_CONSOLIDATED_KEY = "disruption.consolidated"
#: Karpenter's `Unconsolidatable` event: written for a node at most this often (`DedupeTimeout`, 15 minutes)
UNCONSOLIDATABLE_EVERY = timedelta(minutes=15)
#: where a warm environment keeps when it last wrote each node's `Unconsolidatable`
_UNCONSOLIDATABLE_KEY = "disruption.unconsolidatable"
#: a node class's AMIs as this run resolved them (`_resolver`)
Resolver = Callable[[EC2NodeClass], list[ResolvedAmi]]


@dataclass
class _World:
    """One consistent read of the cluster and the ledger: nodes, the unfinished pods as `PodView`s, the
    live claims. `touched` collects the nodes this run changed (drained, finished, deleted)."""

    nodes: dict[str, Node]
    pods: list[PodView]
    claims: list[Claim]
    touched: set[str] = field(default_factory=set)
    #: nodes whose drain step was left for the next run (the run was too old to start it)
    deferred: set[str] = field(default_factory=set)
    #: drain steps taken in this run (the first one is taken however old the run is: progress every run)
    steps: int = 0
    #: when the run started (monotonic seconds), before its reads
    started: float = field(default_factory=time.monotonic)
    #: `pod_snapshot.PodSnapshot.generation` of the pods read (what the consolidation gate compares)
    pods_generation: int = 0
    _by_node: dict[str, list[PodView]] | None = None

    def late(self) -> bool:
        """No new drain step or decision starts now (see `START_SECONDS`)."""
        return time.monotonic() - self.started >= START_SECONDS

    def pods_on(self, node: str) -> list[PodView]:
        """The node's pods that need a new home if it goes (indexed once: a run asks for every claim's node)."""
        if self._by_node is None:
            self._by_node = {}
            for p in self.pods:
                if p.node and p.reschedulable:
                    self._by_node.setdefault(p.node, []).append(p)
        return list(self._by_node.get(node, ()))


def run(deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    """One disruption run (called by `carpool.app.disrupt.run` after its clean-up). How long each stage
    took goes to `summary.stages` (seconds)."""
    clock = _Stages(summary)
    world = _observe(deps, started=time.monotonic())
    clock.lap("observe")
    _record_pod_changes(world, deps, now, summary)
    # deleted NodeClaims and Nodes become terminations advanced below (`carpool.app.termination`)
    released = termination.begin(world.nodes, world.claims, deps, now, summary)
    world.claims = [c for c in world.claims if c.name not in released]
    _sweep_leftovers(world, deps, summary)
    in_flight = any(claim.disruption is not None for claim in world.claims)
    for claim in world.claims:
        subject = f"node {claim.node_name or '?'} (claim {claim.name})"
        if _reason(claim) == Reason.INTERRUPTED:
            isolated(summary, "advance", subject, partial(_advance_interrupted, claim, world, deps, now, summary))
        elif claim.disruption is not None:
            isolated(summary, "advance", subject, partial(_advance, claim, world, deps, now, summary))
    if world.touched:
        world = _refresh(world, deps)
    clock.lap("advance")
    if world.deferred:
        log.info("drains of %d nodes go on in the next run: no new disruption starts in this one",
                 len(world.deferred))
        return
    if in_flight and world.late():
        # a plan of a large cluster takes as long as its reads: begun this late, it would take the run past
        # its time for at most one decision, while the disruptions in flight are carried on by the next run
        log.info("this run is %.0f s old after advancing the disruptions in flight: the next run plans",
                 time.monotonic() - world.started)
        return
    plan = _plan(world, deps, now)
    clock.lap("plan")
    for i, decision in enumerate(plan.decisions):
        if i and world.late():
            log.info("%d decisions left for the next run: this run is %.0f s old", len(plan.decisions) - i,
                     time.monotonic() - world.started)
            break
        isolated(summary, "start", ", ".join(decision.nodes),
                 partial(_start, decision, world, deps, now, summary))
    clock.lap("start")


class _Stages:
    """Seconds per stage of a run, into `summary.stages`."""

    def __init__(self, summary: DisruptSummary) -> None:
        self._stages = summary.stages
        self._last = time.monotonic()

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self._stages[stage] = round(self._stages.get(stage, 0.0) + now - self._last, 3)
        self._last = now


def _observe(deps: Dependencies, started: float | None = None) -> _World:
    """Nodes, the pods that are not finished (`carpool.app.pod_snapshot`: the warm environment's views
    brought up to date from the watch, or one paged list with a server-side field selector, projected page
    by page into `PodView`s: Succeeded and Failed pods hold no room and never move), the live claims."""
    started = time.monotonic() if started is None else started  # the run's age counts its reads too
    nodes = {n.name: n for n in deps.cluster.list_nodes()}
    snapshot = pod_snapshot.read(deps)
    return _World(nodes, snapshot.pods(), sorted(deps.ledger.active(), key=lambda c: c.name),
                  started=started, pods_generation=snapshot.generation)


def _refresh(world: _World, deps: Dependencies) -> _World:
    """The world after this run drained or removed nodes, without reading every pod again: nodes and
    claims are read again, and pods only where they changed: those of the touched nodes (field selector
    `spec.nodeName=<node>`) and the unbound ones (`spec.nodeName=`), where evicted pods come back."""
    nodes = {n.name: n for n in deps.cluster.list_nodes()}
    kept = [p for p in world.pods if p.node and p.node not in world.touched]
    fresh = [p for node in sorted(world.touched) if node in nodes for p in deps.cluster.pod_views(node)]
    return _World(nodes, [*kept, *fresh, *deps.cluster.pod_views("")],
                  sorted(deps.ledger.active(), key=lambda c: c.name), deferred=world.deferred,
                  steps=world.steps, started=world.started, pods_generation=-1)  # changed by this run


def _pods_to_move(deps: Dependencies, nodes: Iterable[str], wanted: set[str] | None = None) -> list[Pod]:
    """The full `Pod` models of the nodes' movable pods (those in `wanted`, when given), read node by node
    (field selector `spec.nodeName=<node>`) for a launch: provisioning needs whole pods, and only the pods
    of the nodes a decision is about are read."""
    pods = [p for node in nodes for p in drain.pods_on(deps.cluster, node)]
    return [p for p in pods if wanted is None or p.key in wanted]


# -- 1. consolidateAfter's clock ---------------------------------------------------------------------------
def _record_pod_changes(world: _World, deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    """Remember when each node's set of pods last changed; written only when it changes."""
    for claim in world.claims:
        if claim.status != ClaimStatus.REGISTERED or claim.node_name not in world.nodes:
            continue
        digest = candidates.pods_digest(p.key for p in world.pods_on(claim.node_name or ""))
        if claim.pods_digest == digest:
            continue
        isolated(summary, "record-pods", f"claim {claim.name}", partial(saving.amend, deps.ledger, claim,
                                                                         partial(_pods_changed, digest, now)))


def _pods_changed(digest: str, now: datetime, claim: Claim) -> None:
    claim.pods_digest, claim.pods_changed_at = digest, now


def _without_decision(claim: Claim) -> None:
    claim.disruption = None


def _reason(claim: Claim) -> str:
    """The reason of the disruption in progress on the claim's node ("" when none)."""
    return claim.disruption.reason if claim.disruption is not None else ""


def _replaced_by(claim: Claim) -> list[str]:
    """The replacement claims the disruption in progress waits for."""
    return list(claim.disruption.replaced_by) if claim.disruption is not None else []


def _stamped_deadline(claim: Claim) -> datetime | None:
    """The drain deadline stamped on the disruption in progress, if any."""
    return claim.disruption.termination_deadline if claim.disruption is not None else None


# -- 2. disruptions in progress ----------------------------------------------------------------------------
def _advance(claim: Claim, world: _World, deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    node = world.nodes.get(claim.node_name or "")
    reason = _reason(claim)
    if node is None:
        world.touched.add(claim.node_name or claim.name)
        _finish(claim, None, deps, summary, f"node of claim {claim.name} is gone")
        return
    if not node.spec.unschedulable:  # its decision was recorded, then the run that made it stopped
        drain.cordon(deps.cluster, node.name)
    if _replaced_by(claim) and not _replacements_ready(claim, node, deps, now, summary):
        return
    forceful = reason == Reason.UNHEALTHY
    # the snapshot is from before this run's cordon: a pod bound since must be drained, never terminated
    # with its node, so an empty snapshot is checked against the API server before the node goes
    if world.pods_on(node.name) or drain.pods_on(deps.cluster, node.name):
        if world.late() and world.steps:
            log.info("node %s (%s): its drain continues in the next run (this run is %.0f s old)", node.name,
                     reason, time.monotonic() - world.started)
            world.deferred.add(node.name)
            return
        world.touched.add(node.name)
        world.steps += 1
        deadline = _termination_deadline(claim, deps, now)
        result = drain.drain(deps.cluster, node.name, voluntary=not forceful, deadline=deadline, now=now,
                             lead=NEXT_DRAIN_STEP)
        left = [] if forceful else drain.pods_on(deps.cluster, node.name)
        if left:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(result.blocked.items())) or "pods terminating"
            log.info("node %s (%s): %d pods left to drain (%s)", node.name, reason, len(left), why)
            if reason == Reason.DELETED:
                recorder.record([k8s_events.failed_draining(node.name, len(left))], deps)
            return
    world.touched.add(node.name)
    _finish(claim, node, deps, summary, f"node {node.name} drained ({reason})")


#: when this node's next drain step comes: the disruption function's next scheduled run
NEXT_DRAIN_STEP = timedelta(seconds=delivery.SCHEDULE_SECONDS["disruption"])


def _termination_deadline(claim: Claim, deps: Dependencies, now: datetime) -> datetime | None:
    """When the node's remaining pods are deleted whatever blocks them: stamped on the claim at its first
    drain step (now + its NodePool's `terminationGracePeriod`), read back on later runs; None without one."""
    stamped = _stamped_deadline(claim)
    if stamped is not None:
        return stamped
    pool = next((p for p in deps.config.load().nodepools if p.name == claim.nodepool), None)
    deadline = drain_deadline.termination_deadline(now, pool.termination_grace_period_seconds() if pool else None)
    if deadline is not None:
        saving.amend(deps.ledger, claim, partial(_stamp_deadline, deadline))
        return _stamped_deadline(claim) or deadline
    return deadline


def _stamp_deadline(deadline: datetime, claim: Claim) -> bool:
    """Stamp the drain's deadline on the disruption in progress; False (nothing to write) when another run
    stamped another one meanwhile (the first drain step's is the deadline) or gave the decision up."""
    if claim.disruption is None:
        return False
    if claim.disruption.termination_deadline is None:
        claim.disruption = claim.disruption.model_copy(update={"termination_deadline": deadline})
    return claim.disruption.termination_deadline == deadline


def _advance_interrupted(claim: Claim, world: _World, deps: Dependencies, now: datetime,
                         summary: DisruptSummary) -> None:
    """A node the interruption function is draining: take a drain step too (in case its own follow-ups
    stopped), and finish the node once it is empty or its reclaim time has passed."""
    node = world.nodes.get(claim.node_name or "")
    world.touched.add(claim.node_name or "")
    if node is not None and not node.spec.unschedulable:  # recorded, then the interruption function stopped
        drain.cordon(deps.cluster, node.name)
    if node is not None and interrupt.continue_drain(claim, deps, now):
        return
    _finish(claim, node, deps, summary, f"interrupted node {claim.node_name} drained or reclaimed")


def _replacements_ready(claim: Claim, node: Node, deps: Dependencies, now: datetime,
                        summary: DisruptSummary) -> bool:
    """True when every replacement is registered. A replacement that is gone, or not registered
    `REPLACEMENT_TIMEOUT` after the decision, abandons the decision (`_abandon`); False meanwhile."""
    names = _replaced_by(claim)
    found = {n: deps.ledger.get(n) for n in names}
    lost = [n for n, c in found.items() if c is None]
    waiting = [n for n, c in found.items() if c is not None and c.status != ClaimStatus.REGISTERED]
    if not lost and not waiting:
        return True
    decided = _disrupted_at(claim)
    if lost:
        why = f"its replacement {', '.join(lost)} is gone without registering"
    elif decided is not None and now - decided >= REPLACEMENT_TIMEOUT:
        why = (f"its replacement {', '.join(waiting)} has not registered "
               f"{int(REPLACEMENT_TIMEOUT.total_seconds() // 60)} minutes after the decision")
    else:
        log.info("node %s waits for replacement %s to register", node.name, ", ".join(waiting))
        return False
    _abandon(claim, node, deps, summary, f"{why} ({_launches(len(names))} for it)", names)
    return False


def _launches(n: int) -> str:
    return f"{n} launch" if n == 1 else f"{n} launches"


def _disrupted_at(claim: Claim) -> datetime | None:
    return claim.disruption.decided_at if claim.disruption is not None else None


def _abandon(claim: Claim, node: Node, deps: Dependencies, summary: DisruptSummary, why: str,
             replacements: list[str]) -> None:
    """Give a decision up and keep the node: its taint and cordon removed first (a crash after that leaves
    a decision the next run abandons again), then the decision cleared from the claim. A
    replacement still booting is left to the registration timeout, as Karpenter leaves it to its
    NodeClaim liveness; until it is gone (or registers) the node is not decided on again
    (`Claim.abandoned_for`), or every abandonment would be followed at once by another launch."""
    reason = _reason(claim)
    drain.restore(deps.cluster, node.name)

    def abandon(c: Claim) -> None:
        c.disruption = None
        c.abandoned_for = list(replacements)

    saving.amend(deps.ledger, claim, abandon)
    observability.emit("DisruptionsAbandoned", reason=reason)
    _note(summary, f"{reason} disruption of node {node.name} abandoned: {why}; the node is kept, its "
                   "taint and cordon removed")


def _finish(claim: Claim, node: Node | None, deps: Dependencies, summary: DisruptSummary, why: str) -> None:
    """Terminate, release, delete the Node, in that order: a crash after any step is finished by the next
    run (a terminate is idempotent; a tainted node without a claim is swept). The Node's termination
    finalizer (and the NodeClaim) go once EC2 says the instance is gone, now or in a later run
    (`termination.let_go`)."""
    instance = claim.instance_id or (node.instance_id() if node else None)
    if instance:
        deps.compute.terminate_instances([instance])
    deps.ledger.release(claim)
    if node is not None:
        deps.cluster.delete_node(node.name)
        termination.let_go(deps, node, instance, claim.name)
    _note(summary, f"{why}: instance {instance or '?'} terminated, claim {claim.name} released")


def _sweep_leftovers(world: _World, deps: Dependencies, summary: DisruptSummary) -> None:
    """Nodes carpool tainted for disruption whose claim is already released (a run stopped between
    release and Node deletion): finish them."""
    known = {c.name for c in world.claims}
    cluster = deps.settings.cluster_name
    for node in world.nodes.values():
        if node.labels.get(labels.OWNED_BY) != cluster or node.labels.get(labels.CLAIM) in known:
            continue
        if node.metadata.deletion_timestamp is not None:
            continue  # deleted already: it goes with its instance (`termination.begin` lets it go)
        tainted = any(t.key == labels.DISRUPTED_TAINT for t in node.taints())
        if not tainted or deps.ledger.get(node.labels.get(labels.CLAIM, "")) is not None:
            continue
        isolated(summary, "sweep", f"node {node.name}", partial(_sweep_one, node, world, deps, summary))


def _sweep_one(node: Node, world: _World, deps: Dependencies, summary: DisruptSummary) -> None:
    if (iid := node.instance_id()) is not None:
        deps.compute.terminate_instances([iid])
    deps.cluster.delete_node(node.name)
    world.touched.add(node.name)
    _note(summary, f"node {node.name} was disrupted but never deleted: deleted")


# -- 3. planning -------------------------------------------------------------------------------------------
def _plan(world: _World, deps: Dependencies, now: datetime) -> planner.Plan:
    names = {c.name for c in world.claims}
    if not any(n.labels.get(labels.CLAIM) in names for n in world.nodes.values()):
        return planner.Plan()  # a candidate is a node whose claim label names a claim: none yet (nodes boot)
    # only pods waiting for a node can hold a nomination that matters: read those by key, not every one
    waiting = [p.key for p in world.pods if not p.node]
    view = candidates.build(list(world.nodes.values()), world.pods, world.claims, deps.cluster.list_pdbs(),
                            deps.settings.cluster_name, now, deps.ledger.nominated(now, waiting) if waiting else {})
    _hold_abandoned(view, world.claims)
    _hold_unserved_pools(view, deps)
    if not any(not c.disrupting for c in view.candidates):
        return planner.Plan()  # nothing of carpool's to judge: skip pools, AMIs and the catalog
    manifests = deps.config.load()
    catalog = deps.catalog.get(now)
    classes = {c.name: c for c in manifests.nodeclasses}
    resolved = _resolver(deps)
    # the offerings provisioning may launch now: capacity errors remembered, zones with a subnet
    unavailable, usage = set(deps.offerings.unavailable(now)), deps.ledger.usage()
    prepared = pools.prepare(manifests, catalog, resolved, deps.cluster.cni_env(), deps.capacity.all(now),
                             unavailable, usage,
                             zones_of=lambda nc: {s["AvailabilityZone"] for s in discovery.subnets(nc, deps)})
    inputs = planner.Inputs(
        view=view,
        nodepools={p.name: p for p in manifests.nodepools},
        nodeclasses=classes,
        pool_specs=prepared.specs,
        daemonsets=[convert.pod_spec(ds.template_pod()) for ds in deps.cluster.list_daemonsets()],
        expected_amis=_expected_amis(view, classes, catalog, resolved),
        type_labels={c.instance_type: catalog.types[c.instance_type].labels for c in view.candidates
                     if c.instance_type in catalog.types},
        state=_state(world, manifests, catalog, unavailable, usage),
    )
    plan = planner.plan(inputs, now, planner.Options(consolidated=deps.cache.get(_CONSOLIDATED_KEY)))
    deps.cache[_CONSOLIDATED_KEY] = plan.consolidated
    for node, why in sorted(plan.waiting.items()):
        log.info("node %s not disrupted now: %s", node, why)
    recorder.record([k8s_events.disruption_blocked(node, why) for node, why in sorted(plan.waiting.items())], deps)
    recorder.record([k8s_events.unconsolidatable(node, why) for node, why in _due_unconsolidatable(plan, deps, now)],
                    deps)
    return plan


def _due_unconsolidatable(plan: planner.Plan, deps: Dependencies, now: datetime) -> list[tuple[str, str]]:
    """The kept nodes whose `Unconsolidatable` event is due: Karpenter writes a node's at most once per
    `UNCONSOLIDATABLE_EVERY` (its `DedupeTimeout`, by node), whatever the message; a search every minute would
    otherwise rewrite a thousand nodes' events (bumping their counts) every minute. Remembered by the warm
    environment; at most the recorder's bound a run, the rest next run."""
    written: dict[str, datetime] = deps.cache.setdefault(_UNCONSOLIDATABLE_KEY, {})
    for node in [n for n, at in written.items() if now - at >= UNCONSOLIDATABLE_EVERY]:
        del written[node]
    due = [(node, why) for node, why in sorted(plan.kept.items()) if why and node not in written]
    due = due[:recorder.MAX_PER_INVOCATION]
    written.update((node, now) for node, _why in due)
    return due


def _state(world: _World, manifests: Manifests, catalog: Catalog, unavailable: set[tuple[str, str, str]],
           usage: Mapping[str, Mapping[str, int]]) -> str:
    """A digest of what a consolidation search depends on besides the candidates and budgets the planner
    adds: the pods (`pod_snapshot`'s generation: a change to any pod changes it), each node's labels, taints,
    cordon, allocatable and readiness, the claims' steps, the pools and classes, the catalog, the offerings
    found unavailable and the pools' usage. "" (search) when this run changed pods itself."""
    if world.pods_generation < 0:
        return ""
    nodes = [(n.name, sorted(n.labels.items()), repr(n.taints()), n.spec.unschedulable, repr(n.allocatable()),
              n.is_ready()) for n in sorted(world.nodes.values(), key=lambda n: n.name)]
    claims = [(c.name, c.status, c.node_name, c.disruption is not None, c.abandoned_for) for c in world.claims]
    config = [m.model_dump_json() for m in (*manifests.nodepools, *manifests.nodeclasses)]
    return planner.digest(world.pods_generation, nodes, claims, config, id(catalog), sorted(unavailable),
                          sorted((pool, sorted(used.items())) for pool, used in usage.items()))


def _hold_abandoned(view: candidates.ClusterView, claims: list[Claim]) -> None:
    """Nodes whose last decision was abandoned while its replacement still boots stay out of this plan
    (Karpenter's simulation does not decide on the strength of an uninitialized node)."""
    by_name = {c.name: c for c in claims}
    for i, candidate in enumerate(view.candidates):
        claim = by_name.get(candidate.claim)
        names = claim.abandoned_for if claim is not None else []
        booting = [n for n in names if (r := by_name.get(n)) is not None and r.status != ClaimStatus.REGISTERED]
        if booting and not candidate.reserved:
            view.candidates[i] = dataclasses.replace(
                candidate, reserved=f"the replacement {', '.join(booting)} of its abandoned disruption still boots")


def _hold_unserved_pools(view: candidates.ClusterView, deps: Dependencies) -> None:
    """Nodes of a NodePool the cluster holds but carpool does not serve (invalid, or its class is) stay: a
    bad edit must not replace a pool's nodes as if it were gone. Karpenter does not disrupt a node whose
    NodePool it cannot use either (`pkg/controllers/disruption/types.go` `NewCandidate`)."""
    verdicts = deps.config.current().verdicts
    for i, candidate in enumerate(view.candidates):
        verdict = verdicts.get(("NodePool", candidate.pool))
        if verdict is not None and verdict.problems and not candidate.reserved:
            view.candidates[i] = dataclasses.replace(
                candidate, reserved=f"its NodePool {candidate.pool} is not served ({'; '.join(verdict.problems)})")


def _resolver(deps: Dependencies) -> Resolver:
    """AMI resolution once per node class per run; a class that cannot be resolved resolves to nothing
    (launching for it is impossible anyway, and its nodes are then not judged for AMI drift)."""
    cache: dict[str, list[ResolvedAmi]] = {}

    def resolve(nodeclass: EC2NodeClass) -> list[ResolvedAmi]:
        if nodeclass.name not in cache:
            try:
                cache[nodeclass.name] = images.resolve(nodeclass, deps)
            except Exception as exc:  # noqa: BLE001 - an AWS or selection error must not stop other pools
                log.warning("AMIs of EC2NodeClass %s cannot be resolved: %s", nodeclass.name, exc)
                cache[nodeclass.name] = []
        return cache[nodeclass.name]

    return resolve


def _expected_amis(view: candidates.ClusterView, classes: Mapping[str, EC2NodeClass], catalog: Catalog,
                   resolve: Resolver) -> dict[str, str | None]:
    """Node -> the AMI the strict mapping gives its type now; nodes of an unresolvable class are left out.
    The mapping reads only the keys the AMIs' requirements name, so nodes of one class and type that agree
    on those labels get one answer (a thousand nodes are a few mappings, not a thousand)."""
    out: dict[str, str | None] = {}
    answers: dict[tuple[str, str, tuple[tuple[str, str], ...]], str | None] = {}
    for c in view.candidates:
        nodeclass = classes.get(c.nodeclass)
        amis = resolve(nodeclass) if nodeclass is not None else []
        if not amis:
            continue
        read = {k for ami in amis for k in ami.requirements}
        key = (c.nodeclass, c.instance_type, tuple(sorted((k, v) for k, v in c.labels.items() if k in read)))
        if key not in answers:
            expected = images.expected_for_node(dict(c.labels), catalog.types.get(c.instance_type), amis)
            answers[key] = expected.id if expected else None
        out[c.node] = answers[key]
    return out


# -- starting decisions ------------------------------------------------------------------------------------
def _start(d: Decision, world: _World, deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    claims = [deps.ledger.get(name) for name in d.claims]
    if any(c is None for c in claims):
        log.info("skipping decision on %s: a claim disappeared meanwhile", ", ".join(d.nodes))
        return
    replacements: list[str] = []
    launched: provision.ProvisionOutcome | None = None
    if d.kind == Kind.REPLACE:
        budget = sum(c.price or 0.0 for c in claims if c) if d.reason == Reason.UNDERUTILIZED else None
        got = _launch_replacement(d, world, deps, summary, budget)
        if got is None:
            return
        replacements, launched = got
    # the decision is recorded before anything is done to its nodes: a crash after the cordon then leaves
    # a decision the next run carries on (`_advance` cordons what it finds uncordoned), never a cordoned,
    # tainted node that no decision explains and no run would ever restore
    for claim in claims:
        assert claim is not None
        saving.amend(deps.ledger, claim, partial(_record_decision, d, replacements, now))
    for node in d.nodes:
        drain.cordon(deps.cluster, node)
    if (changed := _no_longer_holds(d, world, deps)):
        _abort(d, [c for c in claims if c is not None], launched, deps, summary, changed)
        return
    suffix = f" (replacement claims {', '.join(replacements)})" if replacements else ""
    _note(summary, d.message + suffix, d.reason.value)
    recorder.record([k8s_events.disrupting(node, d.reason.value, d.message + suffix) for node in d.nodes], deps)
    if d.kind == Kind.DELETE or d.forceful:
        for claim in claims:
            assert claim is not None
            isolated(summary, "advance", f"node {claim.node_name or '?'} (claim {claim.name})",
                     partial(_advance, claim, world, deps, now, summary))


def _record_decision(d: Decision, replacements: list[str], now: datetime, claim: Claim) -> None:
    """The decision as its claim's disruption in progress; a deadline already stamped is kept."""
    claim.disruption = DisruptionProgress(reason=d.reason.value, action=d.kind.value, replaced_by=list(replacements),
                                          decided_at=now, termination_deadline=_stamped_deadline(claim))
    claim.abandoned_for = []


def _no_longer_holds(d: Decision, world: _World, deps: Dependencies) -> str:
    """Why a consolidation decision no longer holds once its nodes are cordoned ("" when it does): a pod
    on a node now that the snapshot the plan used did not have (the kube-scheduler bound it between the
    snapshot and the cordon; after the cordon nothing more can bind). Karpenter validates a
    consolidation again before it acts and abandons it when the cluster changed under it."""
    if d.reason not in _VALIDATED:
        return ""
    for node in d.nodes:
        planned = {p.key for p in world.pods_on(node)}
        bound = sorted(p.key for p in drain.pods_on(deps.cluster, node) if p.key not in planned)
        if bound:
            return f"pod {', '.join(bound)} was bound to {node} after the plan was made"
    return ""


def _abort(d: Decision, claims: list[Claim], launched: provision.ProvisionOutcome | None, deps: Dependencies,
           summary: DisruptSummary, why: str) -> None:
    """Undo a decision that failed its validation: the nodes' taint and cordon removed, then the decision's
    progress cleared from their claims (a crash between leaves a decision the next run carries on), a
    replacement launched for it terminated and released."""
    for node in d.nodes:
        drain.restore(deps.cluster, node)
    for claim in claims:
        saving.amend(deps.ledger, claim, _without_decision)
    undone = _undo(launched, deps, summary) if launched is not None else []
    tail = f"; its replacement {', '.join(undone)} terminated" if undone else ""
    observability.emit("DisruptionsAbandoned", reason=d.reason.value)
    _note(summary, f"not disrupting {', '.join(d.nodes)} ({d.reason}): {why}; the nodes are kept, their taint "
                   f"and cordon removed{tail}")


def _launch_replacement(d: Decision, world: _World, deps: Dependencies, summary: DisruptSummary,
                        cheaper_than: float | None) -> tuple[list[str], provision.ProvisionOutcome] | None:
    """Launch what the decision's pods need: the replacement claims' names and the launch's outcome;
    None (and nothing launched) when that cannot be done.

    The planner chose the replacement with the offerings provisioning may use now (capacity errors
    remembered) and the same scheduler. `provision_pods` schedules again at launch time (an offering may
    have run out since), so for consolidation it gets the nodes' price as a ceiling: no offering at or
    above it can be scheduled or launched, not even as the fallback after a capacity error. A launch is
    therefore never followed by its own termination for not being cheaper; when a capacity error leaves
    no cheaper option, nothing is launched and the decision log says so.
    """
    pods = _pods_to_move(deps, d.nodes, set(d.replacement_pods))
    spent = _spent_nominations(pods, d, deps)
    outcome = provision.provision_pods(pods, deps, reason=f"disruption/{d.reason.value}",
                                       exclude_claims=set(d.claims) | spent, price_ceiling=cheaper_than)
    names = _replacement_names(outcome, deps)
    problem = _replacement_problem(outcome, names)
    launched_price = sum(c.price or 0.0 for c in outcome.launched)
    if not problem and cheaper_than is not None and launched_price >= cheaper_than:
        # cannot happen: the ceiling removed every offering this dear before scheduling and launching
        problem = f"the launched replacement costs ${launched_price:.4f}/h, not less than ${cheaper_than:.4f}/h"
        log.error("BUG: replacement of %s launched above its price ceiling: %s", ", ".join(d.nodes), problem)
        observability.emit("ReplacementAboveCeiling")
    if problem:
        undone = _undo(outcome, deps, summary)
        tail = f"; terminated {', '.join(undone)}" if undone else "; nothing was launched"
        ceiling = f"no replacement cheaper than ${cheaper_than:.4f}/h: " if cheaper_than is not None else ""
        tried = f" ({'; '.join(outcome.decisions)})" if outcome.decisions else ""
        _note(summary, f"not disrupting {', '.join(d.nodes)} ({d.reason}): replacement failed: "
                       f"{ceiling}{problem}{tried}{tail}")
        return None
    return names, outcome


def _spent_nominations(pods: Iterable[Pod], d: Decision, deps: Dependencies) -> set[str]:
    """Registered claims, other than the decision's, still holding nominations of the pods it moves: the
    kube-scheduler (which knows nothing of carpool's plan) bound these pods on the nodes going now, and the
    planner found no room for them on those claims' nodes (else they would not be the replacement's). Their
    nominations are spent, so the replacement takes them over, as an interruption's does
    (`interrupt._spent_nominations`). Counted as replacements they let the node drain at once, its pods back
    to pending with no room coming (Karpenter's perf suite "basic", `examples/025-karpenter-perf-basic.yaml`)."""
    keys = [p.key for p in pods]
    held = deps.ledger.nominated(deps.clock(), keys) if keys else {}
    spent = set()
    for name in set(held.values()) - set(d.claims):
        holder = deps.ledger.get(name)
        if holder is not None and holder.status == ClaimStatus.REGISTERED:
            spent.add(name)
    return spent


def _replacement_problem(outcome: provision.ProvisionOutcome, names: list[str]) -> str:
    """Why the replacement is not there (empty when it is)."""
    if outcome.launch_failures:
        return "; ".join(outcome.launch_failures)
    unplaced = {**outcome.unschedulable, **{k: {"*": v} for k, v in outcome.refused.items()},
                **{k: {"*": v} for k, v in outcome.failed.items()}}
    if unplaced:
        key = sorted(unplaced)[0]
        why = next(iter(unplaced[key].values()), "no option")
        return f"{len(unplaced)} pods could not be placed ({key}: {why})"
    return "" if names else "nothing was launched"


def _undo(outcome: provision.ProvisionOutcome, deps: Dependencies, summary: DisruptSummary) -> list[str]:
    """Terminate and release what a replacement launched that serves no decision. Each claim is its own
    failure unit: one whose instance EC2 refuses to terminate keeps its claim (the registration timeout
    or, once joined and empty, consolidation tries again)."""
    undone: list[str] = []
    for claim in outcome.launched:
        isolated(summary, "undo-replacement", f"claim {claim.name}", partial(_undo_one, claim, deps, undone))
    return undone


def _undo_one(claim: Claim, deps: Dependencies, undone: list[str]) -> None:
    if claim.instance_id:
        deps.compute.terminate_instances([claim.instance_id])
        undone.append(claim.instance_id)
    deps.ledger.release(claim)


def _replacement_names(outcome: provision.ProvisionOutcome, deps: Dependencies) -> list[str]:
    """Claims launched now plus claims the pods were already nominated to (an earlier attempt's)."""
    nominated = deps.ledger.nominated(deps.clock(), outcome.already_nominated) if outcome.already_nominated else {}
    held = {nominated[k] for k in outcome.already_nominated if k in nominated}
    return sorted({c.name for c in outcome.launched} | held)


def _note(summary: DisruptSummary, message: str, reason: str | None = None) -> None:
    """Log a message and add it to the run summary; decisions (with a reason) are also counted."""
    summary.decisions.append(message)
    if reason is not None:
        observability.emit("Disruptions", reason=reason)
    log.info(message)
