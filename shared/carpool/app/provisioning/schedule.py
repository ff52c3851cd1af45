"""A round's decision: the pools as they are now, a schedule of the pods, and the pods the scheduler put
on in-flight claims nominated to them. A pod that breaks scheduling fails alone, not its batch."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from carpool import observability
from carpool.api.k8s import Pod
from carpool.api.loader import Manifests
from carpool.app import discovery, pools
from carpool.app.provisioning import inflight, settle
from carpool.app.provisioning.invocation import Invocation
from carpool.app.provisioning.outcome import NotReady
from carpool.app.provisioning.world import World, has_claims
from carpool.launch.failures import Cause
from carpool.resources import add
from carpool.scheduling import convert, scheduler
from carpool.scheduling import inputs as si
from carpool.scheduling.result import SchedulingResult
from carpool.scheduling.volumetopology import VolumeTopology
from carpool.state.ports import ReservationRefused

log = logging.getLogger(__name__)


def plan_round(
    by_key: dict[str, Pod], world: World, call: Invocation,
) -> tuple[pools.Prepared, SchedulingResult, dict[str, si.PodSpec]]:
    """Pools as they are now (usage, unavailable offerings) and a schedule of `by_key`; a pod that cannot
    even be converted, or that makes the scheduler fail, fails alone (`_schedule_isolating`)."""
    deps, outcome = call.deps, call.outcome
    manifests = world.manifests
    usage = deps.ledger.usage([p.name for p in manifests.nodepools])
    prepared = pools.prepare(manifests, world.catalog, world.resolve, world.cni, world.learned, world.unavailable,
                             usage, zones_of=lambda nc: {s["AvailabilityZone"] for s in discovery.subnets(nc, deps)})
    _count_capacity_sources(prepared)
    _skip_not_ready(prepared, manifests, call, world.unready_classes)
    started = time.perf_counter()
    specs: dict[str, si.PodSpec] = {}
    rejected: dict[str, str] = {}
    for key, pod in by_key.items():
        try:
            converted = _pod_spec(pod, world.volumes)
        except Exception as exc:
            outcome.fail([key], f"cannot read the pod's scheduling constraints: {type(exc).__name__}: {exc}")
            log.warning("pod %s fails alone: %s", key, outcome.failed[key])
            continue
        if isinstance(converted, str):
            rejected[key] = converted
        else:
            specs[key] = converted
    # the pods already placed count for the batch's spreads and affinities, as the kube-scheduler counts them
    in_flight, counted = inflight.in_flight(deps, call.exclude, by_key, world.placed)

    def plan(chosen: Sequence[si.PodSpec]) -> SchedulingResult:
        return scheduler.schedule(list(chosen), prepared.specs, daemonsets=world.daemonsets, in_flight=in_flight,
                                  existing=counted)

    result, crashed = _schedule_isolating(list(specs.values()), plan)
    for key, why in crashed.items():
        outcome.fail([key], why)
        specs.pop(key, None)
    for key, why in rejected.items():
        result.unschedulable[key] = {"*": why}  # logged once, when it changes (`carpool.app.reasons`)
    observability.seconds("SchedulingDurationSeconds", time.perf_counter() - started)
    return prepared, result, specs


def _skip_not_ready(prepared: pools.Prepared, manifests: Manifests, call: Invocation,
                    unready_classes: Mapping[str, tuple[Cause, str]]) -> None:
    """A pool whose node class is not ready (it selects no subnet or no AMI, refused a launch in this
    call, or its status says `Ready=False`) is not tried (Karpenter's provisioner uses only NodePools
    whose EC2NodeClass is Ready): it offers nothing, and its reason on the pods it would take says why."""
    classes = {p.name: p.node_class_name for p in manifests.nodepools}
    for pool, (cause, message) in prepared.not_ready.items():
        settle.pool_not_ready(NotReady(pool, classes[pool], cause, message), call, f"NodePool {pool} not tried")
    for spec in prepared.specs:
        nodeclass = classes.get(spec.name, "")
        if nodeclass in unready_classes and spec.name not in call.outcome.not_ready:
            cause, message = unready_classes[nodeclass]
            settle.pool_not_ready(NotReady(spec.name, nodeclass, cause, message, from_status=True), call,
                                  f"NodePool {spec.name} not tried (its EC2NodeClass's status)")
    skipped = call.outcome.not_ready
    prepared.specs = [replace(s, instance_types=[], not_ready=skipped[s.name].reason) if s.name in skipped else s
                      for s in prepared.specs]


def _pod_spec(pod: Pod, volumes: VolumeTopology | None) -> si.PodSpec | str:
    """The scheduler's view of a pod, confined to its volumes' zones as `carpool plan` confines it; or
    why it cannot be launched for (a claim missing or not ready, or no zone suits both it and its
    volumes): a new node cannot help such a pod until its storage is sorted out."""
    if volumes is not None and has_claims(pod):
        return convert.pod_spec_with_volumes(pod, volumes)
    return convert.pod_spec(pod)


def _schedule_isolating(
    specs: list[si.PodSpec], plan: Callable[[Sequence[si.PodSpec]], SchedulingResult]
) -> tuple[SchedulingResult, dict[str, str]]:
    """`plan(specs)`; if it raises, find the pods that make it raise by halving (log2(n) extra plans, only
    on that path) and plan the rest once more, so a single pathological pod fails alone."""
    try:
        return plan(specs), {}
    except Exception as exc:
        first = exc
    culprits = _culprits(specs, plan)
    if not culprits:  # no part fails alone: the failure needs the whole batch, fail it whole
        raise first
    rest = [s for s in specs if s.key not in culprits]
    return plan(rest), culprits


def _culprits(specs: list[si.PodSpec], plan: Callable[[Sequence[si.PodSpec]], SchedulingResult]) -> dict[str, str]:
    try:
        plan(specs)
        return {}
    except Exception as exc:
        if len(specs) == 1:
            log.warning("pod %s makes the scheduler fail: %s", specs[0].key, exc)
            return {specs[0].key: f"scheduling this pod fails: {type(exc).__name__}: {exc}"}
    half = len(specs) // 2
    return {**_culprits(specs[:half], plan), **_culprits(specs[half:], plan)}


def nominate_in_flight(result: SchedulingResult, specs: dict[str, si.PodSpec], call: Invocation) -> None:
    """Pods the scheduler put into an in-flight claim's remaining room are nominated to it, so they are
    not provisioned again while that node boots (and the room is not offered twice)."""
    deps, outcome = call.deps, call.outcome
    for claim_name, keys in result.nominations().items():
        requests = add(*(specs[k].requests for k in keys))
        try:
            # a pod of a node this call replaces is still nominated to its claim: taken over, as `reserve` does
            deps.ledger.nominate(claim_name, keys, requests, call.now, deps.settings.nomination_ttl_seconds,
                                 replacing=call.exclude)
        except ReservationRefused as refused:
            for key in keys:
                outcome.refused[key] = refused.reason
            continue
        except Exception as exc:  # only these pods are retried
            outcome.fail(keys, f"nominating to in-flight claim {claim_name} failed: {type(exc).__name__}: {exc}")
            log.exception("nominating %d pods to %s failed", len(keys), claim_name)
            continue
        outcome.nominated_in_flight.setdefault(claim_name, []).extend(keys)
        outcome.decisions.append(f"{len(keys)} pods nominated to in-flight claim {claim_name}")


def _count_capacity_sources(prepared: pools.Prepared) -> None:
    for sources in prepared.capacity_sources.values():
        learned = sum(1 for s in sources.values() if s != "default")
        if learned:
            observability.emit("CapacityCacheHits", learned)
        observability.emit("CapacityCacheDefaults", len(sources) - learned)
