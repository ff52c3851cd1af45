"""carpool stands still while Karpenter's controller holds its Lease (`carpool.app.standstill`): the
registrar, the interruption function and the disruption run act on nothing, retry every record, and say
so once (an error log naming the holder and how to stop it, the `KarpenterControllerActive` metric, a
Warning event on the Lease at most once per 5 minutes); a Lease carpool may not read (403) stands still
too, said as such. Each on a simulated cluster whose Lease is written as Karpenter's controller writes it."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from tests.unit.app.test_app_interrupt_drain import _warning
from tests.unit.app.test_app_interrupt_drain import _world as interrupt_world
from tests.unit.app.test_app_register import NOW, deps_for, join, reserve

from carpool import observability
from carpool.api import events
from carpool.app import disrupt, interrupt, parsing, register, standstill
from carpool.app.wiring import Dependencies
from carpool.karpenter_lease import LEASE_NAME, micro_time
from carpool.ports import LeaseForbidden
from carpool.sim.cluster.simulated import SimulatedCluster

HOLDER = "karpenter-5d8f9c7b6d-x2x7q_6f1e2d3c"


def lead(cluster: SimulatedCluster, renewed_ago: float = 1.0, namespace: str = "kube-system", holder: str = HOLDER) -> None:
    """Karpenter's controller holding its Lease, last renewed `renewed_ago` seconds before the cluster's now."""
    renewed = cluster.now() - timedelta(seconds=renewed_ago)
    answer = cluster.put_lease({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": LEASE_NAME, "namespace": namespace},
                                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                                         "acquireTime": micro_time(renewed), "renewTime": micro_time(renewed)}})
    assert answer.code in (200, 201), answer.body


def registered_event(deps: Dependencies, name: str, message_id: str) -> events.NodeRegisteredEvent:
    """A `Node Registered` record as the watcher publishes it and the registrar's queue delivers it."""
    entry = events.node_registered_entry("demo", deps.cluster.get_node(name), NOW, "bus")  # type: ignore[arg-type]
    parsed = parsing.node_lifecycle(json.dumps(events.delivered_event(entry, event_id=message_id)))
    assert isinstance(parsed, events.NodeRegisteredEvent)
    return parsed


# -- the check itself ---------------------------------------------------------------------------------------
def test_an_active_controller_is_said_once_with_how_to_stop_it(caplog: pytest.LogCaptureFixture) -> None:
    deps = deps_for()
    lead(deps.cluster)  # type: ignore[arg-type]
    before = observability.total(standstill.METRIC, cluster=observability.cluster_name())
    with caplog.at_level(logging.ERROR):
        why = standstill.karpenter_active(deps, "registrar")
    assert "Karpenter's controller is active" in why and HOLDER in why
    assert "kubectl scale deployment karpenter --namespace kube-system --replicas 0" in why
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [f"registrar: {why}"]
    assert observability.total(standstill.METRIC, cluster=observability.cluster_name()) == before + 1
    (event,) = deps.cluster.events_of("Lease", LEASE_NAME)  # type: ignore[attr-defined]
    assert (event["type"], event["reason"], event["metadata"]["namespace"]) == ("Warning", "KarpenterControllerActive",
                                                                                "kube-system")
    assert event["involvedObject"]["apiVersion"] == "coordination.k8s.io/v1" and event["involvedObject"]["uid"]
    assert "scale Karpenter's Deployment to 0" in event["message"]


def test_the_event_is_written_at_most_once_in_five_minutes() -> None:
    clock = [NOW]
    deps = deps_for()
    deps = Dependencies(**{**deps.__dict__, "clock": lambda: clock[0]})
    cluster: SimulatedCluster = deps.cluster  # type: ignore[assignment]
    for minutes in (0, 1, 4):
        clock[0] = NOW + timedelta(minutes=minutes)
        lead(cluster, renewed_ago=-60 * minutes)  # renewed as the clock goes
        assert standstill.karpenter_active(deps, "disruption")
    (event,) = cluster.events_of("Lease", LEASE_NAME)
    assert event["count"] == 1
    clock[0] = NOW + timedelta(minutes=5)
    lead(cluster, renewed_ago=-300)
    assert standstill.karpenter_active(deps, "disruption")
    (event,) = cluster.events_of("Lease", LEASE_NAME)
    assert event["count"] == 2


