"""The disruption executor: carries out `carpool.disruption` decisions across runs of the disruption Lambda
(every minute), so a node is only drained once its replacement has joined, and only terminated once
drained.

Per run:
0. read the cluster once: nodes, and every unfinished pod as a compact `PodView` (one paged list, each
   page projected as it arrives; full `Pod` models are read only for the nodes a launch is about, by
   field selector `spec.nodeName`). After step 2 only what it changed is read again (nodes, the pods of
   the nodes it drained or removed, the unbound pods), not every pod;
1. record pod changes per node (consolidateAfter's clock);
2. advance disruptions already in progress:
   - replace: wait until every replacement claim is REGISTERED (a lost one is launched again, at most
     `MAX_REPLACE_ATTEMPTS` times, then the node drains anyway and its pods are provisioned as pending);
   - then drain (Eviction API: PDB-blocked pods wait for the next run; do-not-disrupt pods block a
     voluntary drain), and once no pod is left: terminate the instance, release the claim, delete the Node;
3. plan (`carpool.disruption.planner`) and start new decisions: a replacement is launched *first* through
   `provision_pods` (which nominates the pods to it, so they are not provisioned twice), then the node is
   cordoned and tainted `karpenter.sh/disrupted:NoSchedule` and the decision recorded; deletes drain at once.
   No decision and no drain step starts once the run is `START_SECONDS` old (but the first of each, so
   every run makes progress however long its reads took): decisions left are planned
   again next run; a run that left drains in progress for the next one plans nothing new (new decisions
   would only queue more drains behind them).

What is persisted, where: on the disrupted node's claim, in `claim.labels` (keys in
`carpool.disruption.keys`: reason, action, replacement claim names, decision time, relaunch attempts),
written with `ledger.mark_launched(claim)`. The claim keeps status REGISTERED on purpose: `ledger.active()`
omits TERMINATING claims, so with that status the orphan sweep in `carpool.app.disrupt` would terminate the
instance before it is drained (its id would be known to no active claim), the watcher would re-register it
(it re-publishes Ready nodes whose claim is not REGISTERED) and the registrar could not release it when the
node disappears. Labels survive all three untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from carpool import delivery, labels, observability
from carpool.amis import ResolvedAmi
from carpool.api.k8s import Node, Pod
from carpool.api.nodeclass import EC2NodeClass
from carpool.app import discovery, drain, images, interrupt, pools, provision
from carpool.app.wiring import Dependencies
from carpool.catalog import Catalog
from carpool.disruption import candidates, keys, planner
from carpool.disruption import deadline as termination
from carpool.disruption.decision import Decision, Kind, Reason
from carpool.disruption.podview import PodView
from carpool.scheduling import convert
from carpool.state import saving
from carpool.state.models import Claim, ClaimStatus

log = logging.getLogger(__name__)
MAX_REPLACE_ATTEMPTS = 3
#: no new decision (launch, cordon) and no node's drain step starts once a run is this old: decisions left
#: are planned again in the next run, drains go on there (their nodes are cordoned and recorded), and the
#: run ends within the disruption Lambda's timeout (`carpool.delivery.TIMEOUT_SECONDS`). A run this old
#: after advancing disruptions in flight plans nothing (the plan would only serve one decision); with none
#: in flight it plans and starts its first decision however old it is, so every run can make progress.
START_SECONDS = 35.0


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


def run(deps: Dependencies, now: datetime, summary: Any) -> None:
    """One disruption run (called by `carpool.app.disrupt.run` after its clean-up). How long each stage
    took goes to `summary.stages` (seconds)."""
    clock = _Stages(summary)
    world = _observe(deps, started=time.monotonic())
    clock.lap("observe")
    _record_pod_changes(world, deps, now)
    _sweep_leftovers(world, deps, summary)
    in_flight = any(keys.DISRUPTION in claim.labels for claim in world.claims)
    for claim in world.claims:
        if claim.labels.get(keys.DISRUPTION) == Reason.INTERRUPTED:
            _advance_interrupted(claim, world, deps, now, summary)
        elif keys.DISRUPTION in claim.labels:
            _advance(claim, world, deps, now, summary)
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
        _start(decision, world, deps, now, summary)
    clock.lap("start")


class _Stages:
    """Seconds per stage of a run, into `summary.stages` when the summary has it."""

    def __init__(self, summary: Any) -> None:
        self._stages: dict[str, float] | None = getattr(summary, "stages", None)
        self._last = time.monotonic()

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        if self._stages is not None:
            self._stages[stage] = round(self._stages.get(stage, 0.0) + now - self._last, 3)
        self._last = now


def _observe(deps: Dependencies, started: float | None = None) -> _World:
    """Nodes, the pods that are not finished (one paged read with a server-side field selector, projected
    page by page into `PodView`s: Succeeded and Failed pods hold no room and never move), the live claims."""
    started = time.monotonic() if started is None else started  # the run's age counts its reads too
    nodes = {n.name: n for n in deps.cluster.list_nodes()}
    return _World(nodes, deps.cluster.pod_views(), sorted(deps.ledger.active(), key=lambda c: c.name),
                  started=started)


def _refresh(world: _World, deps: Dependencies) -> _World:
    """The world after this run drained or removed nodes, without reading every pod again: nodes and
    claims are read again, and pods only where they changed: those of the touched nodes (field selector
    `spec.nodeName=<node>`) and the unbound ones (`spec.nodeName=`), where evicted pods come back."""
    nodes = {n.name: n for n in deps.cluster.list_nodes()}
    kept = [p for p in world.pods if p.node and p.node not in world.touched]
    fresh = [p for node in sorted(world.touched) if node in nodes for p in deps.cluster.pod_views(node)]
    return _World(nodes, [*kept, *fresh, *deps.cluster.pod_views("")],
                  sorted(deps.ledger.active(), key=lambda c: c.name), deferred=world.deferred,
                  steps=world.steps, started=world.started)


def _pods_to_move(deps: Dependencies, nodes: Iterable[str], wanted: set[str] | None = None) -> list[Pod]:
    """The full `Pod` models of the nodes' movable pods (those in `wanted`, when given), read node by node
    (field selector `spec.nodeName=<node>`) for a launch: provisioning needs whole pods, and only the pods
    of the nodes a decision is about are read."""
    pods = [p for node in nodes for p in drain.pods_on(deps.cluster, node)]
    return [p for p in pods if wanted is None or p.key in wanted]


# -- 1. consolidateAfter's clock ---------------------------------------------------------------------------
def _record_pod_changes(world: _World, deps: Dependencies, now: datetime) -> None:
    """Remember when each node's set of pods last changed; written only when it changes."""
    for claim in world.claims:
        if claim.status != ClaimStatus.REGISTERED or claim.node_name not in world.nodes:
            continue
        digest = candidates.pods_digest(p.key for p in world.pods_on(claim.node_name or ""))
        if claim.labels.get(keys.PODS_DIGEST) == digest:
            continue
        stamp = {keys.PODS_DIGEST: digest, keys.PODS_CHANGED_AT: now.isoformat()}
        saving.amend(deps.ledger, claim, lambda c: c.labels.update(stamp))  # noqa: B023 - called at once


