"""The simulation loop: a scenario played against carpool's real handlers on local AWS, on the deployed
clock.

Everything happens at its own moment (`carpool.sim.run.discrete.Agenda`), not on a tick:
- workload steps at their `at` (pods appear, scale, spot interruptions, health events);
- the simulated kubelets' boot steps when each is due (an instance is seen once a CreateFleet that
  launched it has answered; it registers its Node `Truth.boot_seconds` later, is Ready
  `registration_seconds` after that; agents lift startup taints on their delays);
- the functions as their deployed triggers invoke them (`carpool.sim.run.lambda_service`): the **watcher**
  and the **disruption** function on the stack's schedules, the watcher following its watch stream for
  its whole run, which the simulated cluster feeds change by change; the **provisioner**, **registrar**
  and **interruption** functions through their queues' event source mappings (batching window,
  concurrency, visibility timeout); each invocation takes its cold start and modelled work in
  simulated time (`carpool.sim.run.durations`);
- after every action the world settles: the scheduler-lite binder places pending pods and marks the rest
  Unschedulable (the kube-scheduler reacts to each change), watches with news wake, queues with new
  messages start a batch;
- every `tickSeconds` the timeline is recorded (only that: nothing is invoked on a tick).

Nothing here decides anything for carpool: the handlers do, through `carpool.app.wiring` dependencies that
are the production AWS adapters pointed at moto, with only the cluster and the clock simulated.

A run keeps all of its state in its `SimRunner`, so runs can follow each other or run at once on threads
of one process: its local AWS is an account of its own on a server of its own, served on the run's
clock; its functions see the environment the stack would give them through `carpool.environment` (never
`os.environ`), their dependencies through `carpool.app.wiring`'s context, and their output goes to the
run's decision log (`carpool.sim.run.decision_log.captured_output`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import statistics
import time
import traceback
import uuid
from collections import ChainMap, Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from carpool import delivery, environment
from carpool import labels as L
from carpool.adapters.aws import events as events_adapter
from carpool.app import status
from carpool.app.status import Status
from carpool.sim.clock import RESOLUTION, SimClock, reached
from carpool.sim.cluster import leader_election
from carpool.sim.cluster.agents import Agents
from carpool.sim.cluster.kubelet import InstanceFacts, Kubelets, static_node
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.workload import WorkloadDriver
from carpool.sim.localaws import lambda_runtime, motofast, spot_prices
from carpool.sim.localaws.event_source import SqsEventSource
from carpool.sim.localaws.requests import RequestRecorder, recording_wanted
from carpool.sim.run import collector, decision_log, durations, karpenter_cluster, time_to_capacity
from carpool.sim.run.discrete import Agenda, Processes, ProcessKilled
from carpool.sim.run.faults import CapacityFaults, CrashFaults, TerminationDenials
from carpool.sim.run.lambda_service import LambdaService
from carpool.sim.run.own_cost import own_cost_of
from carpool.sim.run.result import (
    CapacityEntry,
    Decision,
    Instance,
    KubeEventRecord,
    LaunchFailure,
    PodCounts,
    SimResult,
    TimelinePoint,
)
from carpool.sim.run.scenario import InstanceSelector, Scenario, WorkloadStep, resolve_manifest
from carpool.sim.run.time_to_capacity import FleetLaunches
from carpool.sim.run.usage import UsageMeter

#: Seconds between a spot interruption warning and EC2 reclaiming the instance.
SPOT_NOTICE_SECONDS = 120
_SQS_QUEUES = ("provisioner", "registrar", "interruption")

Progress = Callable[[float, float], None]


@dataclass
class _EventPath:
    bus: str
    queues: dict[str, str]
    arns: dict[str, str] = field(default_factory=dict)
    dlqs: dict[str, str] = field(default_factory=dict)


class SimRunner:
    """Runs one scenario. `run()` starts local AWS, plays the scenario and returns the result."""

    def __init__(self, scenario: Scenario, progress: Progress | None = None, *,
                 record_requests: bool | None = None) -> None:
        self.scenario = scenario
        self.progress = progress
        self.clock = SimClock()
        self.cluster = SimulatedCluster(self.clock, scenario.cluster.cni, elapsed=lambda: self.clock.elapsed)
        #: the instances Karpenter launched before the run (`karpenterNodes`)
        self.prebuilt: list[str] = []
        self.log = decision_log.DecisionLog(lambda: self.clock.elapsed)
        self.timeline: list[TimelinePoint] = []
        self.invocations: Counter[str] = Counter()
        self._terminations: list[tuple[float, str]] = []
        self._agenda = Agenda()
        self._processes = Processes(self.clock, self._agenda)
        self.cluster.waiter = self._processes.wait
        self.cluster.charge = self._charge_reader
        #: when the next kubelet step is on the agenda, if any
        self._kubelets_next: float | None = None
        self._bound_at = ""
        #: the scenario's `races` already played (by index)
        self._raced: set[int] = set()
        self.cluster.before_cordon = self._race
        self._prices: dict[str, float] = {}
        #: carpool's AWS requests per function (what `tests/infra/test_iam_requests.py` checks IAM against)
        self.requests = RequestRecorder(enabled=recording_wanted() if record_requests is None else record_requests)
        #: what the handlers use on AWS, for carpool's own monthly cost
        self.usage = UsageMeter()
        #: the functions' own variables; with local AWS's (endpoint, credentials, tables...) their environment
        self._function_env: dict[str, str] = {}
        self.env: Mapping[str, str] = self._function_env
        self.account = lambda_runtime.ACCOUNT

    # -- the whole run -----------------------------------------------------------------------------
    def run(self) -> SimResult:
        started = time.monotonic()
        from carpool.sim.localaws.server import LocalAws

        aws = LocalAws(cluster=self.scenario.cluster.name, region=self.scenario.cluster.region, export=False)
        aws.clock = lambda: self.clock.now().timestamp()  # local SQS keeps time on the simulated clock
        self.env = ChainMap(self._function_env, aws.env)
        aws.start()
        self.account = aws.account
        try:
            with environment.using(self.env):
                try:
                    # the result reads local AWS too (capacity records, dead letters): with the same speed-ups
                    with motofast.faster_moto():
                        with decision_log.captured_output(self.log):
                            self._setup(aws)
                            with collector.quiet_collector():
                                self._loop()
                        result = self._result()
                    self.requests.finish(self.scenario.name, self.scenario.cluster.name, self.scenario.cluster.region,
                                         self.account)
                    self.usage.finish()
                finally:
                    self._teardown()
        finally:
            aws.stop()
        result.wall_seconds = round(time.monotonic() - started, 2)
        return result

    def _setup(self, aws: Any) -> None:
        from carpool.adapters.aws.wiring import build_from_env
        from carpool.api.loader import load
        from carpool.app import wiring

        sc = self.scenario
        self.region = sc.cluster.region
        self.aws = aws
        self.ec2, self.sqs, self.events = aws.client("ec2"), aws.client("sqs"), aws.client("events")
        aws.create_state(sc.cluster.name)
        # each queue's visibility timeout as the stack sets it (a failed batch comes back after it)
        visibility = {name: delivery.visibility_timeout_seconds(name) for name in _SQS_QUEUES}
        self.path = self._event_path(aws.create_event_path(sc.cluster.name, visibility))
        aws.seed_network(sc.cluster.name, sc.cluster.zones)
        if sc.amis:
            aws.seed_amis([a.model_dump(by_alias=True, exclude_none=True) for a in sc.amis])
        self.driver = WorkloadDriver(self.cluster, load)
        self.driver.apply(text for _label, text in sc.manifest_texts())
        settings = self._settings()
        if not self.driver.config_docs:
            raise ValueError(f"scenario {sc.name}: no NodePool/EC2NodeClass in manifests")
        self.agents = Agents(self.cluster, sc.agents, lambda: self.clock.elapsed)
        # Karpenter controllers beside carpool: their Leases as last renewed, written before each read
        self.cluster.before_lease_read = leader_election.renewer(
            sc.karpenter, lambda: self.clock.elapsed, self.clock.start, self.cluster.put_lease)
        self.kubelets = Kubelets(self.ec2, self.cluster, sc.cluster.name, self.region, sc.truth,
                                 lambda: self.clock.elapsed, faults=sc.kubelets, agents=self.agents,
                                 launch_seconds=durations.CREATE_FLEET_SECONDS)
        self._seed_node_groups()
        self.prebuilt = karpenter_cluster.seed(karpenter_cluster.World(
            self.ec2, self.cluster, self.kubelets, sc.cluster.name, self.region, sc.cluster.zones, sc.truth),
            sc.karpenter_nodes, list(self.driver.config_docs.values()))
        self.requests.install(self.account)
        self.usage.install(self.log)
        from carpool.adapters.aws import session

        for events in [session.session().events, *[c.meta.events for c in session.clients()]]:
            events.register("before-call.eventbridge.PutEvents", self._charge_put_events,
                            unique_id=f"carpool-sim-put-events-{id(self)}")
        deps = build_from_env(settings, cluster=self.cluster, karpenter=self.cluster)
        deps = dataclasses.replace(deps, cluster=self.cluster, clock=self.clock)
        wiring.use(deps)
        self.deps = deps
        # Each function is its own Lambda process with its own caches.
        self.requests.isolate(lambda: dataclasses.replace(
            build_from_env(settings, cluster=self.cluster, karpenter=self.cluster), cluster=self.cluster,
            clock=self.clock))
        self.faults = CapacityFaults(sc.capacity, lambda: self.clock.elapsed, self._zone_of_subnet)
        self.faults.register(deps.compute.client)  # type: ignore[attr-defined]
        self.handlers = {name: lambda_runtime.load_handler(name) for name in lambda_runtime.HANDLERS}
        self.crashes = CrashFaults(sc.crashes, lambda: self.clock.elapsed, lambda: self.log.source)
        self.fleet_launches = FleetLaunches.install(deps.compute.client, lambda: self.clock.elapsed)  # type: ignore[attr-defined]
        self.crashes.register(deps.compute.client)  # type: ignore[attr-defined]
        self.denials = TerminationDenials(sc.termination_denials, lambda: self.clock.elapsed, self._pool_of,
                                          account=self.account)
        self.denials.register(deps.compute.client)  # type: ignore[attr-defined]
        self.handlers = {name: self.crashes.guard(h) for name, h in self.handlers.items()}

    def _settings(self) -> Any:
        """carpool's settings as the stack's environment would give them (LocalAws set the endpoint, table,
        bus and endpoint variables already)."""
        from carpool.app.settings import Settings

        sc = self.scenario
        self._function_env.update({
            "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
            "CARPOOL_CLUSTER_NAME": sc.cluster.name, "CARPOOL_CLUSTER_VERSION": sc.cluster.version,
            "CARPOOL_CLUSTER_ENDPOINT": f"https://{sc.cluster.name}.sim.eks.local",
            "CARPOOL_CLUSTER_CA": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnNpbQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==",
            # the facts the stack passes as context keys (the simulation has no DescribeCluster to ask)
            "CARPOOL_CLUSTER_CIDR": "10.100.0.0/16", "CARPOOL_CLUSTER_DNS": "10.100.0.10",
            "CARPOOL_CLUSTER_IP_FAMILY": "ipv4",
            "CARPOOL_NODE_ROLE_ARN": f"arn:aws:iam::{self.account}:role/carpool-node",
            "CARPOOL_INSTANCE_PROFILE": "carpool-node",
            "POWERTOOLS_SERVICE_NAME": "carpool", "POWERTOOLS_METRICS_NAMESPACE": "carpool",
            "POWERTOOLS_TRACE_DISABLED": "true",
        })
        return Settings.from_env()

    def _event_path(self, answer: Any) -> _EventPath:
        path = _EventPath(answer.bus_name, dict(answer.queues), {}, dict(answer.dlqs))
        missing = [n for n in _SQS_QUEUES if n not in path.queues]
        if missing:
            raise RuntimeError(f"local event path has no queue for {', '.join(missing)}")
        for name, url in path.queues.items():
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
            path.arns[name] = attrs["QueueArn"]
        return path

    def _teardown(self) -> None:
        from carpool.app import wiring

        if getattr(self, "deps", None) is not None:
            self.faults.unregister(self.deps.compute.client)  # type: ignore[attr-defined]
            if getattr(self, "fleet_launches", None) is not None:
                self.fleet_launches.uninstall(self.deps.compute.client)  # type: ignore[attr-defined]
            if getattr(self, "crashes", None) is not None:
                self.crashes.unregister(self.deps.compute.client)  # type: ignore[attr-defined]
            if getattr(self, "denials", None) is not None:
                self.denials.unregister(self.deps.compute.client)  # type: ignore[attr-defined]
        from carpool.adapters.aws import session

        for events in [session.session().events, *[c.meta.events for c in session.clients()]]:
            events.unregister("before-call.eventbridge.PutEvents", unique_id=f"carpool-sim-put-events-{id(self)}")
        wiring.use(None)

    # -- config and fixed parts of the world ------------------------------------------------------
    def _seed_node_groups(self) -> None:
        """Nodes of managed node groups exist before carpool starts; carpool must leave them alone."""
        sc = self.scenario
        for group in sc.node_groups:
            it = self.ec2.describe_instance_types(InstanceTypes=[group.instance_type])["InstanceTypes"][0]
            facts = InstanceFacts.from_ec2(it)
            for i in range(group.count):
                zone = group.zone or sc.cluster.zones[i % len(sc.cluster.zones)]
                name = f"ip-10-0-200-{len(self.cluster.nodes) + 10}.ec2.internal"
                labels = {L.EKS_NODEGROUP: group.name, **group.labels}
                self.cluster.add_node(static_node(name, facts, zone, self.region, group.capacity_type,
                                                  group.ami_family, labels, group.taints, sc.truth,
                                                  f"i-0ng{uuid.uuid5(uuid.NAMESPACE_DNS, name).hex[:14]}"))

    def _zone_of_subnet(self, subnet_id: str) -> str | None:
        if not hasattr(self, "_subnet_zones"):
            subnets = self.ec2.describe_subnets().get("Subnets", [])
            self._subnet_zones = {s["SubnetId"]: s["AvailabilityZone"] for s in subnets}
        return self._subnet_zones.get(subnet_id)

    # -- the loop -------------------------------------------------------------------------------------
    def _loop(self) -> None:
        sc = self.scenario
        self.service = LambdaService(self.clock, self._agenda, self._processes, self._invoke,
                                     region=self.region, account=self.account, sizes=self._size_of,
                                     after=self._after_invocation)
        for name in _SQS_QUEUES:
            self.service.subscribe(name, self._event_source(self.path.queues[name], self.path.arns[name]))
        for name in delivery.SCHEDULE_SECONDS:
            self.service.schedule(name, 0.0, sc.duration)
        for step in sc.workload:
            self._agenda.at(step.at, self._stepper(step), "workload")
        ticks = int(sc.duration // sc.tick_seconds)
        for k in range(ticks + 1):
            self._agenda.at(k * sc.tick_seconds, self._record_now, "record")
        try:
            self._settle()
            while (at := self._agenda.next_time()) is not None and at <= sc.duration:
                at, action, _label = self._agenda.pop()
                if at > self.clock.elapsed:
                    self.clock.advance(at - self.clock.elapsed)
                action()
                self._settle()
                self._report_failures()
        finally:
            self._processes.kill_all()
            self._report_failures()

    def _charge_reader(self, size: int) -> None:
        """An invocation on the simulated clock (the watcher) spends the time reading the `size` bytes it
        listed or watched, and what its worker threads spent meanwhile."""
        if self._processes.inside():
            self._processes.pay(durations.read("watcher", size))

    def _charge_put_events(self, **_: Any) -> None:
        """A PutEvents call of an invocation on the simulated clock: paid at once on its own thread; on
        one of its worker threads (`carpool.adapters.aws.events` sends `WORKERS` at a time) it owes its
        share of the time the calls overlap in."""
        if self._processes.inside():
            self._processes.pay(durations.PUT_EVENTS_SECONDS)
        else:
            self._processes.owe(durations.PUT_EVENTS_SECONDS / events_adapter.WORKERS)

    def _stepper(self, step: WorkloadStep) -> Callable[[], None]:
        return lambda: self._step(step)

    def _settle(self) -> None:
        """After any action: the kube-scheduler binds what it can, watches with news wake, and each queue's
        event source sees its new messages."""
        if self.cluster.resource_version != self._bound_at:
            self.cluster.bind()
            self._bound_at = self.cluster.resource_version
        self._processes.wake_changed()
        self.service.check_queues()

    def _after_invocation(self) -> None:
        """An invocation's writes are done: EC2 may run new instances, or have terminated some."""
        self._tick_kubelets()

    def _kubelets_step(self) -> None:
        if self._kubelets_next is not None and reached(self.clock.elapsed, self._kubelets_next):
            self._kubelets_next = None
        if self.cluster.binding_from:
            self._bound_at = ""  # a backoff may have ended: the kube-scheduler tries again (no object changed)
        self._tick_kubelets()

    def _record_now(self) -> None:
        now = self.clock.elapsed
        self._record(now)
        if self.progress:
            self.progress(now, self.scenario.duration)

    def _size_of(self, function: str) -> int:
        """What a scheduled function's modelled work scales with (the disruption pass: the nodes; the
        watcher pays for what it reads as it reads it, `_charge_reader`)."""
        return len(self.cluster.nodes)

    def _report_failures(self) -> None:
        while self._processes.failures:
            name, exc = self._processes.failures.pop(0)
            self.log.add(name, f"invocation raised {type(exc).__name__}: {exc}", "ERROR")

    def _tick_kubelets(self) -> None:
        self._kubelets_tick()
        due = self.kubelets.next_due()
        if due is not None and (self._kubelets_next is None or due < self._kubelets_next):
            # never at the present moment again: a step not done now is done a microsecond later at least
            self._kubelets_next = max(due, self.clock.elapsed + RESOLUTION)
            self._agenda.at(self._kubelets_next, self._kubelets_step, "kubelets")

    def _kubelets_tick(self) -> None:
        for name in self.kubelets.tick():
            self.log.add("kubelet", f"node {name} registered")
        for iid in self.kubelets.fresh:
            self.log.add("ec2", f"instance {iid} running", data={"instanceId": iid})
            reason = self.kubelets.boots[iid].no_join
            if reason:
                self.log.add("kubelet", f"instance {iid} will not join: {reason}", "WARNING", {"instanceId": iid})
        for node, agent, taint in self.kubelets.lifted:
            self.log.add("daemonset", f"{agent} removed {taint} from node {node}")
        for iid in self.kubelets.gone:
            self.log.add("ec2", f"instance {iid} terminated", data={"instanceId": iid})
            self._put_aws_event("aws.ec2", "EC2 Instance State-change Notification",
                                {"instance-id": iid, "state": "terminated"}, iid)

    # -- workload steps ------------------------------------------------------------------------------
    def _step(self, step: WorkloadStep) -> None:
        action = step.action
        if action == "apply":
            assert step.apply is not None
            _label, text = resolve_manifest(step.apply, self.scenario.base_dir, f"workload at {step.at}s")
            created = self.driver.apply([text])
            self.log.add("workload", f"applied manifest: {created} pods created")
        elif action == "scale":
            assert step.scale is not None
            delta = self.driver.scale(step.scale)
            self.log.add("workload", f"scaled {step.scale.deployment} to {step.scale.replicas} ({delta:+d} pods)")
        elif action == "delete":
            assert step.delete is not None
            nodes = self.driver.delete_nodes(step.delete)
            removed = self.driver.delete(step.delete)
            gone = [f"{kind} {name}" for kind, name in (("NodePool", step.delete.nodepool),
                                                       ("EC2NodeClass", step.delete.ec2nodeclass)) if name]
            gone += nodes
            self.log.add("workload", f"deleted {removed} pods" + "".join(f", {g}" for g in gone))
        elif action == "spot_interruption":
            assert step.spot_interruption is not None
            self._spot_interruption(step.spot_interruption)
        elif action == "health_event":
            assert step.health_event is not None
            self._health_event(step.health_event)
        elif action == "publish_ami":
            self._publish_ami(step)
        elif action == "termination_protection":
            assert step.termination_protection is not None
            self._protect(step.termination_protection)

    def _select(self, sel: InstanceSelector) -> list[dict[str, Any]]:
        out = []
        for iid, (_seen, inst) in sorted(self.kubelets.launched.items(), key=lambda kv: kv[1][0]):
            if iid in self.kubelets.terminated:
                continue
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
            ctype = L.CAPACITY_SPOT if inst.get("InstanceLifecycle") == "spot" else L.CAPACITY_ON_DEMAND
            if ((sel.node_pool and tags.get(L.NODEPOOL) != sel.node_pool)
                    or (sel.instance_type and not fnmatch.fnmatchcase(inst["InstanceType"], sel.instance_type))
                    or (sel.zone and inst["Placement"]["AvailabilityZone"] != sel.zone)
                    or (sel.capacity_type and ctype != sel.capacity_type)):
                continue
            out.append(inst)
        return out[: sel.count]

    def _spot_interruption(self, sel: InstanceSelector) -> None:
        """EC2 warns two minutes before reclaiming a spot instance; the sim reclaims it then."""
        hit = self._select(sel)
        for inst in hit:
            iid = inst["InstanceId"]
            self._put_aws_event("aws.ec2", "EC2 Spot Instance Interruption Warning",
                                {"instance-id": iid, "instance-action": "terminate"}, iid)
            self._terminations.append((self.clock.elapsed + SPOT_NOTICE_SECONDS, iid))
            self._agenda.at(self.clock.elapsed + SPOT_NOTICE_SECONDS, self._reclaim_due, "spot reclaim")
        self.log.add("workload", f"spot interruption warning for {len(hit)} instance(s)",
                     data={"instances": [i["InstanceId"] for i in hit]})

    def _pool_of(self, instance_id: str) -> str:
        """The NodePool an instance was launched for (its tag), "" for one the simulation does not know."""
        _seen, inst = self.kubelets.launched.get(instance_id, (0.0, {}))
        return next((t["Value"] for t in inst.get("Tags") or [] if t["Key"] == L.NODEPOOL), "")

    def _protect(self, sel: InstanceSelector) -> None:
        """Someone turns termination protection on (local EC2 then refuses TerminateInstances, as EC2 does)."""
        hit = [i["InstanceId"] for i in self._select(sel)]
        for iid in hit:
            self.ec2.modify_instance_attribute(InstanceId=iid, DisableApiTermination={"Value": True})
        self.log.add("workload", f"termination protection turned on for {', '.join(hit) or 'no instance'}",
                     data={"instances": hit})

    def _race(self, node: str) -> None:
        """A `BindRace` due now: its pods are created and bound just before `node` is cordoned."""
        for i, race in enumerate(self.scenario.races):
            if i in self._raced or race.function != self.log.source or self.clock.elapsed < race.at:
                continue
            self._raced.add(i)
            _label, text = resolve_manifest(race.apply, self.scenario.base_dir, f"races[{i}]")
            created = self.driver.apply([text])
            bound = self.cluster.bind().bound
            self.log.add("kube-scheduler", f"{created} pod(s) created and {bound} bound while {race.function} was "
                                           f"between its read and its cordon of {node}")

    def _health_event(self, sel: InstanceSelector) -> None:
        hit = self._select(sel)
        detail = {"service": "EC2", "eventTypeCategory": "scheduledChange",
                  "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                  "affectedEntities": [{"entityValue": i["InstanceId"]} for i in hit]}
        if hit:
            self._put_aws_event("aws.health", "AWS Health Event", detail, hit[0]["InstanceId"])
        self.log.add("workload", f"health event (scheduled retirement) for {len(hit)} instance(s)", data=detail)

    def _publish_ami(self, step: WorkloadStep) -> None:
        """AWS publishes a new AMI release: its images appear in EC2 and the family's parameters name them
        (carpool sees it once its AMI caches expire, as in AWS)."""
        publish = step.publish_ami
        assert publish is not None
        releases = publish.releases(self.scenario.amis, self.scenario.cluster.version, self.clock.now())
        ids = self.aws.seed_amis([r.image for r in releases])
        for image_id, release in zip(ids, releases, strict=True):
            for path in release.parameters:
                self.aws.put_service_parameter(path, image_id)
        self.log.add("workload", f"AMI release {publish.alias} {publish.version} published: {', '.join(ids)}",
                     data={"images": {i: r.image["name"] for i, r in zip(ids, releases, strict=True)}})

    def _put_aws_event(self, source: str, detail_type: str, detail: Mapping[str, Any], instance_id: str) -> None:
        """AWS services put their events on the account's default bus."""
        arn = f"arn:aws:ec2:{self.region}:{self.account}:instance/{instance_id}"
        self.events.put_events(Entries=[{"Source": source, "DetailType": detail_type, "Detail": json.dumps(detail),
                                         "Resources": [arn], "EventBusName": "default", "Time": self.clock.now()}])

    def _reclaim_due(self) -> None:
        due = [iid for at, iid in self._terminations if at <= self.clock.elapsed]
        self._terminations = [(at, iid) for at, iid in self._terminations if at > self.clock.elapsed]
        if due:
            self.ec2.terminate_instances(InstanceIds=due)
            self.log.add("ec2", f"spot capacity reclaimed: {', '.join(due)}")
            self._tick_kubelets()

    # -- handlers --------------------------------------------------------------------------------------
    def _invoke(self, name: str, event: Mapping[str, Any], context: lambda_runtime.LambdaContext | None = None,
                seconds: Callable[[], float] | None = None) -> Any:
        """Run `name`'s handler now (`carpool.sim.run.lambda_service` decides when) and log what it did."""
        self.invocations[name] += 1
        context = context or lambda_runtime.LambdaContext.deployed(name, region=self.region, account=self.account)
        if self._processes.inside():  # it may wait: each time it resumes, its output is its own again
            self._processes.on_resume(lambda: self._attribute(name))
        self._attribute(name)
        try:
            with self.requests.invocation(name, context.environment), self.usage.invocation(name, event, seconds):
                answer = self.handlers[name](dict(event), context)
        except ProcessKilled:
            raise
        except Exception as exc:  # a crashing handler is a finding, not the end of the run
            where = traceback.extract_tb(exc.__traceback__)[-3:]
            self.log.add(name, f"handler raised {type(exc).__name__}: {exc}", "ERROR",
                         {"at": [f"{f.filename.rsplit('/', 3)[-1]}:{f.lineno} {f.name}" for f in where]})
            answer = None
        finally:
            self.log.source = "sim"
        if isinstance(answer, Mapping) and answer and not answer.get("batchItemFailures"):
            self.log.add(name, "answer", data=dict(answer))
        return answer

    def _attribute(self, name: str) -> None:
        """Output, AWS requests and usage from now on are `name`'s."""
        self.log.source = name
        self.requests.function = name
        self.usage.function = name

    def _event_source(self, url: str, arn: str | None = None) -> SqsEventSource:
        """The event source mapping polling the queue at `url` (one per queue, as each function has its own)."""
        sources: dict[str, SqsEventSource] = self.__dict__.setdefault("_sources", {})
        if url not in sources:
            queue_arn = arn or next(self.path.arns[n] for n, u in self.path.queues.items() if u == url)
            sources[url] = SqsEventSource(self.aws.sqs_backend, url, queue_arn, self.region)
        return sources[url]

    # -- observation -----------------------------------------------------------------------------------
    def _price(self, inst: Mapping[str, Any]) -> float:
        """Hourly price: the on-demand list price, or the spot price local EC2 answers for the instance's
        type and zone (`carpool.sim.localaws.spot_prices`), the one it was launched at."""
        iid = inst["InstanceId"]
        if iid not in self._prices:
            self._prices[iid] = spot_prices.hourly_price(self.region, inst["InstanceType"],
                                                         inst["Placement"]["AvailabilityZone"],
                                                         inst.get("InstanceLifecycle") == "spot")
        return self._prices[iid]

    def _record(self, now: float) -> None:
        nodes: Counter[str] = Counter()
        for rec in self.cluster.nodes.values():
            lab = rec.raw["metadata"].get("labels") or {}
            pool = lab.get(L.NODEPOOL) or (f"nodegroup/{lab[L.EKS_NODEGROUP]}" if L.EKS_NODEGROUP in lab else "other")
            nodes[pool] += 1
        running = [inst for iid, (_t, inst) in self.kubelets.launched.items() if iid not in self.kubelets.terminated]
        user = list(self.cluster.user_pods())
        pending = sum(1 for r in user if not (r.raw.get("spec") or {}).get("nodeName"))
        self.timeline.append(TimelinePoint(
            at=now, nodes=dict(nodes), pending_pods=pending, scheduled_pods=len(user) - pending,
            hourly_cost=round(sum(self._price(i) for i in running), 4),
            instance_types=dict(Counter(i["InstanceType"] for i in running))))

    def _result(self) -> SimResult:
        sc = self.scenario
        user = list(self.cluster.user_pods())
        scheduled = sum(1 for r in user if (r.raw.get("spec") or {}).get("nodeName"))
        waits = self.cluster.unbound_seconds or [0.0]
        seen_instances = [self._instance(iid, seen, inst) for iid, (seen, inst) in self.kubelets.launched.items()]
        # the instances Karpenter launched before the run are running ones, not carpool's launches
        launches = [i for i in seen_instances if i.instance_id not in self.prebuilt]
        result = SimResult(
            scenario=sc.name, description=sc.description, duration_seconds=sc.duration,
            pods=PodCounts(total=len(user), scheduled=scheduled, pending=len(user) - scheduled,
                           max_unbound_seconds=max(waits), median_unbound_seconds=statistics.median(waits)),
            workloads=self._workloads(),
            instances=[i for i in seen_instances if i.terminated_at is None],
            capacity_cache=self._capacity_cache(),
            launches=launches,
            launch_failures=[LaunchFailure(
                at=e["at"], instance_type=e["LaunchTemplateAndOverrides"]["Overrides"].get("InstanceType", ""),
                zone=e["LaunchTemplateAndOverrides"]["Overrides"].get("AvailabilityZone", ""),
                capacity_type=e.get("Lifecycle", ""), error_code=e["ErrorCode"]) for e in self.faults.injected],
            hourly_cost=self.timeline[-1].hourly_cost if self.timeline else 0.0,
            dead_letters=self._dead_letters(),
            invocations=dict(self.invocations),
            timeline=self.timeline,
            decisions=self._decisions(),
            time_to_capacity=time_to_capacity.summarise(self.cluster, self.kubelets, self.fleet_launches),
        )
        if self.log.dropped:
            result.decisions.append(self.log.decisions[-1].model_copy(
                update={"message": f"... {self.log.dropped} more decision log lines not kept", "data": {}}))
        result.status = self._status()
        result.events = [KubeEventRecord.of(r.raw) for r in self.cluster.events.values()]
        result.expectations = _expectations(sc, result)
        result.own_cost = own_cost_of(self.usage.usage(max(sc.duration, sc.tick_seconds)), self.usage.metric_series)
        return result

    def _status(self) -> Status | None:
        """`carpool status` on the local AWS as the run left it (None, logged, if it cannot be read)."""
        d = self.deps
        try:
            limits = {p.name: p.limits() for p in d.config.load().nodepools}
            return status.read(d.ledger, d.offerings, d.capacity, d.reasons, limits, d.clock(), d.not_ready)
        except Exception as exc:  # noqa: BLE001 - the run's result stands without it
            self.log.add("simulator", f"could not read carpool's status: {type(exc).__name__}: {exc}", "WARNING")
            return None

    def _workloads(self) -> dict[str, PodCounts]:
        out: dict[str, PodCounts] = {}
        for rec in self.cluster.user_pods():
            counts = out.setdefault(rec.controller or "(bare pods)", PodCounts())
            counts.total += 1
            if (rec.raw.get("spec") or {}).get("nodeName"):
                counts.scheduled += 1
            else:
                counts.pending += 1
        return dict(sorted(out.items()))

    def _decisions(self) -> list[Decision]:
        """The handlers' log lines with what they did through the Kubernetes API, in time order."""
        api = [Decision(at=at, source="k8s-api", message=f"{verb} {target}") for at, verb, target in self.cluster.actions]
        return sorted([*self.log.decisions, *api], key=lambda d: d.at)

    def _instance(self, iid: str, seen: float, inst: Mapping[str, Any]) -> Instance:
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
        node = self.kubelets.registered.get(iid)
        boot = self.kubelets.boots[iid]
        kubelet = boot.kubelet
        facts = self.kubelets.facts(inst["InstanceType"])
        return Instance(
            arch=facts.arch, gpus=facts.gpu_count,
            instance_id=iid, instance_type=inst["InstanceType"], image_id=inst["ImageId"],
            image_name=self.kubelets.image_name(inst["ImageId"]),
            node_pool=tags.get(L.NODEPOOL, ""),
            capacity_type=L.CAPACITY_SPOT if inst.get("InstanceLifecycle") == "spot" else L.CAPACITY_ON_DEMAND,
            zone=inst["Placement"]["AvailabilityZone"], node_name=node, launched_at=seen,
            terminated_at=self.kubelets.terminated.get(iid), hourly_price=self._price(inst),
            joined=node is not None, join_failure=boot.no_join,
            ami_family=kubelet.family if kubelet else "", max_pods=int(boot.capacity["pods"]) if boot.capacity else None,
            kube_reserved=dict(kubelet.kube_reserved) if kubelet else {},
            system_reserved=dict(kubelet.system_reserved) if kubelet else {},
            eviction_hard=dict(kubelet.eviction_hard) if kubelet else {},
            kubelet_settings=dict(kubelet.settings) if kubelet else {},
            capacity=dict(boot.capacity), allocatable=dict(boot.allocatable))

    def _capacity_cache(self) -> list[CapacityEntry]:
        records = self.deps.capacity.all(self.clock.now())
        return [CapacityEntry(instance_type=r.instance_type, image_id=r.image_id,
                              memoryMiB=r.capacity.get("memory", 0) // (1024 * 1024), samples=r.samples)
                for r in sorted(records.values(), key=lambda r: r.key)]

    def _dead_letters(self) -> dict[str, int]:
        out = {}
        for name, url in self.path.dlqs.items():
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            out[name] = int(attrs["Attributes"].get("ApproximateNumberOfMessages", 0))
        return out


def _expectations(sc: Scenario, result: SimResult) -> dict[str, bool]:
    out = {}
    if sc.expect.all_pods_scheduled is not None:
        out["allPodsScheduled"] = (result.pods.pending == 0) == sc.expect.all_pods_scheduled
    if sc.expect.max_seconds_to_schedule is not None:
        out["maxSecondsToSchedule"] = result.pods.max_unbound_seconds <= sc.expect.max_seconds_to_schedule
    return out


def simulate(scenario: Scenario, progress: Progress | None = None) -> SimResult:
    """Run `scenario` and return what happened."""
    return SimRunner(scenario, progress).run()
