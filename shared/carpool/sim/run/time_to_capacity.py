"""Time to capacity: how long a pending pod waited for a node, step by step (what Karpenter reports as
`karpenter_pods_startup_duration_seconds`, cut into the parts people act on).

A pod's steps: pending (the kube-scheduler marked it Unschedulable) -> CreateFleet (the answer that
launched the instance of the node it ended on) -> Node created (the instance booted and its kubelet
joined) -> `karpenter.sh/unregistered` lifted (carpool's registrar) -> bound. The stamps come from the
simulated cluster (`carpool.sim.cluster.capacity_stamps`), the kubelets (instance -> node, and when the node was
Ready) and `FleetLaunches`, which stamps each CreateFleet answer on carpool's EC2 client. All in simulated
seconds: wall time says how fast the simulation ran, not how long a pod waited.

Only the pods whose node was launched while they waited count for the launch steps (the node of their
claim, or of another waiting pod's claim the binder put them on); a pod bound to a node that already ran,
or was already booting when it was marked, counts for pending -> bound only.

carpool's overhead on a pod is its pending -> bound less EC2's boot (CreateFleet -> Node) and the
kubelet's registration (Node -> Ready), which no autoscaler can shorten: what is left is
(CreateFleet - pending), deciding and launching, plus (bound - Ready), registering the node and the
kube-scheduler's next look.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from carpool.sim.cluster.capacity_stamps import CapacityStamps, NodeStamps
from carpool.sim.cluster.kubelet import Kubelets
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.run.result import Durations, TimeToCapacity

_AFTER_CREATE_FLEET = "after-call.ec2.CreateFleet"


@dataclass
class FleetLaunches:
    """The simulated time of each CreateFleet answer, by the instance ids it returned.

    A botocore hook on the functions' EC2 client (`deps.compute.client`), registered first so that an
    invocation the crash faults kill just after CreateFleet still has its launch stamped: its instance
    runs and its node comes up all the same."""

    elapsed: Callable[[], float]
    #: instance id -> simulated seconds when CreateFleet answered with it
    launched_at: dict[str, float] = field(default_factory=dict)

    @classmethod
    def install(cls, client: Any, elapsed: Callable[[], float]) -> FleetLaunches:
        """A recorder attached to `client` (the runner: `FleetLaunches.install(deps.compute.client, ...)`)."""
        recorder = cls(elapsed)
        client.meta.events.register_first(_AFTER_CREATE_FLEET, recorder.after_call)
        return recorder

    def uninstall(self, client: Any) -> None:
        client.meta.events.unregister(_AFTER_CREATE_FLEET, self.after_call)

    def after_call(self, parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        at = self.elapsed()
        for group in (parsed or {}).get("Instances") or []:
            for instance_id in group.get("InstanceIds") or []:
                self.launched_at.setdefault(instance_id, at)


@dataclass(frozen=True)
class NodeLaunch:
    """A node carpool launched: when CreateFleet answered with its instance and when it was Ready."""

    fleet: float
    ready: float | None


@dataclass(frozen=True)
class Wait:
    """One pod's wait: marked Unschedulable at `pending`, bound at `bound`."""

    pending: float
    bound: float


@dataclass(frozen=True)
class Launched(Wait):
    """The wait of a pod that went to a node launched while it waited, with that node's stamps."""

    fleet: float
    node: float
    ready: float
    registered: float

    @property
    def overhead(self) -> float:
        """Pending -> bound less EC2's boot and the kubelet's registration (see the module docstring)."""
        return (self.fleet - self.pending) + (self.bound - self.ready)


def summarise(cluster: SimulatedCluster, kubelets: Kubelets, fleets: FleetLaunches | None = None) -> TimeToCapacity:
    """The run's time to capacity. Without `fleets`, an instance's CreateFleet time is when the kubelets
    first saw it: the runner polls EC2 after the handlers, before the clock moves, so it is the same."""
    return summary(waits(cluster.stamps, launches(kubelets, fleets)))


def launches(kubelets: Kubelets, fleets: FleetLaunches | None = None) -> dict[str, NodeLaunch]:
    """Node name -> its launch, for every node an instance of carpool's registered."""
    stamped = fleets.launched_at if fleets is not None else {}
    out = {}
    for instance_id, node in kubelets.registered.items():
        seen, _instance = kubelets.launched[instance_id]
        out[node] = NodeLaunch(stamped.get(instance_id, seen), kubelets.boots[instance_id].ready_at)
    return out


def waits(stamps: CapacityStamps, nodes: Mapping[str, NodeLaunch]) -> list[Wait]:
    """Every pod marked Unschedulable and then bound; `Launched` when its node was launched while it waited."""
    out: list[Wait] = []
    for pod in stamps.pods.values():
        if pod.bound is None or pod.node is None:
            continue
        launch, node = nodes.get(pod.node), stamps.nodes.get(pod.node)
        launched = None
        if launch is not None and node is not None:
            launched = _launched(pod.pending, pod.bound, launch, node)
        out.append(launched or Wait(pod.pending, pod.bound))
    return out


def _launched(pending: float, bound: float, launch: NodeLaunch, node: NodeStamps) -> Launched | None:
    """The pod's wait through `node`, or None when the node was launched before the pod waited (or never
    went through every step: a pod that tolerates the unregistered taint may be bound before it is lifted)."""
    if launch.ready is None or node.lifted is None:
        return None
    steps = (pending, launch.fleet, node.created, node.lifted, bound)
    if not all(a <= b for a, b in pairwise(steps)) or not node.created <= launch.ready <= bound:
        return None
    return Launched(pending, bound, launch.fleet, node.created, launch.ready, node.lifted)


def summary(pods: Iterable[Wait]) -> TimeToCapacity:
    pods = list(pods)
    new = [w for w in pods if isinstance(w, Launched)]
    return TimeToCapacity(
        pods=len(pods), through_new_nodes=len(new),
        pending_to_create_fleet=durations(w.fleet - w.pending for w in new),
        create_fleet_to_node=durations(w.node - w.fleet for w in new),
        node_to_ready=durations(w.ready - w.node for w in new),
        node_to_registered=durations(w.registered - w.node for w in new),
        registered_to_bound=durations(w.bound - w.registered for w in new),
        pending_to_bound=durations(w.bound - w.pending for w in pods),
        carpool_overhead=durations(w.overhead for w in new),
    )


def durations(values: Iterable[float]) -> Durations:
    ordered = sorted(values)
    if not ordered:
        return Durations()
    return Durations(count=len(ordered), p50=round(percentile(ordered, 50), 3),
                     p99=round(percentile(ordered, 99), 3), max=round(ordered[-1], 3))


def percentile(ordered: Sequence[float], percent: int) -> float:
    """Nearest rank: the smallest value at least `percent`% of the values are at or below (one some pod
    really had, never an interpolation between two pods)."""
    rank = max(1, -(-percent * len(ordered) // 100))
    return ordered[rank - 1]