# -- 2. disruptions in progress ----------------------------------------------------------------------------
def _advance(claim: Claim, world: _World, deps: Dependencies, now: datetime, summary: Any) -> None:
    node = world.nodes.get(claim.node_name or "")
    reason = claim.labels.get(keys.DISRUPTION, "")
    if node is None:
        world.touched.add(claim.node_name or claim.name)
        _finish(claim, None, deps, summary, f"node of claim {claim.name} is gone")
        return
    if claim.labels.get(keys.REPLACED_BY) and not _replacements_ready(claim, node, world, deps, summary):
        return
    forceful = reason == Reason.UNHEALTHY
    if world.pods_on(node.name):
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
            return
    world.touched.add(node.name)
    _finish(claim, node, deps, summary, f"node {node.name} drained ({reason})")


#: when this node's next drain step comes: the disruption function's next scheduled run
NEXT_DRAIN_STEP = timedelta(seconds=delivery.SCHEDULE_SECONDS["disruption"])


def _termination_deadline(claim: Claim, deps: Dependencies, now: datetime) -> datetime | None:
    """When the node's remaining pods are deleted whatever blocks them: stamped on the claim at its first
    drain step (now + its NodePool's `terminationGracePeriod`), read back on later runs; None without one."""
    stamped = claim.labels.get(keys.TERMINATION_DEADLINE)
    if stamped:
        return datetime.fromisoformat(stamped)
    pool = next((p for p in deps.config.load().nodepools if p.name == claim.nodepool), None)
    deadline = termination.termination_deadline(now, pool.termination_grace_period_seconds() if pool else None)
    if deadline is not None:
        stamp = deadline.isoformat()
        # a deadline another run stamped meanwhile is kept: the first drain step's is the deadline
        saving.amend(deps.ledger, claim, lambda c: c.labels.setdefault(keys.TERMINATION_DEADLINE, stamp) == stamp)
        return datetime.fromisoformat(claim.labels.get(keys.TERMINATION_DEADLINE, stamp))
    return deadline


