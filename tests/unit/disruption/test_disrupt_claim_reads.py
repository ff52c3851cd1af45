"""The disruption run's launch-template collection uses the claims its clean-up read when the clean-up
changed none (every read of the active claims lists each claim's pods: a burst's 10,000), and reads them
again when it did, so a template is never judged against claims the run itself just changed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests.unit.disruption.test_orphans import T0, claim, ec2_instance, node_json, world

from carpool.app import disrupt, disruption_executor
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.launching import LAUNCH_TEMPLATE_LABEL
from carpool.state.models import Claim, ClaimStatus

OLD = T0 - timedelta(days=1)


class CountingLedger:
    """The memory ledger, counting `active()` reads."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.reads = inner, 0

    def active(self) -> list[Claim]:
        self.reads += 1
        return self.inner.active()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Templates:
    """ListLaunchTemplates / DeleteLaunchTemplate over names created long ago."""

    def __init__(self, compute: Any, names: list[str]) -> None:
        self.compute, self.names, self.deleted = compute, list(names), []  # type: list[str]

    def list_launch_templates(self, cluster: str) -> list[dict[str, Any]]:
        return [{"LaunchTemplateName": n, "CreateTime": OLD} for n in self.names]

    def delete_launch_template(self, name: str) -> None:
        self.deleted.append(name)
        self.names.remove(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compute, name)


def _registered(name: str, iid: str, template: str) -> Claim:
    c = claim(name, status=ClaimStatus.REGISTERED, instance_id=iid)
    c.labels = {LAUNCH_TEMPLATE_LABEL: template}
    c.node_name = f"ip-{iid}.ec2.internal"
    return c


def _run_without_consolidation(deps: Any, monkeypatch: pytest.MonkeyPatch) -> DisruptSummary:
    monkeypatch.setattr(disruption_executor, "run", lambda *_args: None)
    return disrupt.run(deps)


def test_a_clean_up_that_changed_nothing_lends_its_read(monkeypatch: pytest.MonkeyPatch) -> None:
    deps = world([ec2_instance("i-1", "c1")], [node_json("i-1")], [], at=3600)
    deps.ledger.reserve(_registered("c1", "i-1", "carpool/prod/used"), None, T0, 900)
    deps.ledger.mark_launched(_registered("c1", "i-1", "carpool/prod/used"))
    deps.ledger = CountingLedger(deps.ledger)
    deps.compute = Templates(deps.compute, ["carpool/prod/used", "carpool/prod/unused"])

    summary = _run_without_consolidation(deps, monkeypatch)

    assert deps.ledger.reads == 1
    assert deps.compute.deleted == ["carpool/prod/unused"] == summary.launch_templates_deleted


def test_a_clean_up_that_released_a_claim_makes_the_collection_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = claim("c2", created=T0)  # reserved, never launched: released past the launch deadline
    stale.labels = {LAUNCH_TEMPLATE_LABEL: "carpool/prod/stale"}
    deps = world([], [], [stale], at=3600)
    deps.ledger = CountingLedger(deps.ledger)
    deps.compute = Templates(deps.compute, ["carpool/prod/stale"])

    summary = _run_without_consolidation(deps, monkeypatch)

    assert summary.released == ["c2"]
    assert deps.ledger.reads == 2
    assert deps.compute.deleted == ["carpool/prod/stale"]  # judged on the ledger after the release
