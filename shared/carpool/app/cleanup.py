"""The clean-up the disruption function runs first (`carpool.app.disrupt`): it keeps carpool's claims and
instances in step, and deletes the launch templates and instance profiles nothing uses any more
(Karpenter's NodeClaim garbage collection).

`carpool.disruption.orphans` decides, from one read of the claims, carpool's instances, the nodes and
their pods; this module carries the decisions out:
- repair: a claim lacking its instance id gets it from the instance tagged with its name;
- adopt: an instance no claim knows whose node joined gets a claim again (never terminated);
- release: a reservation with no instance after `launch_deadline_seconds` frees its pods;
- terminate: orphans after `orphan_grace_seconds`, and launched claims never registered within
  `registration_timeout_seconds`. A node object of such an instance is cordoned and drained first
  (Eviction API, so PodDisruptionBudgets hold); while pods are left the instance waits for the next run.
Consolidation, drift, expiry and budgets build on this in `carpool.app.disruption_executor`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial

from carpool import labels, observability
from carpool.api.k8s import Node
from carpool.app import drain, pod_snapshot, profiles
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.instances import capacities
from carpool.app.isolation import isolated
from carpool.app.launching import LAUNCH_TEMPLATE_LABEL
from carpool.app.termination import let_go
from carpool.app.wiring import Dependencies
from carpool.disruption import orphans
from carpool.launch import templates
from carpool.state import charges, saving
from carpool.state.models import IN_FLIGHT_STATUSES, Claim
from carpool.state.ports import ReservationRefused

log = logging.getLogger(__name__)
CREATED_AT_TAG = orphans.CREATED_AT_TAG
LAUNCH_TEMPLATE_GRACE = timedelta(hours=1)


def clean_up(deps: Dependencies, now: datetime, summary: DisruptSummary,
             read: Callable[[list[Claim]], None] | None = None,
             seen: Callable[[list[Node], set[str]], None] | None = None,
             nodes: list[Node] | None = None) -> orphans.Decisions:
    """Read claims, instances, nodes (and pods when an instance is unclaimed), decide, act. `read` is
    handed the active claims as read, before any decision is acted on; `seen` the nodes and the ids of
    carpool's running instances, as read; `nodes`, the nodes when the run read them already
    (`carpool.app.adopt`)."""
    claims = deps.ledger.active()
    if read is not None:
        read(claims)
    instances = [orphans.InstanceView.from_ec2(i) for i in deps.compute.describe_instances(_owned_filters(deps))]
    nodes = deps.cluster.list_nodes() if nodes is None else nodes
    if seen is not None:
        seen(nodes, {i.instance_id for i in instances})
    # pods are listed only when a node's pods can change a decision (an unclaimed or timed-out instance)
    known = {c.instance_id for c in claims if c.instance_id}
    timeout = timedelta(seconds=deps.settings.registration_timeout_seconds)
    needs_pods = (any(i.instance_id not in known for i in instances)
                  or any(c.status in IN_FLIGHT_STATUSES and now - c.created_at >= timeout for c in claims))
    serving = _serving(deps) if needs_pods else {}
    unknown = {i.instance_type for i in instances if i.instance_id not in known}
    decisions = orphans.decide(instances, claims, nodes, serving, now, _limits(deps),
                               capacities(unknown, deps, now))
    # each action is its own failure unit: one that fails is reported and the others still happen
    for repair in decisions.repairs:
        isolated(summary, "repair", f"claim {repair.claim.name}", partial(_repair, repair, deps, summary))
    for adoption in decisions.adoptions:
        isolated(summary, "adopt", f"instance {adoption.instance.instance_id}",
                 partial(_adopt, adoption, deps, now, summary))
    for release in decisions.releases:
        isolated(summary, "release", f"claim {release.claim.name}", partial(_release, release, deps, summary))
    for termination in decisions.terminations:
        isolated(summary, termination.reason, f"instance {termination.instance_id}",
                 partial(_terminate, termination, deps, summary))
    _charge_exactly(claims, nodes, decisions, deps, now, summary)
    _reconcile_usage(deps, summary)
    for subject, why in sorted(decisions.waiting.items()):
        log.info("%s left alone for now: %s", subject, why)
    return decisions


def _repair(repair: orphans.Repair, deps: Dependencies, summary: DisruptSummary) -> None:
    """The instance recorded on its claim, which holds its instance type's capacity from now on."""
    name = repair.claim.instance_type or ""
    capacity = capacities([name], deps, deps.clock()).get(name)
    try:
        deps.ledger.mark_launched(repair.claim, charges.charged(capacity) if capacity is not None else None)
    except saving.ClaimConflict as exc:  # released or repaired meanwhile: the next run reads it again
        log.info("repair of claim %s skipped: %s", repair.claim.name, exc)
        return
    summary.repaired.append(repair.claim.name)
    _decide(summary, f"claim {repair.claim.name} repaired: {repair.why}", "repair-claim")


