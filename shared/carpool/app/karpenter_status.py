"""The NodePools' and EC2NodeClasses' `status`, written once per disruption run as Karpenter's nodepool and
nodeclass controllers write it (`carpool.karpenter_status` builds it; this module reads and writes).

Why here, once a minute: the disruption function already runs every minute, reads the claims and the
pools' usage, and holds the caches the reads need (subnets, security groups, AMIs: `discovery`,
`images`), so the status costs two lists, one usage query and, per object that changed, one PATCH of its
status subresource. An object whose status would not change is not written (`karpenter_status.patch`):
a quiet cluster costs the API server no write at all. Each write carries the resourceVersion read
(Karpenter's `MergeFromWithOptimisticLock`): a conflict (the user or another run wrote meanwhile) is left
to the next run, as Karpenter requeues.

Classes first, then pools: a NodePool's `NodeClassReady` is its class's `Ready` as written in this run.
What a class's launches met (`carpool.state.not_ready`, the provisioner's record of a refused launch)
fails the part it names; once the class is edited (its generation moved past its conditions'), that
record is forgotten so the edit is tried afresh, as Karpenter re-reconciles an edited class.

Each object is its own failure unit (`carpool.app.isolation`): one that fails is logged, counted
(`DisruptionActionFailures`, action `status`) and the others are written; the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Final, TypeVar

from carpool.amis import AmiSelectionError, ResolvedAmi
from carpool.api import cluster_config
from carpool.api.cluster_config import ObjectVerdict
from carpool.api.nodeclass import EC2NodeClass
from carpool.app import discovery, images, profiles
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.isolation import isolated
from carpool.app.wiring import Dependencies
from carpool.disruption.orphans import Decisions
from carpool.karpenter_objects import (
    EC2NODECLASS,
    NODEPOOL,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectKind,
)
from carpool.karpenter_status import nodeclass as nodeclass_status
from carpool.karpenter_status import nodepool as nodepool_status
from carpool.karpenter_status.patch import merge_patch
from carpool.karpenter_status.registration import Outcome
from carpool.launch.templates import LaunchTemplateError
from carpool.state.models import Claim, ClaimStatus

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: the action failed writes are counted under (`DisruptionActionFailures`)
ACTION: Final = "status"
#: per process: NodePool uid -> its registration ring (Karpenter keeps it in memory too)
_RINGS_KEY: Final = "karpenter-status/rings"
#: per process: when the last run looked at the claims (registrations after it are this run's news)
_SEEN_KEY: Final = "karpenter-status/seen"
_UNSERVED_KEY: Final = "karpenter-status/unserved"


def write(deps: Dependencies, now: datetime, summary: DisruptSummary, claims: Sequence[Claim] = (),
          decisions: Decisions | None = None) -> None:
    """Bring every NodePool's and EC2NodeClass's status up to date (see the module docstring). `claims`
    are the active claims the clean-up read, `decisions` what it decided: their registrations and
    registration failures are the pools' registration health."""
    if getattr(deps, "karpenter", None) is None:  # stand-ins of `Dependencies` in tests may lack the field
        return
    listed = _listed(deps)
    if listed is None:
        return
    pools, classes = listed
    config = cluster_config.judge(pools, classes)
    models = {c.name: c for c in config.manifests.nodeclasses}
    written: dict[str, dict[str, Any]] = {}
    for obj in classes:
        name = _name(obj)
        isolated(summary, ACTION, f"EC2NodeClass {name}",
                 partial(_write_class, obj, config.verdict(cluster_config.EC2NODECLASS_KIND, name), models.get(name),
                         deps, now, summary, written))
    usage = deps.ledger.usage([_name(p) for p in pools])
    outcomes = _outcomes(claims, decisions, deps, now)
    rings: dict[str, tuple[bool, ...]] = deps.cache.setdefault(_RINGS_KEY, {})
    for gone in rings.keys() - {_uid(p) for p in pools}:  # a deleted pool's ring goes with it
        del rings[gone]
    for obj in pools:
        name = _name(obj)
        verdict = config.verdict(cluster_config.NODEPOOL_KIND, name)
        isolated(summary, ACTION, f"NodePool {name}",
                 partial(_write_pool, obj, verdict, written, usage.get(name, {}), outcomes.get(name, []),
                         deps, now, summary))


