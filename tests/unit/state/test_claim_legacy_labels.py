"""Claims stored by an older carpool keep disruption progress as `carpool.dev/...` labels; reading them
gives the typed fields (`carpool.state.legacy_labels.lift`, run by `Claim`'s validator)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from carpool.state import legacy_labels as legacy
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def stored(labels: dict[str, str], **fields: Any) -> dict[str, Any]:
    """A claim's fields as an older version stored them (what the DynamoDB adapter validates)."""
    return {"name": "c1", "nodepool": "default", "nodeclass": "default", "status": "registered",
            "created_at": NOW.isoformat(), "labels": labels, **fields}


def test_every_legacy_label_becomes_its_field_and_leaves_the_labels() -> None:
    claim = Claim.model_validate(stored({
        "team": "web", "carpool.dev/launch-template": "carpool/lt-1",
        legacy.DISRUPTION: "Drifted", legacy.DISRUPTION_ACTION: "replace", legacy.REPLACED_BY: "r1,r2",
        legacy.DISRUPTED_AT: NOW.isoformat(), legacy.REPLACE_ATTEMPTS: "1",
        legacy.TERMINATION_DEADLINE: (NOW + timedelta(hours=1)).isoformat(),
        legacy.SPEC_HASH: "abc", legacy.PODS_DIGEST: "d1", legacy.PODS_CHANGED_AT: (NOW - timedelta(minutes=5)).isoformat(),
    }))
    assert claim.labels == {"team": "web", "carpool.dev/launch-template": "carpool/lt-1"}
    assert claim.disruption == DisruptionProgress(reason="Drifted", action="replace", replaced_by=["r1", "r2"],
                                                  decided_at=NOW, termination_deadline=NOW + timedelta(hours=1))
    assert claim.spec_hash == "abc" and claim.pods_digest == "d1"
    assert claim.pods_changed_at == NOW - timedelta(minutes=5)
    assert claim.abandoned_for == []


def test_an_abandoned_decision_is_no_disruption_in_progress() -> None:
    claim = Claim.model_validate(stored({legacy.ABANDONED_FOR: "r1"}))
    assert claim.disruption is None and claim.abandoned_for == ["r1"] and claim.labels == {}


def test_an_unreadable_decision_time_is_unknown_as_before() -> None:
    claim = Claim.model_validate(stored({legacy.DISRUPTION: "Interrupted", legacy.DISRUPTED_AT: "soon"}))
    assert claim.disruption is not None and claim.disruption.decided_at is None
    assert claim.disruption.replaced_by == [] and claim.disruption.action == ""


def test_typed_fields_win_over_leftover_labels() -> None:
    claim = Claim.model_validate(stored({legacy.SPEC_HASH: "old", legacy.DISRUPTION: "Empty"}, spec_hash="new",
                                        disruption={"reason": "Drifted"}))
    assert claim.spec_hash == "new" and claim.disruption == DisruptionProgress(reason="Drifted")
    assert claim.labels == {}


def test_a_claim_without_legacy_labels_is_read_as_it_is() -> None:
    raw = stored({"team": "web"})
    assert legacy.lift(raw) is raw
    assert Claim.model_validate(raw).labels == {"team": "web"}


def test_the_fields_survive_a_round_trip_and_a_versioned_save() -> None:
    """As the DynamoDB adapter stores a claim: its JSON dump, read back through the validator."""
    claim = Claim(name="c1", nodepool="default", nodeclass="default", created_at=NOW, status=ClaimStatus.REGISTERED,
                  spec_hash="abc", pods_digest="d1", pods_changed_at=NOW, abandoned_for=["r0"],
                  disruption=DisruptionProgress(reason="Drifted", action="replace", replaced_by=["r1"], decided_at=NOW))
    assert Claim.model_validate(claim.model_dump(mode="json")) == claim

    ledger = MemoryLedger()
    ledger.reserve(claim, None, NOW, 60)
    mine = ledger.get("c1")
    assert mine is not None and mine.disruption is not None
    mine.disruption = mine.disruption.model_copy(update={"termination_deadline": NOW + timedelta(hours=1)})
    ledger.save(mine)
    again = ledger.get("c1")
    assert again is not None and again.disruption is not None
    assert again.disruption.termination_deadline == NOW + timedelta(hours=1) and again.version == mine.version