def _release(release: orphans.Release, deps: Dependencies, summary: DisruptSummary) -> None:
    deps.ledger.release(release.claim)
    summary.released.append(release.claim.name)
    _decide(summary, release.why, "launch-deadline")


def _serving(deps: Dependencies) -> dict[str, int]:
    """Node name -> how many pods it runs that would need a new home (what `drain.pods_on` counts), from
    the unfinished pods as compact views (a full `Pod` per pod would not fit the Lambda's memory on a large
    cluster), kept up to date between runs (`pod_snapshot`)."""
    return dict(Counter(v.node for v in pod_snapshot.read(deps).pods() if v.node and v.reschedulable))


def _charge_exactly(claims: list[Claim], nodes: list[Node], decisions: orphans.Decisions, deps: Dependencies,
                    now: datetime, summary: DisruptSummary) -> None:
    """Charge every registered claim what its node has (`orphans.charge_due`), where it holds something
    else: a claim stored holding its largest option, or missing a resource (GPUs), before launches and
    registrations re-charged claims. Its pool's usage changes with it, in the same conditional write.
    Claims this run just wrote are left to the next run (their version moved); a claim another function
    wrote meanwhile is too (it is read again then)."""
    written = {c.claim.name for c in decisions.repairs} | {t.claim.name for t in decisions.terminations if t.claim}
    by_name = {n.name: n for n in nodes}
    registered = [c for c in claims if c.node_name in by_name and c.name not in written]
    launched = {t: charges.charged(c) for t, c in capacities((c.instance_type or "" for c in registered), deps, now).items()}
    for claim in registered:
        due = orphans.charge_due(claim, by_name.get(claim.node_name or ""), launched.get(claim.instance_type or "", {}))
        if due is None:
            continue
        try:
            deps.ledger.recharge(claim, due)
        except saving.ClaimConflict as exc:
            log.info("claim %s not charged this run: %s", claim.name, exc)
            continue
        except Exception:  # noqa: BLE001 - one claim's bookkeeping must not stop the run; the next run retries
            log.exception("claim %s could not be charged %s; tried again next run", claim.name, due)
            continue
        summary.charged.append(claim.name)
        log.info("claim %s charged what its node has: %s", claim.name, due)


def _reconcile_usage(deps: Dependencies, summary: DisruptSummary) -> None:
    """Every run: each pool's usage made what its claims hold, so usage that drifted (a claim an older
    release wrote back after its release) cannot let a pool pass its limits for long."""
    try:
        fixed = deps.ledger.reconcile_usage()
    except Exception:  # noqa: BLE001 - bookkeeping; the next run tries again
        log.exception("pool usage not reconciled this run")
        return
    for pool, usage in sorted(fixed.items()):
        summary.reconciled.append(pool)
        log.warning("NodePool %s usage had drifted from its claims; set to %s", pool, usage)
        observability.emit("UsageReconciled", nodepool=pool)