def _listed(deps: Dependencies) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The NodePools and EC2NodeClasses; None when the cluster does not serve them (said once a process)."""
    assert deps.karpenter is not None
    try:
        pools = deps.karpenter.list_objects(NODEPOOL).items
        classes = deps.karpenter.list_objects(EC2NODECLASS).items
    except KindNotServed as exc:
        if not deps.cache.get(_UNSERVED_KEY):
            log.error("no NodePool or EC2NodeClass status is written: %s", exc)
            deps.cache[_UNSERVED_KEY] = True
        return None
    deps.cache.pop(_UNSERVED_KEY, None)
    return pools, classes


def _write_class(obj: dict[str, Any], verdict: ObjectVerdict | None, model: EC2NodeClass | None, deps: Dependencies,
                 now: datetime, summary: DisruptSummary, written: dict[str, dict[str, Any]]) -> None:
    """Build and write one class's status; `written` gets the class as it now stands, for its pools."""
    name = _name(obj)
    written[name] = obj  # as read, should building fail: its pools then follow what the cluster shows
    problems = verdict.own_problems if verdict is not None else ()
    if problems or model is None:
        readings = nodeclass_status.NodeClassReadings(problems=problems or ("not judged",))
    else:
        readings = _readings(model, deps, _refused(obj, deps, now))
    status = nodeclass_status.nodeclass_status(obj, readings, now)
    written[name] = {**obj, "status": status}
    _patch(deps, EC2NODECLASS, obj, status, summary)


def _readings(model: EC2NodeClass, deps: Dependencies, refused: tuple[str, str] | None) -> nodeclass_status.NodeClassReadings:
    """What the launch path reads of a class (cached there), each read on its own: one that fails is left
    unread (its part kept as it was)."""
    subject = f"EC2NodeClass {model.name}"
    return nodeclass_status.NodeClassReadings(
        subnets=_attempt(subject, "subnets", lambda: discovery.subnets(model, deps)),
        security_groups=_attempt(subject, "security groups", lambda: discovery.security_group_shapes(model, deps)),
        security_group_terms=bool(model.spec.security_group_selector_terms),
        amis=_attempt(subject, "AMIs", lambda: _amis(model, deps)),
        instance_profile=_attempt(subject, "instance profile", lambda: _profile(model, deps)),
        refused=refused,
    )


def _amis(model: EC2NodeClass, deps: Dependencies) -> list[ResolvedAmi] | AmiSelectionError:
    try:
        return images.resolve(model, deps)
    except AmiSelectionError as exc:  # the class's terms, not the read: said in AMIsReady
        return exc


def _profile(model: EC2NodeClass, deps: Dependencies) -> str | nodeclass_status.Problem:
    try:
        return profiles.planned_profile(model, deps)
    except LaunchTemplateError as exc:
        return nodeclass_status.Problem(str(exc.cause), str(exc))


def _attempt(subject: str, what: str, read: Callable[[], _T]) -> _T | None:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - a failed read leaves that part as it was; the others are written
        log.warning("%s: could not read its %s for its status: %s: %s", subject, what, type(exc).__name__, exc)
        return None


def _refused(obj: Mapping[str, Any], deps: Dependencies, now: datetime) -> tuple[str, str] | None:
    """The launch the class last refused, (cause, message), while remembered; forgotten when the class was
    edited since its status was last written (the edit deserves a fresh try)."""
    if deps.not_ready is None:
        return None
    name = _name(obj)
    entry = next((e for e in deps.not_ready.all(now) if e.nodeclass == name), None)
    if entry is None:
        return None
    if _edited_since_written(obj):
        deps.not_ready.forget([name])
        log.info("EC2NodeClass %s was edited: the launch it refused (%s) is forgotten", name, entry.cause)
        return None
    return entry.cause, entry.message


