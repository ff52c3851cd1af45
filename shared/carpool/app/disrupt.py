"""The disruption function (scheduled): the clean-up that keeps carpool from leaking instances.

- Claims that never registered within `registration_timeout_seconds` (a node that never joined, or never
  became Ready) are terminated and forgotten, so their pods can be provisioned again (node repair).
- Orphans: instances carrying carpool's ownership tags but known to no claim (a provisioner that died
  between CreateFleet and writing the claim) are terminated after `orphan_grace_seconds`.
Consolidation, drift, expiry and budgets build on this in `carpool.app.consolidation`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from carpool import labels, observability
from carpool.app.launching import LAUNCH_TEMPLATE_LABEL
from carpool.app.wiring import Dependencies
from carpool.launch import templates
from carpool.state.models import IN_FLIGHT_STATUSES

log = logging.getLogger(__name__)
CREATED_AT_TAG = "carpool.dev/created-at"
LAUNCH_TEMPLATE_GRACE = timedelta(hours=1)


@dataclass
class DisruptSummary:
    timed_out: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    launch_templates_deleted: list[str] = field(default_factory=list)


def run(deps: Dependencies) -> DisruptSummary:
    summary = DisruptSummary()
    now = deps.clock()
    _expire_unregistered(deps, now, summary)
    _terminate_orphans(deps, now, summary)
    _collect_launch_templates(deps, now, summary)
    from carpool.app import consolidation

    consolidation.run(deps, now, summary)
    return summary


def _expire_unregistered(deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    limit = timedelta(seconds=deps.settings.registration_timeout_seconds)
    for claim in deps.ledger.active():
        if claim.status not in IN_FLIGHT_STATUSES or now - claim.created_at < limit:
            continue
        if claim.instance_id:
            deps.compute.terminate_instances([claim.instance_id])
        deps.ledger.release(claim)
        summary.timed_out.append(claim.name)
        _decide(summary, f"claim {claim.name} never registered within {limit}: terminated", "registration-timeout")


def _terminate_orphans(deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    """An instance is an orphan when no claim records it. Its age comes from the `carpool.dev/created-at`
    tag written at launch with carpool's own clock (EC2's LaunchTime as a fallback)."""
    active = deps.ledger.active()
    known = {c.instance_id for c in active if c.instance_id}
    claims = {c.name: c for c in active}
    grace = timedelta(seconds=deps.settings.orphan_grace_seconds)
    filters = [
        {"Name": f"tag:{labels.TAG_MANAGED_BY}", "Values": [deps.settings.cluster_name]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    for inst in deps.compute.describe_instances(filters):
        iid = inst["InstanceId"]
        if iid in known:
            continue
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        if now - _created(tags, inst) < grace:
            continue  # the provisioner may still be writing its claim
        deps.compute.terminate_instances([iid])
        summary.orphans.append(iid)
        claim = claims.get(tags.get(labels.TAG_NODECLAIM, ""))
        if claim is not None and not claim.instance_id:
            deps.ledger.release(claim)  # its pods may be provisioned again right away
        _decide(summary, f"instance {iid} is known to no claim: terminated as an orphan", "orphan")


def _created(tags: dict[str, str], inst: dict) -> datetime:
    raw = tags.get(CREATED_AT_TAG) or inst.get("LaunchTime")
    if isinstance(raw, datetime):
        return raw
    if isinstance(raw, str):
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return datetime.min.replace(tzinfo=UTC)


def _collect_launch_templates(deps: Dependencies, now: datetime, summary: DisruptSummary) -> None:
    """Delete carpool's launch templates that no live claim uses and that are older than a grace period
    (a provisioner may have just created one it is about to launch from)."""
    in_use = {c.labels.get(LAUNCH_TEMPLATE_LABEL, "") for c in deps.ledger.active()}
    existing = {t["LaunchTemplateName"]: _as_datetime(t.get("CreateTime"))
                for t in deps.compute.list_launch_templates(deps.settings.cluster_name)}
    for name in templates.launch_templates_to_delete(existing, in_use, now, LAUNCH_TEMPLATE_GRACE):
        deps.compute.delete_launch_template(name)
        summary.launch_templates_deleted.append(name)
        log.info("deleted unused launch template %s", name)


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
