"""Which claim a node belongs to: its instance decides; the claim label is only a shortcut."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from carpool import labels
from carpool.api.k8s import Node
from carpool.app import register
from carpool.state.memory import MemoryLedger
from carpool.state.models import Claim, ClaimStatus

NOW = datetime(2026, 5, 1, tzinfo=UTC)


class CountingLedger(MemoryLedger):
    """The reference ledger, counting searches of all claims (the call the label saves)."""

    def __init__(self) -> None:
        super().__init__()
        self.searches = 0

    def find_by_instance(self, instance_id: str) -> Claim | None:
        self.searches += 1
        return super().find_by_instance(instance_id)


def _launched(ledger: MemoryLedger, name: str, instance_id: str | None) -> None:
    claim = Claim(name=name, nodepool="default", nodeclass="default", created_at=NOW, instance_types=["m5.large"],
                  pods=[], reserved={"nodes": 1}, requested={})
    ledger.reserve(claim, None, NOW, 600)
    if instance_id:
        ledger.mark_launched(claim.model_copy(update={"status": ClaimStatus.LAUNCHED, "instance_id": instance_id}))


def _node(instance_id: str, claim_label: str | None = None) -> Node:
    node_labels = {labels.CLAIM: claim_label} if claim_label else {}
    return Node.model_validate({"metadata": {"name": "n", "labels": node_labels},
                                "spec": {"providerID": f"aws:///us-east-1a/{instance_id}"}})


def _deps(ledger: MemoryLedger) -> Any:
    return SimpleNamespace(ledger=ledger)


def test_a_matching_label_is_read_by_key_without_searching() -> None:
    ledger = CountingLedger()
    _launched(ledger, "c1", "i-1")
    assert register.claim_of(_node("i-1", "c1"), _deps(ledger)).name == "c1"
    assert ledger.searches == 0


def test_the_instance_wins_over_a_label_naming_another_instances_claim() -> None:
    ledger = CountingLedger()
    _launched(ledger, "c1", "i-1")
    _launched(ledger, "c2", "i-2")
    assert register.claim_of(_node("i-2", "c1"), _deps(ledger)).name == "c2"
    assert ledger.searches == 1


def test_without_a_label_the_instance_is_searched_for() -> None:
    ledger = CountingLedger()
    _launched(ledger, "c1", "i-1")
    assert register.claim_of(_node("i-1"), _deps(ledger)).name == "c1"
    assert register.claim_of(_node("i-9"), _deps(ledger)) is None
