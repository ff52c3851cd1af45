"""The independent checker must catch broken plans (otherwise the property tests prove nothing)."""

from __future__ import annotations

from dataclasses import replace

from sched_factories import pod, pods, pool, run, spread, term

from carpool import labels as L
from carpool.scheduling.result import Placement
from carpool.scheduling.verify import verify
from carpool.taints import Taint


def _merge_first_two(result):
    a, b = result.claims[0], result.claims[1]
    merged = replace(a, pods=a.pods + b.pods)
    result.claims = [merged] + result.claims[2:]
    for key in b.pods:
        result.placements[key] = Placement("claim", a.name)
    return result


def test_catches_anti_affinity_and_spread_violations():
    batch = pods("w", 2, labels={"app": "w"}, anti_affinity=(term(L.HOSTNAME, app="w"),))
    result = _merge_first_two(run(batch, [pool()]))
    assert any("anti-affinity" in e for e in verify(result, batch, [pool()]))
    batch = pods("s", 2, labels={"app": "s"}, spread=(spread(L.HOSTNAME, 1, app="s"),))
    result = _merge_first_two(run(batch, [pool()]))
    assert any("maxSkew" in e for e in verify(result, batch, [pool()]))


def test_catches_overcommit_taints_and_missing_pods():
    batch = [pod("big", cpu=9000, labels={"app": "a"}, anti_affinity=(term(L.HOSTNAME, app="a"),)),
             pod("big2", cpu=9000, labels={"app": "a"}, anti_affinity=(term(L.HOSTNAME, app="a"),))]
    result = _merge_first_two(run(batch, [pool()]))
    errors = verify(result, batch, [pool()])
    assert any("cannot hold" in e for e in errors)
    tainted = pool(taints=(Taint("x", "NoSchedule"),))
    ok = run([pod("p")], [pool()])
    assert any("not tolerated" in e for e in verify(ok, [pod("p")], [tainted]))
    assert any("neither placed nor explained" in e for e in verify(ok, [pod("p"), pod("q")], [pool()]))


def test_catches_limit_overrun():
    batch = pods("w", 2, labels={"app": "w"}, anti_affinity=(term(L.HOSTNAME, app="w"),))
    result = run(batch, [pool()])
    errors = verify(result, batch, [pool(limits={"cpu": 16000})])
    assert any("limit cpu" in e for e in errors)
