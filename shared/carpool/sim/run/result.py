"""What a simulation run produced: the `carpool simulate --json` document, the report's and summary's input.

One model serves all three outputs so they cannot disagree. Field names are camelCase in JSON (the CLI
contract, stable for scripts) and snake_case in Python.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from carpool.app.status import Status


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class PodCounts(_Model):
    total: int = 0
    scheduled: int = 0
    pending: int = 0
    #: simulated seconds pods waited between creation and binding (worst and median)
    max_unbound_seconds: float = 0.0
    median_unbound_seconds: float = 0.0


class Instance(_Model):
    """One instance EC2 launched for carpool (still running or already gone, joined or not), with the
    kubelet configuration its user data gave it and what its node reports (or would have reported)."""

    instance_id: str
    instance_type: str
    image_id: str
    image_name: str = ""
    arch: str = ""
    gpus: int = 0
    node_pool: str = ""
    capacity_type: str = ""
    zone: str = ""
    max_pods: int | None = None
    node_name: str | None = None
    launched_at: float = 0.0
    terminated_at: float | None = None
    hourly_price: float = 0.0
    #: whether a node ever joined the cluster from this instance
    joined: bool = False
    #: why it never will (a kubelet fault, user data the image cannot read), "" otherwise
    join_failure: str = ""
    ami_family: str = ""
    #: the kubelet's configuration after the AMI's bootstrap (quantities as the kubelet reads them)
    kube_reserved: dict[str, str] = Field(default_factory=dict)
    system_reserved: dict[str, str] = Field(default_factory=dict)
    eviction_hard: dict[str, str] = Field(default_factory=dict)
    #: the rest of the kubelet's configuration (KubeletConfiguration names: clusterDNS, evictionSoft...), as
    #: its /configz would show it
    kubelet_settings: dict[str, Any] = Field(default_factory=dict)
    #: what the node reports (Node JSON quantities)
    capacity: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str] = Field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.terminated_at is None


class CapacityEntry(_Model):
    """A learned-capacity cache record (what registered nodes taught carpool)."""

    instance_type: str
    image_id: str
    memory_mi_b: int = Field(alias="memoryMiB")
    samples: int = 1
    source: str = "learned"


class LaunchFailure(_Model):
    """A capacity error EC2 (the scenario's truth) answered to CreateFleet."""

    at: float
    instance_type: str
    zone: str = ""
    capacity_type: str = ""
    error_code: str


class TimelinePoint(_Model):
    at: float
    nodes: dict[str, int] = Field(default_factory=dict)
    pending_pods: int = 0
    scheduled_pods: int = 0
    hourly_cost: float = 0.0
    instance_types: dict[str, int] = Field(default_factory=dict)


class KubeEventRecord(_Model):
    """One core/v1 Event as the simulated API server holds it."""

    kind: str
    name: str
    namespace: str = ""
    type: str
    reason: str
    message: str
    count: int = 1

    @classmethod
    def of(cls, raw: dict[str, Any]) -> KubeEventRecord:
        o = raw.get("involvedObject") or {}
        return cls(kind=str(o.get("kind", "")), name=str(o.get("name", "")), namespace=str(o.get("namespace", "")),
                   type=str(raw.get("type", "")), reason=str(raw.get("reason", "")),
                   message=str(raw.get("message", "")), count=int(raw.get("count") or 1))


class Decision(_Model):
    """One line of the decision log: a handler's answer or log line, or an action on the cluster."""

    at: float
    source: str
    level: str = "INFO"
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


class OwnCost(_Model):
    """carpool's own AWS bill for a month at the run's rate (`carpool.sim.run.own_cost`): USD per service,
    the Lambda share per function and the monthly quantities priced."""

    monthly_usd: float = 0.0
    services: dict[str, float] = Field(default_factory=dict)
    lambda_by_function: dict[str, float] = Field(default_factory=dict)
    quantities: dict[str, float] = Field(default_factory=dict)
    #: what one invocation of each function used on average in the run (invocations in the run, billed
    #: milliseconds, memory, DynamoDB units, bus events, SQS requests and log bytes per invocation)
    per_invocation: dict[str, dict[str, float]] = Field(default_factory=dict)
    #: the metric series sent ("Namespace Name {dimension=value, ...}"), each charged for the month
    metric_series: list[str] = Field(default_factory=list)


class Durations(_Model):
    """How long one step took across the pods that went through it, in simulated seconds (nearest-rank
    percentiles: a value some pod really waited)."""

    count: int = 0
    p50: float = 0.0
    p99: float = 0.0
    max: float = 0.0


class TimeToCapacity(_Model):
    """A pending pod's way to a running node, step by step (`carpool.sim.run.time_to_capacity`).

    `pending_to_bound` counts every pod the kube-scheduler marked Unschedulable and later bound; the
    launch steps count only the pods that went to a node launched while they waited (`through_new_nodes`).
    `carpool_overhead` is a pod's pending-to-bound less what neither carpool nor any autoscaler controls:
    EC2's boot (`create_fleet_to_node`) and the kubelet's registration (`node_to_ready`)."""

    pods: int = 0
    through_new_nodes: int = 0
    #: marked Unschedulable -> the CreateFleet answer that launched the pod's node
    pending_to_create_fleet: Durations = Field(default_factory=Durations)
    #: CreateFleet answer -> the Node object created (the instance booted and its kubelet joined)
    create_fleet_to_node: Durations = Field(default_factory=Durations)
    #: Node created -> Ready (the kubelet's registration; not a step of the pod's, subtracted from it)
    node_to_ready: Durations = Field(default_factory=Durations)
    #: Node created -> `karpenter.sh/unregistered` lifted by the registrar
    node_to_registered: Durations = Field(default_factory=Durations)
    #: unregistered taint lifted -> pod bound
    registered_to_bound: Durations = Field(default_factory=Durations)
    pending_to_bound: Durations = Field(default_factory=Durations)
    carpool_overhead: Durations = Field(default_factory=Durations)

    def steps(self) -> list[tuple[str, Durations]]:
        """(label, durations) of each step in a pod's order, then the whole wait and carpool's share."""
        return [("pending -> CreateFleet", self.pending_to_create_fleet),
                ("CreateFleet -> Node", self.create_fleet_to_node),
                ("Node -> Ready", self.node_to_ready),
                ("Node -> unregistered lifted", self.node_to_registered),
                ("unregistered lifted -> bound", self.registered_to_bound),
                ("pending -> bound", self.pending_to_bound),
                ("carpool's overhead", self.carpool_overhead)]


class SimResult(_Model):
    scenario: str
    description: str = ""
    duration_seconds: float
    wall_seconds: float = 0.0
    pods: PodCounts = Field(default_factory=PodCounts)
    #: pod counts per workload ("Deployment/default/web")
    workloads: dict[str, PodCounts] = Field(default_factory=dict)
    instances: list[Instance] = Field(default_factory=list)
    capacity_cache: list[CapacityEntry] = Field(default_factory=list)
    launches: list[Instance] = Field(default_factory=list)
    launch_failures: list[LaunchFailure] = Field(default_factory=list)
    hourly_cost: float = 0.0
    dead_letters: dict[str, int] = Field(default_factory=dict)
    invocations: dict[str, int] = Field(default_factory=dict)
    timeline: list[TimelinePoint] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    #: what the scenario's `expect:` section asked and whether it held ({name: passed})
    expectations: dict[str, bool] = Field(default_factory=dict)
    #: what carpool itself would cost on AWS per month at this run's rate
    own_cost: OwnCost = Field(default_factory=OwnCost)
    #: how long pending pods waited for capacity, step by step
    time_to_capacity: TimeToCapacity = Field(default_factory=TimeToCapacity)
    #: what carpool's state held when the run ended (`carpool status` on the simulation's local AWS)
    status: Status | None = None
    #: the Kubernetes Events carpool wrote, as the API server holds them (`kubectl describe` shows these)
    events: list[KubeEventRecord] = Field(default_factory=list)

    def nodes_by_pool(self) -> dict[str, int]:
        return dict(Counter(i.node_pool or "-" for i in self.instances if i.running))

    def types_by_pool(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter[str]] = {}
        for i in self.instances:
            if i.running:
                out.setdefault(i.node_pool or "-", Counter())[i.instance_type] += 1
        return {k: dict(v) for k, v in out.items()}

    @property
    def running(self) -> list[Instance]:
        return [i for i in self.instances if i.running]