def _owned_filters(deps: Dependencies) -> list[dict[str, object]]:
    return [
        {"Name": f"tag:{labels.TAG_MANAGED_BY}", "Values": [deps.settings.cluster_name]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]


def _limits(deps: Dependencies) -> orphans.Limits:
    s = deps.settings
    return orphans.Limits(
        cluster=s.cluster_name,
        orphan_grace=timedelta(seconds=s.orphan_grace_seconds),
        launch_deadline=timedelta(seconds=s.launch_deadline_seconds),
        registration_timeout=timedelta(seconds=s.registration_timeout_seconds),
    )


def _adopt(adoption: orphans.Adoption, deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    """Write the new claim with `reserve` (no limit: the node exists): it adds the node to its pool's usage
    and refuses if a claim of that name appeared meanwhile (the registrar may have recreated it)."""
    try:
        deps.ledger.reserve(adoption.claim, None, now, deps.settings.nomination_ttl_seconds)
    except ReservationRefused as refused:
        log.info("adoption of %s skipped: %s", adoption.instance.instance_id, refused.reason)
        return
    summary.adopted.append(adoption.instance.instance_id)
    _decide(summary, adoption.why, "adopt")


def _terminate(t: orphans.Termination, deps: Dependencies, summary: DisruptSummary) -> None:
    """Cordon and drain the instance's node object (if one exists) first; terminate only once no pod that
    needs a new home is left on it, then delete the node and release the claim."""
    if t.node is not None and not _drained(t.node, deps):
        summary.draining.append(t.instance_id)
        log.info("instance %s waits for node %s to drain before it is terminated", t.instance_id, t.node)
        return
    deps.compute.terminate_instances([t.instance_id])
    if t.node is not None:
        deps.cluster.delete_node(t.node)
        let_go(deps, t.node, t.instance_id, t.claim.name if t.claim is not None else None)
    if t.claim is not None:
        deps.ledger.release(t.claim)  # its pods may be provisioned again right away
    (summary.timed_out if t.claim is not None else summary.orphans).append(
        t.claim.name if t.claim is not None else t.instance_id)
    _decide(summary, t.why, t.reason)


def _drained(node: str, deps: Dependencies) -> bool:
    """Cordon (and taint `karpenter.sh/disrupted`), evict what can go; True when nothing is left. The node
    is going whatever its pods want (an orphan, a node that never registered), so do-not-disrupt pods are
    evicted too; PodDisruptionBudgets are enforced by the Eviction API and make it wait."""
    drain.cordon(deps.cluster, node)
    result = drain.drain(deps.cluster, node, voluntary=False)
    return not result.blocked and not drain.pods_on(deps.cluster, node)


def released_claims(decisions: orphans.Decisions) -> frozenset[str]:
    """The claims acting on `decisions` released (or would have: a failed action is retried next run)."""
    return frozenset({r.claim.name for r in decisions.releases}
                     | {t.claim.name for t in decisions.terminations if t.claim is not None})


def changed_claims(decisions: orphans.Decisions) -> bool:
    """Whether acting on `decisions` wrote to the ledger (claims repaired, adopted or released)."""
    return bool(decisions.repairs or decisions.adoptions or decisions.releases or decisions.terminations)


def collect_launch_templates(deps: Dependencies, now: datetime, summary: DisruptSummary,
                              claims: list[Claim] | None = None) -> None:
    """Delete carpool's launch templates that no live claim uses and that are older than a grace period
    (a provisioner may have just created one it is about to launch from). `claims`: the active claims
    if this invocation read them already and changed none (each read lists every claim's pods)."""
    active = deps.ledger.active() if claims is None else claims
    in_use = {c.labels.get(LAUNCH_TEMPLATE_LABEL, "") for c in active}
    existing = {t["LaunchTemplateName"]: _as_datetime(t.get("CreateTime"))
                for t in deps.compute.list_launch_templates(deps.settings.cluster_name)}
    for name in templates.launch_templates_to_delete(existing, in_use, now, LAUNCH_TEMPLATE_GRACE):
        isolated(summary, "delete-launch-template", f"launch template {name}",
                 partial(_delete_launch_template, name, deps, summary))


def _delete_launch_template(name: str, deps: Dependencies, summary: DisruptSummary) -> None:
    deps.compute.delete_launch_template(name)
    summary.launch_templates_deleted.append(name)
    log.info("deleted unused launch template %s", name)


def collect_instance_profiles(deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    """Delete the instance profiles carpool made for roles no node class names any more
    (`carpool.app.profiles.collect`); a failure waits for the next run and stops nothing else."""
    try:
        nodeclasses = deps.config.load().nodeclasses
        deleted = profiles.collect(deps, nodeclasses, lambda: deps.compute.describe_instances(_owned_filters(deps)),
                                   now)
    except Exception:
        log.exception("instance profile garbage collection failed; retried on a later run")
        return
    summary.instance_profiles_deleted.extend(deleted)


def _as_datetime(raw: object) -> datetime | None:
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    if isinstance(raw, str):
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return None


def _decide(summary: DisruptSummary, message: str, reason: str) -> None:
    summary.decisions.append(message)
    observability.emit("Disruptions", reason=reason)
    log.info(message)