def test_a_stale_or_released_lease_or_another_namespace_lets_carpool_act() -> None:
    deps = deps_for()
    cluster: SimulatedCluster = deps.cluster  # type: ignore[assignment]
    assert standstill.karpenter_active(deps, "registrar") == ""  # no Lease at all
    lead(cluster, renewed_ago=21)  # 15 s + the 5 s skew allowed have passed
    assert standstill.karpenter_active(deps, "registrar") == ""
    lead(cluster, holder="")  # released by a clean stop
    assert standstill.karpenter_active(deps, "registrar") == ""
    lead(cluster, namespace="karpenter")
    assert standstill.karpenter_active(deps, "registrar") == ""
    settings = deps.settings.__class__(**{**deps.settings.__dict__, "karpenter_namespace": "karpenter"})
    assert standstill.karpenter_active(Dependencies(**{**deps.__dict__, "settings": settings}), "registrar")


class ForbiddenLeases(SimulatedCluster):
    """A cluster whose API server refuses the Lease read (the role lacks `get` on leases)."""

    def get_lease(self, namespace: str, name: str):  # noqa: ANN201 - the port's answer
        raise LeaseForbidden(namespace, name, f'leases.coordination.k8s.io "{name}" is forbidden: User "carpool" '
                             f'cannot get resource "leases" in API group "coordination.k8s.io" in the namespace '
                             f'"{namespace}"')


def test_a_lease_carpool_may_not_read_stands_still_naming_the_rbac(caplog: pytest.LogCaptureFixture) -> None:
    deps = Dependencies(**{**deps_for().__dict__, "cluster": ForbiddenLeases(lambda: NOW)})
    before = observability.total(standstill.METRIC, cluster=observability.cluster_name())
    with caplog.at_level(logging.ERROR):
        why = standstill.karpenter_active(deps, "provisioner")
    assert "cannot tell whether Karpenter's controller is active" in why
    assert "get on leases in coordination.k8s.io" in why and "infra/rbac.yaml" in why
    assert any(r.levelno == logging.ERROR and why in r.getMessage() for r in caplog.records)
    assert observability.total(standstill.METRIC, cluster=observability.cluster_name()) == before + 1


# -- each function that acts ----------------------------------------------------------------------------------
def test_the_registrar_changes_no_node_and_retries_every_record() -> None:
    deps = deps_for()
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", ready=True)
    lead(deps.cluster)  # type: ignore[arg-type]
    before = deps.cluster.node_raw(name)["metadata"]["resourceVersion"]  # type: ignore[attr-defined]
    summary, retry = register.run({m: registered_event(deps, name, m) for m in ("m1", "m2")}, deps)
    assert set(retry) == {"m1", "m2"} and "Karpenter's controller is active" in retry["m1"]
    assert summary.registered == [] and summary.claimed == []
    assert deps.cluster.node_raw(name)["metadata"]["resourceVersion"] == before  # type: ignore[attr-defined]
    # once the controller stopped (its Lease released), the same records register the node
    lead(deps.cluster, holder="")  # type: ignore[arg-type]
    summary, retry = register.run({"m1": registered_event(deps, name, "m1")}, deps)
    assert retry == {} and summary.registered == [name]


def test_the_interruption_function_replaces_and_drains_nothing_and_retries_the_record() -> None:
    world = interrupt_world(interrupt.ClaimStatus.LAUNCHED)
    deps = deps_for()
    deps = Dependencies(**{**deps.__dict__, "cluster": world.cluster, "ledger": world.ledger, "clock": world.clock})
    lead(world.cluster)
    later: list[int] = []
    summary, retry = interrupt.run({"m": _warning()}, deps, lambda _e, delay: later.append(delay))
    assert list(retry) == ["m"] and "Karpenter's controller is active" in retry["m"]
    assert summary.handled == {} and later == []
    assert [a for a in world.cluster.actions if a[1] in ("evict", "cordon", "taint")] == []


def test_the_disruption_run_does_nothing_at_all() -> None:
    deps = deps_for()
    reserve(deps, "stale", None)  # a claim the clean-up would release an hour on, as never launched
    lead(deps.cluster, renewed_ago=-3600 + 1)  # type: ignore[arg-type]  # renewed a second before the run
    summary = disrupt.run(Dependencies(**{**deps.__dict__, "clock": lambda: NOW + timedelta(hours=1)}))
    assert "Karpenter's controller is active" in summary.stood_still
    assert (summary.released, summary.orphans, summary.decisions) == ([], [], [])
    assert deps.ledger.get("stale") is not None
