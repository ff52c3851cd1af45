"""Issue 39 item 5: carpool stands still while a Karpenter controller holds its leader-election Lease.

`make demo`'s scenario (20 pending pods at 0 s) with a Karpenter controller renewing its Lease (every 2 s,
as client-go does) until it is scaled to zero at 150 s, which releases the Lease. Through the real
handlers: while it runs carpool launches nothing and the pods wait; every provisioner invocation says
why (an error log line naming the holder and `kubectl scale deployment karpenter ... --replicas 0`), counts
`KarpenterControllerActive` and a Warning event stands on the Lease; once the Lease is released, the
watcher's next resync publishes the pods again and carpool serves them all. The same with a controller
that dies instead: carpool waits for the Lease to expire (15 s + the 5 s allowed for clock skew)."""

from __future__ import annotations

import pytest

from carpool import observability
from carpool.karpenter_lease import LEASE_NAME
from carpool.sim.cluster.specs import KarpenterController
from carpool.sim.run.result import SimResult
from carpool.sim.run.runner import SimRunner
from carpool.sim.run.scenario import load_scenario

from .conftest import EXAMPLES

STOPPED_AT = 150.0
#: the watcher publishes every pending pod once a minute, and the provisioner answers within seconds
SERVED_WITHIN = 75.0


def _run(stop: str) -> tuple[SimResult, float]:
    scenario = load_scenario(EXAMPLES / "flex-first.yaml")
    karpenter = KarpenterController.model_validate({"from": 0, "until": STOPPED_AT, "stop": stop})
    scenario = scenario.model_copy(update={"karpenter": [karpenter], "duration": 360.0,
                                           "workload": [s for s in scenario.workload if s.at == 0]})
    before = observability.total("KarpenterControllerActive", cluster="demo")
    result = SimRunner(scenario).run()
    return result, observability.total("KarpenterControllerActive", cluster="demo") - before


@pytest.fixture(scope="module")
def released() -> tuple[SimResult, float]:
    return _run("release")


def test_nothing_is_launched_while_karpenter_runs_and_every_pod_is_served_after(released: tuple[SimResult, float]) -> None:
    result, _ = released
    assert result.launches, "carpool never served the pods after Karpenter stopped"
    first = min(i.launched_at for i in result.launches)
    assert STOPPED_AT <= first <= STOPPED_AT + SERVED_WITHIN
    waiting = [p for p in result.timeline if 10 <= p.at < STOPPED_AT]
    assert waiting and all(p.pending_pods == 20 and not p.nodes for p in waiting)
    assert (result.pods.scheduled, result.pods.pending) == (20, 0)


def test_the_standstill_is_said_in_the_log_the_metric_and_an_event_on_the_lease(released: tuple[SimResult, float]) -> None:
    result, counted = released
    said = [d for d in result.decisions if d.level == "ERROR" and "Karpenter's controller is active" in d.message]
    assert said and {d.source for d in said} >= {"provisioner", "disruption"}
    assert all(d.at < STOPPED_AT for d in said)
    assert "kubectl scale deployment karpenter --namespace kube-system --replicas 0" in said[0].message
    assert counted == len(said)
    (event,) = [e for e in result.events if e.kind == "Lease" and e.name == LEASE_NAME]
    assert (event.type, event.reason, event.namespace) == ("Warning", "KarpenterControllerActive", "kube-system")
    # no pod event was lost: none of the standing-still provisioner's records went to a dead-letter queue
    assert not any(result.dead_letters.values())


def test_a_controller_that_dies_is_waited_for_until_its_lease_expires() -> None:
    result, _ = _run("crash")
    first = min(i.launched_at for i in result.launches)
    assert STOPPED_AT + 15 <= first <= STOPPED_AT + 20 + SERVED_WITHIN
    assert (result.pods.scheduled, result.pods.pending) == (20, 0)
