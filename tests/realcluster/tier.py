"""`RealTier`: carpool deployed against a real control plane, on the wall clock.

What runs, in the order it starts (and stops in reverse):
1. local AWS (`carpool.sim.localaws.server.LocalAws`, moto on 127.0.0.1) set up as the stack sets it up:
   state tables, bus, rules and queues (visibility timeouts as deployed), the scenario's network and
   AMIs, one IAM role per function (the stack's `<Name>Role`), each function's credentials those of an
   AssumeRole of its role, as Lambda gives an execution role's;
2. the EKS authenticator (`authenticator.py`) with one access entry per function role mapped to
   carpool's group, as the stack's access entries do;
3. the control plane (`controlplane.py`) with that authenticator as its token webhook, Karpenter's CRDs
   and `infra/rbac.yaml` bound to the group;
4. the scenario's NodePools and EC2NodeClasses applied with kubectl, as Karpenter's Getting Started does;
5. the instance bridge: every instance local EC2 runs becomes a hollow kubelet a boot time later
   started from carpool's own user data (`instances.InstanceBridge` on `kubelets.HollowKubelets`);
6. the Lambda service (`lambda_service.WallClockLambda`) running the five handlers as deployed.

The scenario file (`examples/*.yaml`, `carpool simulate`'s format) gives the cluster's name, region,
version, zones, AMIs and the Karpenter objects, so the tier and the simulation run the same input.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml
from tests.realcluster.authenticator import AccessEntry, Authenticator, AuthenticatorServer, moto_secret
from tests.realcluster.controlplane import ROOT, ControlPlane
from tests.realcluster.lambda_service import WallClockLambda

from carpool import delivery
from carpool.sim.localaws import lambda_runtime
from carpool.sim.localaws.server import LocalAws
from carpool.sim.run.scenario import CapacityFailure, Scenario, load_scenario

DEFAULT_SCENARIO = ROOT / "examples" / "flex-first.yaml"
#: what Karpenter's Getting Started applies; the rest of a scenario's manifests are the workload's
KARPENTER_KINDS = ("NodePool", "EC2NodeClass")
#: a realistic EC2 boot to kubelet start (the scenarios' `truth.bootSeconds` default)
BOOT_SECONDS = 40.0
SQS_FUNCTIONS = tuple(delivery.BY_FUNCTION)


class RealTier:
    """carpool against a real control plane. Use as a context manager; see the module docstring."""

    def __init__(self, scenario: str | Path = DEFAULT_SCENARIO, *, boot_seconds: float = BOOT_SECONDS,
                 node_monitor_grace_seconds: float = 40.0, run_lambda: bool = True,
                 capacity_errors: Iterable[CapacityFailure] = ()) -> None:
        self.scenario: Scenario = load_scenario(scenario)
        self.cluster = self.scenario.cluster.name
        self.region = self.scenario.cluster.region
        self.boot_seconds = boot_seconds
        self.node_monitor_grace_seconds = node_monitor_grace_seconds
        self.capacity_errors = list(capacity_errors)
        self._run_lambda = run_lambda
        self._stack = ExitStack()
        self.started = 0.0
        self.aws: LocalAws
        self.plane: ControlPlane
        self.authenticator: Authenticator
        self.lambdas: WallClockLambda
        self.bridge: Any
        self.function_env: dict[str, dict[str, str]] = {}

    # -- lifecycle

    def __enter__(self) -> RealTier:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        self.aws = self._stack.enter_context(LocalAws(cluster=self.cluster, region=self.region, export=False))
        self._set_up_aws()
        self.authenticator = Authenticator(self.cluster, self.aws.endpoint, moto_secret(self.aws.account))
        server = self._stack.enter_context(AuthenticatorServer(self.authenticator))
        roles = self._function_roles()
        self.plane = self._stack.enter_context(ControlPlane(
            token_webhook_url=server.url, node_monitor_grace_seconds=self.node_monitor_grace_seconds))
        self._functions_env(roles)
        self.apply(self.manifests(KARPENTER_KINDS))
        self.bridge = self._stack.enter_context(_bridge(self))
        self.stamps = self._stack.enter_context(Stamps(self.plane))
        if self._run_lambda:
            self._on_provisioner_ec2("after-call.ec2.CreateFleet", self.stamps.after_create_fleet)
            self._inject_capacity_errors()
            self.lambdas = WallClockLambda(self.function_env, self._queues(), self.aws.client("sqs"),
                                           region=self.region, account=self.aws.account)
            self._stack.enter_context(self.lambdas)
        self.started = time.time()

    def _set_up_aws(self) -> None:
        sc = self.scenario
        self.aws.create_state(self.cluster)
        self.path = self.aws.create_event_path(
            self.cluster, {name: delivery.visibility_timeout_seconds(name) for name in SQS_FUNCTIONS})
        self.network = self.aws.seed_network(self.cluster, sc.cluster.zones)
        if sc.amis:
            self.aws.seed_amis([a.model_dump(by_alias=True, exclude_none=True) for a in sc.amis])
        iam = self.aws.client("iam")
        iam.create_role(RoleName="carpool-node", AssumeRolePolicyDocument=_trust("ec2.amazonaws.com"))
        iam.create_instance_profile(InstanceProfileName="carpool-node")
        iam.add_role_to_instance_profile(InstanceProfileName="carpool-node", RoleName="carpool-node")

    def _function_roles(self) -> dict[str, dict[str, str]]:
        """Each function's role, its access entry, and credentials of an AssumeRole of it."""
        iam, sts = self.aws.client("iam"), self.aws.client("sts")
        credentials = {}
        for name in lambda_runtime.HANDLERS:
            role = iam.create_role(RoleName=f"carpool-{self.cluster}-{name}",
                                   AssumeRolePolicyDocument=_trust("lambda.amazonaws.com"))["Role"]["Arn"]
            self.authenticator.add_entry(AccessEntry(role, ("carpool-controller",)))
            given = sts.assume_role(RoleArn=role, RoleSessionName=f"carpool-{name}")["Credentials"]
            credentials[name] = {"AWS_ACCESS_KEY_ID": given["AccessKeyId"],
                                 "AWS_SECRET_ACCESS_KEY": given["SecretAccessKey"],
                                 "AWS_SESSION_TOKEN": given["SessionToken"]}
        return credentials

    def _functions_env(self, credentials: Mapping[str, Mapping[str, str]]) -> None:
        """What `infra/functions.py` `_environment` gives every function, on this tier's cluster."""
        sc = self.scenario.cluster
        common = {**self.aws.env, "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
                  "CARPOOL_CLUSTER_NAME": self.cluster, "CARPOOL_CLUSTER_VERSION": sc.version,
                  "CARPOOL_CLUSTER_ENDPOINT": self.plane.endpoint, "CARPOOL_CLUSTER_CA": self.plane.ca_data,
                  "CARPOOL_CLUSTER_CIDR": "10.100.0.0/16", "CARPOOL_CLUSTER_DNS": "10.100.0.10",
                  "CARPOOL_CLUSTER_IP_FAMILY": "ipv4", "CARPOOL_KARPENTER_NAMESPACE": self.plane.karpenter_namespace,
                  "CARPOOL_NODE_ROLE_ARN": f"arn:aws:iam::{self.aws.account}:role/carpool-node",
                  "CARPOOL_INSTANCE_PROFILE": "carpool-node", "POWERTOOLS_SERVICE_NAME": "carpool",
                  "POWERTOOLS_METRICS_NAMESPACE": "carpool", "POWERTOOLS_TRACE_DISABLED": "true",
                  "LOG_LEVEL": "WARNING"}
        self.function_env = {name: {**common, **credentials[name]} for name in lambda_runtime.HANDLERS}

    def _queues(self) -> dict[str, tuple[str, str]]:
        sqs = self.aws.client("sqs")
        return {name: (url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
                for name, url in self.path.queues.items()}

    def _inject_capacity_errors(self) -> None:
        """The scenario format's capacity errors (`carpool.sim.run.faults.CapacityFaults`), on the
        provisioner's EC2 requests, timed from the tier's start."""
        if not self.capacity_errors:
            return
        from carpool.sim.run.faults import CapacityFaults

        zones = {s: z for z, ids in self.network.subnets.items() for s in ids}
        faults = CapacityFaults(self.capacity_errors, lambda: time.time() - self.started, zones.get)
        self._on_provisioner_ec2("before-parameter-build.ec2.CreateFleet", faults.before_parameter_build)
        self._on_provisioner_ec2("before-call.ec2.CreateFleet", faults.before_call)
        self._on_provisioner_ec2("after-call.ec2.CreateFleet", faults.after_call)
        self.faults = faults

    def _on_provisioner_ec2(self, event: str, hook: Callable[..., Any]) -> None:
        """A botocore hook on the provisioner's session, before its cold start builds its EC2 client (a
        client copies its session's hooks when it is made)."""
        from carpool import environment
        from carpool.adapters.aws import session

        with environment.using(self.function_env["provisioner"]):
            session.session().events.register(event, hook)

    # -- what users do

    def manifests(self, kinds: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The scenario's manifests (inline or from files, as `carpool simulate` reads them), of `kinds`."""
        docs = [d for _label, text in self.scenario.manifest_texts() for d in yaml.safe_load_all(text) if d]
        return [d for d in docs if kinds is None or d.get("kind") in kinds]

    def apply(self, docs: Iterable[Mapping[str, Any]]) -> str:
        """`kubectl apply -f -` of the documents, as a user does (answers kubectl's output)."""
        text = yaml.safe_dump_all([dict(d) for d in docs])
        return self.plane.kubectl("apply", "-f", "-", input_text=text).stdout

    def kubectl(self, *args: str) -> str:
        return self.plane.kubectl(*args).stdout

    def deployment(self, name: str, replicas: int, *, cpu: str = "100m", memory: str = "128Mi",
                   namespace: str = "default", spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A Deployment of pause pods asking `cpu`/`memory` each (`spec` merges into the pod spec)."""
        pod_spec = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **(spec or {})}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}}

    def scale(self, name: str, replicas: int, namespace: str = "default") -> None:
        self.kubectl("scale", f"deployment/{name}", f"--replicas={replicas}", "-n", namespace)

    # -- what users see

    def get(self, resource: str, *, namespace: str | None = None, selector: str | None = None) -> list[dict[str, Any]]:
        """`kubectl get RESOURCE -o json` items (all namespaces unless one is named)."""
        args = ["get", resource, "-o", "json"]
        args += ["-n", namespace] if namespace else ["-A"]
        if selector:
            args += ["-l", selector]
        return list(json.loads(self.kubectl(*args))["items"])

    def pods(self, selector: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.get("pods", namespace=namespace, selector=selector)

    def nodes(self) -> list[dict[str, Any]]:
        return list(json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"])

    def nodeclaims(self) -> list[dict[str, Any]]:
        return list(json.loads(self.kubectl("get", "nodeclaims.karpenter.sh", "-o", "json"))["items"])

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        found = self.get("events")
        return [e for e in found if reason is None or e.get("reason") == reason]

    def instances(self, states: tuple[str, ...] = ("pending", "running")) -> list[dict[str, Any]]:
        """Local EC2's instances of this cluster in `states`."""
        pages = self.aws.client("ec2").get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": list(states)}])
        return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float, every: float = 2.0) -> Any:
        """Poll `check` until it answers something true; fail naming `what`, the Lambda errors so far,
        the time waited and what the cluster shows (`describe`)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = check()
            if answer:
                return answer
            if time.monotonic() > deadline:
                errors = [e.error for e in self.lambdas.errors()][-3:] if self._run_lambda else []
                raise AssertionError(f"not so after {timeout:g} s: {what}; Lambda errors: {errors}\n{self.describe()}")
            alive = self.plane.alive()
            if not all(alive.values()):
                raise AssertionError(f"a control plane component died: {alive}")
            time.sleep(every)


    def describe(self) -> str:
        """Nodes (taints, Ready) and pods not Running (phase, the scheduler's message): what a failed wait
        shows, as `kubectl get` would."""
        lines = []
        for node in self.nodes():
            ready = {c["type"]: c["status"] for c in node["status"].get("conditions") or []}.get("Ready")
            taints = [t["key"] for t in node["spec"].get("taints") or []]
            lines.append(f"node {node['metadata']['name']} Ready={ready} taints={taints}")
        for pod in self.pods():
            if pod["status"].get("phase") != "Running":
                why = [c.get("message", "") for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
                lines.append(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']} "
                             f"{pod['status'].get('phase')} {why}")
        return "\n".join(lines[:40])


def _trust(service: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


@contextmanager
def _bridge(tier: RealTier) -> Iterator[Any]:
    """h/boot's `InstanceBridge` on the patched hollow kubelets (`kubelets.HollowKubelets`): each instance
    boots from carpool's own user data a boot time after launch; a gone instance's kubelet stops."""
    from tests.realcluster.instances import InstanceBridge
    from tests.realcluster.kubelets import HollowKubelets

    with HollowKubelets(tier.plane.endpoint, tier.plane.ca_file, tier.plane.ca_key,
                        run_dir=tier.plane.run_dir / "kubelets") as kubelets:
        bridge = InstanceBridge(tier.aws.client("ec2"), kubelets, tier.boot_seconds)
        bridge.start()
        try:
            yield bridge
        finally:
            bridge.stop()


class Stamps:
    """When each step of a pod's way to capacity happened, on the wall clock, as the real objects show it
    (`carpool simulate`'s steps, `carpool.sim.run.time_to_capacity`): a pod marked Unschedulable by the
    real scheduler, the CreateFleet answer that launched its node's instance (a hook on the provisioner's
    EC2 requests), the Node created, `karpenter.sh/unregistered` lifted, the pod bound. Read from watches
    of pods and nodes (`time.time()` when each change arrived: the API's own stamps have whole seconds)."""

    def __init__(self, plane: ControlPlane) -> None:
        self._plane = plane
        self.pending: dict[str, float] = {}
        self.bound: dict[str, tuple[float, str]] = {}
        self.node_created: dict[str, float] = {}
        self.node_lifted: dict[str, float] = {}
        self.node_instance: dict[str, str] = {}
        self.launched: dict[str, float] = {}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._follow, args=(path, handle), daemon=True, name=f"stamps-{path}")
                         for path, handle in (("/api/v1/pods", self._pod), ("/api/v1/nodes", self._node))]

    def __enter__(self) -> Stamps:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def after_create_fleet(self, parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        """botocore's `after-call.ec2.CreateFleet`: each instance id answered, stamped now."""
        now = time.time()
        for group in (parsed or {}).get("Instances") or []:
            for iid in group.get("InstanceIds") or []:
                self.launched.setdefault(iid, now)

    def _follow(self, path: str, handle: Callable[[dict[str, Any], float], None]) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                params = {"watch": "1", "timeoutSeconds": "60", **({"resourceVersion": version} if version else {})}
                with self._plane.http.stream("GET", f"{self._plane.endpoint}{path}", params=params, timeout=90,
                                             headers={"Authorization": f"Bearer {self._plane.admin_token}"}) as answer:
                    for line in answer.iter_lines():
                        event = json.loads(line)
                        if event.get("type") == "ERROR":
                            version = ""
                            break
                        version = event["object"]["metadata"].get("resourceVersion", version)
                        handle(event["object"], time.time())
                        if self._stop.is_set():
                            return
            except Exception:  # a broken watch resumes (the plane stopping ends the loop)
                self._stop.wait(0.5)

    def _pod(self, pod: dict[str, Any], now: float) -> None:
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        if pod["spec"].get("nodeName"):
            self.bound.setdefault(key, (now, pod["spec"]["nodeName"]))
        elif any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                 for c in pod["status"].get("conditions") or []):
            self.pending.setdefault(key, now)

    def _node(self, node: dict[str, Any], now: float) -> None:
        name = node["metadata"]["name"]
        self.node_created.setdefault(name, now)
        provider = node["spec"].get("providerID", "")
        if provider.startswith("aws:///"):
            self.node_instance[name] = provider.rsplit("/", 1)[-1]
        if not [t for t in node["spec"].get("taints") or [] if t["key"] == "karpenter.sh/unregistered"]:
            self.node_lifted.setdefault(name, now)

    def steps(self) -> dict[str, dict[str, float]]:
        """Per pod that waited for a node launched while it was pending: seconds of each step
        (`pending->CreateFleet`, `CreateFleet->Node`, `Node->lifted`, `lifted->bound`, `pending->bound`)."""
        out = {}
        for pod, pending in self.pending.items():
            if pod not in self.bound:
                continue
            bound, node = self.bound[pod]
            launched = self.launched.get(self.node_instance.get(node, ""))
            created, lifted = self.node_created.get(node), self.node_lifted.get(node)
            if launched is None or created is None or lifted is None or launched < pending:
                continue
            out[pod] = {"pending->CreateFleet": launched - pending, "CreateFleet->Node": created - launched,
                        "Node->lifted": lifted - created, "lifted->bound": bound - lifted,
                        "pending->bound": bound - pending}
        return out


def percentiles(steps: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """p50 / p99 / max of each step over the pods (nearest rank, as `carpool simulate` reports them)."""
    out: dict[str, dict[str, float]] = {}
    names = sorted({step for pod in steps.values() for step in pod})
    for step in names:
        values = sorted(pod[step] for pod in steps.values() if step in pod)
        out[step] = {"p50": round(_rank(values, 0.5), 2), "p99": round(_rank(values, 0.99), 2),
                     "max": round(values[-1], 2)}
    return out


def _rank(values: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted `values`."""
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]