def _advance_interrupted(claim: Claim, world: _World, deps: Dependencies, now: datetime, summary: Any) -> None:
    """A node the interruption function is draining: take a drain step too (in case its own follow-ups
    stopped), and finish the node once it is empty or its reclaim time has passed."""
    node = world.nodes.get(claim.node_name or "")
    world.touched.add(claim.node_name or "")
    if node is not None and interrupt.continue_drain(claim, deps, now):
        return
    _finish(claim, node, deps, summary, f"interrupted node {claim.node_name} drained or reclaimed")


def _replacements_ready(claim: Claim, node: Node, world: _World, deps: Dependencies, summary: Any) -> bool:
    """True when every replacement is registered (or has failed too often to wait for)."""
    names = _names(claim.labels.get(keys.REPLACED_BY, ""))
    found = {n: deps.ledger.get(n) for n in names}
    lost = [n for n, c in found.items() if c is None]
    if lost:
        return _relaunch(claim, node, world, deps, summary, [n for n in names if n not in lost])
    waiting = [n for n, c in found.items() if c is not None and c.status != ClaimStatus.REGISTERED]
    if waiting:
        log.info("node %s waits for replacement %s to register", node.name, ", ".join(waiting))
        return False
    return True


def _relaunch(claim: Claim, node: Node, world: _World, deps: Dependencies, summary: Any, kept: list[str]) -> bool:
    """A replacement never registered (its claim timed out or failed): launch another, or give up waiting."""
    attempts = int(claim.labels.get(keys.REPLACE_ATTEMPTS, "0")) + 1
    if attempts > MAX_REPLACE_ATTEMPTS:
        _note(summary, f"node {node.name}: no replacement registered after {MAX_REPLACE_ATTEMPTS} launches; "
                       "draining anyway, its pods will be provisioned as pending")
        return True
    reason = f"disruption/{claim.labels.get(keys.DISRUPTION)}"
    # a consolidation replacement launched again is held to the same rule as the first: cheaper than the
    # node it replaces, priced before the launch
    ceiling = claim.price if claim.labels.get(keys.DISRUPTION) == Reason.UNDERUTILIZED.value else None
    outcome = provision.provision_pods(_pods_to_move(deps, [node.name]), deps, reason=reason,
                                       exclude_claims={claim.name}, price_ceiling=ceiling)
    progress = {keys.REPLACED_BY: ",".join(sorted({*kept, *_replacement_names(outcome, deps)})),
                keys.REPLACE_ATTEMPTS: str(attempts)}
    saving.amend(deps.ledger, claim, lambda c: c.labels.update(progress))
    again = claim.labels[keys.REPLACED_BY] or "nothing"
    _note(summary, f"node {node.name}: replacement lost, launched again ({again})")
    return False