def _edited_since_written(obj: Mapping[str, Any]) -> bool:
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("observedGeneration") != generation for c in conditions if isinstance(c, Mapping))


def _write_pool(obj: dict[str, Any], verdict: ObjectVerdict | None, classes: Mapping[str, dict[str, Any]],
                usage: Mapping[str, int], outcomes: Sequence[Outcome], deps: Dependencies, now: datetime,
                summary: DisruptSummary) -> None:
    uid = _uid(obj)
    rings: dict[str, tuple[bool, ...]] = deps.cache.setdefault(_RINGS_KEY, {})
    class_name = verdict.nodeclass if verdict is not None else ""
    facts = nodepool_status.NodePoolFacts(
        usage=usage, problems=verdict.own_problems if verdict is not None else (),
        nodeclass=classes.get(class_name) if class_name else None, ring=rings.get(uid), outcomes=outcomes)
    built = nodepool_status.nodepool_status(obj, facts, now)
    rings[uid] = built.ring
    _patch(deps, NODEPOOL, obj, built.status, summary)


def _patch(deps: Dependencies, kind: ObjectKind, obj: Mapping[str, Any], status: Mapping[str, Any],
           summary: DisruptSummary) -> None:
    """Write what changed, under the resourceVersion read; a conflict or a deleted object waits for the
    next run."""
    assert deps.karpenter is not None
    patch = merge_patch(obj.get("status") or {}, status)
    if patch is None:
        return
    name = _name(obj)
    try:
        deps.karpenter.patch_status(kind, name, patch,
                                    resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or "") or None)
    except (ObjectConflict, ObjectGone) as exc:
        log.info("%s %s: status not written this run: %s", kind.kind, name, exc)
        return
    summary.statuses_written.append(f"{kind.kind} {name}")
    _log_readiness(kind, name, obj.get("status") or {}, status)


def _log_readiness(kind: ObjectKind, name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """One line when an object's Ready changes, with why (what `kubectl describe` now shows)."""
    was, now_ = _ready(before), _ready(after)
    if was is not None and now_ is not None and was.get("status") == now_.get("status"):
        return
    if now_ is not None:
        level = logging.INFO if now_.get("status") == "True" else logging.WARNING
        log.log(level, "%s %s Ready=%s (%s) %s", kind.kind, name, now_.get("status"), now_.get("reason"),
                now_.get("message") or "", extra={"kind": kind.kind, "object": name, "ready": now_.get("status")})


def _ready(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)


def _outcomes(claims: Iterable[Claim], decisions: Decisions | None, deps: Dependencies,
              now: datetime) -> dict[str, list[Outcome]]:
    """Pool -> its claims that registered since the last run, then those the clean-up gave up on now.
    A process's first run only notes the time: it counts what happens from then on (Karpenter, after a
    restart, counts new registrations only; the condition carries what came before)."""
    last = deps.cache.get(_SEEN_KEY)
    deps.cache[_SEEN_KEY] = now
    out: dict[str, list[Outcome]] = {}
    if isinstance(last, datetime) and last <= now:
        registered = sorted((c for c in claims if c.status == ClaimStatus.REGISTERED and c.registered_at is not None
                             and last < c.registered_at <= now), key=lambda c: (c.registered_at, c.name))
        for claim in registered:
            out.setdefault(claim.nodepool, []).append(Outcome(True))
    if decisions is not None:
        for termination in decisions.terminations:
            if termination.reason == "registration-timeout" and termination.claim is not None:
                out.setdefault(termination.claim.nodepool, []).append(Outcome(False))
        for release in decisions.releases:
            out.setdefault(release.claim.nodepool, []).append(Outcome(False, "LaunchFailed", release.why))
    return out


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or _name(obj))


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
