"""Recovery under topology spread (issue 38, item 5), through the real handlers: both spot nodes of one
zone are interrupted while `web` spreads over zones (`maxSkew: 1`) and nodes (`maxSkew: 2`), both
DoNotSchedule. The replacements are planned for the whole spread at once, where the kube-scheduler will
put the pods (the interrupted zone only: the others hold their share), every pod runs again within three
minutes of the warning, and no node is launched that no pod uses (none is deleted as empty)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from carpool import labels as L
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

SCENARIO = "023-spot-interruption-zone-spread.yaml"
WARNING_AT = 180
ZONE = "us-east-1b"
REPLICAS = 12
#: the acceptance: every pod bound again this long after the warning
RECOVERED_WITHIN = 180


class _Watching(SimRunner):
    """The real runner, also noting each node a user pod was ever bound to."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.served: set[str] = set()

    def _record(self, now: float) -> None:
        super()._record(now)
        self._note_served()

    def _tick_kubelets(self) -> None:
        super()._tick_kubelets()
        self._note_served()

    def _note_served(self) -> None:
        for rec in self.cluster.user_pods():
            node = (rec.raw.get("spec") or {}).get("nodeName")
            if node:
                self.served.add(node)

    def zones_of_pods(self) -> Counter[str]:
        """Bound `web` pods per zone, now."""
        zones: Counter[str] = Counter()
        for rec in self.cluster.user_pods():
            node = self.cluster.nodes.get((rec.raw.get("spec") or {}).get("nodeName") or "")
            if node is not None:
                zones[(node.raw["metadata"].get("labels") or {}).get(L.ZONE, "")] += 1
        return zones


@pytest.fixture(scope="module")
def watched() -> tuple[SimResult, _Watching]:
    runner = _Watching(load_scenario(EXAMPLES / SCENARIO))
    return runner.run(), runner


def _replacements(result: SimResult) -> list:
    return [i for i in result.launches if i.launched_at >= WARNING_AT]


def test_the_warning_hit_both_nodes_of_the_zone_and_the_spread_was_even_before(watched):
    result, _runner = watched
    before = [i for i in result.launches if i.launched_at < WARNING_AT]
    assert Counter(i.zone for i in before) == {"us-east-1a": 2, ZONE: 2, "us-east-1c": 2}
    hit = [i for i in before if i.zone == ZONE]
    assert all(i.terminated_at is not None and i.terminated_at <= WARNING_AT + 120 for i in hit)


def test_every_pod_runs_again_within_three_minutes_of_the_warning(watched):
    result, _runner = watched
    late = [p for p in result.timeline if p.at >= WARNING_AT + RECOVERED_WITHIN and p.pending_pods]
    assert not late, f"pods still pending {late[0].at - WARNING_AT:.0f} s after the warning"
    assert result.pods.total == REPLICAS and result.pods.pending == 0


def test_no_node_is_launched_that_no_pod_uses(watched):
    result, runner = watched
    unused = [f"{i.instance_type} in {i.zone} at {i.launched_at:.0f} s" for i in _replacements(result)
              if i.node_name not in runner.served]
    assert not unused, f"nodes launched that no pod was ever bound to: {unused}"
    emptied = [d.message for d in result.decisions if "has been empty" in d.message]
    assert not emptied


def test_the_replacements_are_planned_at_once_where_the_spread_puts_the_pods(watched):
    result, _runner = watched
    replacements = _replacements(result)
    # 4 pods, at most 2 on a new node: two nodes at least, launched by the warning, not one a minute
    assert len(replacements) >= 2
    assert max(i.launched_at for i in replacements) <= WARNING_AT + 10
    assert {i.zone for i in replacements} == {ZONE}


def test_the_spread_holds_at_the_end(watched):
    _result, runner = watched
    assert runner.zones_of_pods() == {"us-east-1a": 4, ZONE: 4, "us-east-1c": 4}