def _finish(claim: Claim, node: Node | None, deps: Dependencies, summary: Any, why: str) -> None:
    """Terminate, release, delete the Node, in that order: a crash after any step is finished by the next
    run (a terminate is idempotent; a tainted node without a claim is swept)."""
    instance = claim.instance_id or (node.instance_id() if node else None)
    if instance:
        deps.compute.terminate_instances([instance])
    deps.ledger.release(claim)
    if node is not None:
        deps.cluster.delete_node(node.name)
    _note(summary, f"{why}: instance {instance or '?'} terminated, claim {claim.name} released")


def _sweep_leftovers(world: _World, deps: Dependencies, summary: Any) -> None:
    """Nodes carpool tainted for disruption whose claim is already released (a run stopped between
    release and Node deletion): finish them."""
    known = {c.name for c in world.claims}
    cluster = deps.settings.cluster_name
    for node in world.nodes.values():
        if node.labels.get(labels.OWNED_BY) != cluster or node.labels.get(labels.CLAIM) in known:
            continue
        tainted = any(t.key == labels.DISRUPTED_TAINT for t in node.taints())
        if not tainted or deps.ledger.get(node.labels.get(labels.CLAIM, "")) is not None:
            continue
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
    if not any(not c.disrupting for c in view.candidates):
        return planner.Plan()  # nothing of carpool's to judge: skip pools, AMIs and the catalog
    manifests = deps.config.load()
    catalog = deps.catalog.get(now)
    classes = {c.name: c for c in manifests.nodeclasses}
    resolved = _resolver(deps)
    # the offerings provisioning may launch now: capacity errors remembered, zones with a subnet
    prepared = pools.prepare(manifests, catalog, resolved, deps.cluster.cni_env(), deps.capacity.all(now),
                             set(deps.offerings.unavailable(now)), deps.ledger.usage(),
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
    )
    plan = planner.plan(inputs, now)
    for node, why in sorted(plan.waiting.items()):
        log.info("node %s not disrupted now: %s", node, why)
    return plan


def _resolver(deps: Dependencies) -> Any:
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
                   resolve: Any) -> dict[str, str | None]:
    """Node -> the AMI the strict mapping gives its type now; nodes of an unresolvable class are left out."""
    out: dict[str, str | None] = {}
    for c in view.candidates:
        nodeclass = classes.get(c.nodeclass)
        amis = resolve(nodeclass) if nodeclass is not None else []
        if not amis:
            continue
        expected = images.expected_for_node(dict(c.labels), catalog.types.get(c.instance_type), amis)
        out[c.node] = expected.id if expected else None
    return out


# -- starting decisions ------------------------------------------------------------------------------------
def _start(d: Decision, world: _World, deps: Dependencies, now: datetime, summary: Any) -> None:
    claims = [deps.ledger.get(name) for name in d.claims]
    if any(c is None for c in claims):
        log.info("skipping decision on %s: a claim disappeared meanwhile", ", ".join(d.nodes))
        return
    replacements: list[str] = []
    if d.kind == Kind.REPLACE:
        budget = sum(c.price or 0.0 for c in claims if c) if d.reason == Reason.UNDERUTILIZED else None
        got = _launch_replacement(d, world, deps, summary, budget)
        if got is None:
            return
        replacements = got
    for claim, node in zip(claims, d.nodes, strict=True):
        assert claim is not None
        drain.cordon(deps.cluster, node)
        progress = {keys.DISRUPTION: d.reason.value, keys.DISRUPTION_ACTION: d.kind.value,
                    keys.REPLACED_BY: ",".join(replacements), keys.DISRUPTED_AT: now.isoformat()}
        saving.amend(deps.ledger, claim, lambda c: c.labels.update(progress))  # noqa: B023 - called at once
    suffix = f" (replacement claims {', '.join(replacements)})" if replacements else ""
    _note(summary, d.message + suffix, d.reason.value)
    if d.kind == Kind.DELETE or d.forceful:
        for claim in claims:
            assert claim is not None
            _advance(claim, world, deps, now, summary)


def _launch_replacement(d: Decision, world: _World, deps: Dependencies, summary: Any,
                        cheaper_than: float | None) -> list[str] | None:
    """Launch what the decision's pods need; None (and nothing launched) when that cannot be done.

    The planner chose the replacement with the offerings provisioning may use now (capacity errors
    remembered) and the same scheduler. `provision_pods` schedules again at launch time (an offering may
    have run out since), so for consolidation it gets the nodes' price as a ceiling: no offering at or
    above it can be scheduled or launched, not even as the fallback after a capacity error. A launch is
    therefore never followed by its own termination for not being cheaper; when a capacity error leaves
    no cheaper option, nothing is launched and the decision log says so.
    """
    pods = _pods_to_move(deps, d.nodes, set(d.replacement_pods))
    outcome = provision.provision_pods(pods, deps, reason=f"disruption/{d.reason.value}", exclude_claims=set(d.claims),
                                       price_ceiling=cheaper_than)
    names = _replacement_names(outcome, deps)
    problem = _replacement_problem(outcome, names)
    launched_price = sum(c.price or 0.0 for c in outcome.launched)
    if not problem and cheaper_than is not None and launched_price >= cheaper_than:
        # cannot happen: the ceiling removed every offering this dear before scheduling and launching
        problem = f"the launched replacement costs ${launched_price:.4f}/h, not less than ${cheaper_than:.4f}/h"
        log.error("BUG: replacement of %s launched above its price ceiling: %s", ", ".join(d.nodes), problem)
        observability.emit("ReplacementAboveCeiling")
    if problem:
        undone = _undo(outcome, deps)
        tail = f"; terminated {', '.join(undone)}" if undone else "; nothing was launched"
        ceiling = f"no replacement cheaper than ${cheaper_than:.4f}/h: " if cheaper_than is not None else ""
        tried = f" ({'; '.join(outcome.decisions)})" if outcome.decisions else ""
        _note(summary, f"not disrupting {', '.join(d.nodes)} ({d.reason}): replacement failed: "
                       f"{ceiling}{problem}{tried}{tail}")
        return None
    return names


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


def _undo(outcome: provision.ProvisionOutcome, deps: Dependencies) -> list[str]:
    """Terminate and release what a partial replacement launched (it serves no decision)."""
    undone = []
    for claim in outcome.launched:
        if claim.instance_id:
            deps.compute.terminate_instances([claim.instance_id])
            undone.append(claim.instance_id)
        deps.ledger.release(claim)
    return undone


def _replacement_names(outcome: provision.ProvisionOutcome, deps: Dependencies) -> list[str]:
    """Claims launched now plus claims the pods were already nominated to (an earlier attempt's)."""
    nominated = deps.ledger.nominated(deps.clock(), outcome.already_nominated) if outcome.already_nominated else {}
    held = {nominated[k] for k in outcome.already_nominated if k in nominated}
    return sorted({c.name for c in outcome.launched} | held)


def _names(text: str) -> list[str]:
    return [n for n in text.split(",") if n]


def _note(summary: Any, message: str, reason: str | None = None) -> None:
    """Log a message and add it to the run summary; decisions (with a reason) are also counted."""
    summary.decisions.append(message)
    if reason is not None:
        observability.emit("Disruptions", reason=reason)
    log.info(message)
