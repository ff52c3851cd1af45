"""Lambda init + first invocation of the provisioner, as a cold start pays them.

The parent starts local AWS (moto) with the state, network and AMI a deployment has (the config is the
simulated cluster's NodePool and EC2NodeClass), and runs
`python -m bench.first_invocation` in a fresh interpreter pointed at it with the deployed environment
(`lambda_package.lambda_environment`: tracing on). The child times the handler's import (Lambda init),
then its first invocation: one SQS batch of 10 pending pods, with the production wiring built on first
use as `wiring.get()` does in Lambda, under the trace header the runtime sets on a sampled invocation
(the X-Ray SDK records and sends a subsegment per AWS call). Only the cluster adapter differs (the
simulated cluster stands in for the EKS API server; its set-up is not timed).

The live catalog is in the state table as in a running deployment: before the samples, the disruption
function's refresh (`carpool.app.catalog_refresh`, the production code) builds it from local EC2 once,
untimed. The cold start's catalog share is reported on its own: `StoredCatalogSource.get` on the
invocation's thread, i.e. what the invocation waited for the catalog there. The provisioner reads and
decodes it on a thread of its own from the start of its batch (`sources.catalog_read_ahead`), so that
share is what was left when `get` was called, and the rest counts in the rest of the first invocation;
the decoding's own duration, wherever it ran, is reported beside (`catalogDecodeMs`, not a stage: it
overlaps the others).

Beside the sample, the floor under it (`floorMs`): the third-party and standard-library modules that the
handler's import and its first invocation loaded, imported alone, in the same order, by a fresh
interpreter with the same environment. No carpool code runs and no request is made, so no cold start of
this function on these libraries (Powertools, its parser, batch and parameters utilities, the X-Ray SDK,
boto3, pydantic) can be faster on this machine. It is a lower bound: modules the simulated cluster's
set-up loaded first are left out, though the deployed function loads some of them too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: No target of its own any more: a cold start counts where it matters, inside time to capacity at the
#: function's configured memory (`carpool.sim.run.durations` models each cold start from these rows;
#: `bench/time_to_capacity.py` holds the targets).
TARGET_MS: float | None = None
PODS = 10
FUNCTIONS = ("provisioner", "watcher", "registrar", "interruption", "disruption")
#: the variable naming the JSON file of the world a sample meets (written by the parent)
WORLD = "CARPOOL_BENCH_WORLD"


def child(function: str = "provisioner") -> dict[str, float]:
    """In the fresh interpreter: init and first invocation of `function`, milliseconds. The world it meets
    (the simulated cluster's objects and the event) was prepared by the parent (`CARPOOL_BENCH_WORLD`)."""
    import importlib.util

    before = list(sys.modules)
    start = time.perf_counter()
    spec = importlib.util.spec_from_file_location("handler", ROOT / "functions" / function / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    init = time.perf_counter() - start
    event, build = _prepare(json.loads(Path(os.environ[WORLD]).read_text()))  # not timed: the world outside
    loaded_by_init = list(sys.modules)[len(before):]
    from carpool.app import sources, wiring

    fetch = sources.StoredCatalogSource.get
    catalog = 0.0

    def timed_fetch(self: Any, now: Any) -> Any:  # the catalog's share, reported on its own
        nonlocal catalog
        begin = time.perf_counter()
        try:
            return fetch(self, now)
        finally:
            catalog += time.perf_counter() - begin

    sources.StoredCatalogSource.get = timed_fetch  # type: ignore[method-assign]
    from carpool.catalog import encoding

    decode = encoding.decode
    decoding = 0.0

    def timed_decode(data: bytes) -> Any:  # on whichever thread decodes it
        nonlocal decoding
        begin = time.perf_counter()
        try:
            return decode(data)
        finally:
            decoding += time.perf_counter() - begin

    encoding.decode = timed_decode
    calls = _record_aws_calls()
    os.environ["_X_AMZN_TRACE_ID"] = _trace_header()
    prepared = len(sys.modules)
    start = time.perf_counter()
    wiring.use(build())
    response = module.handler(event, _Context(function))
    first = time.perf_counter() - start
    loaded = loaded_by_init + list(sys.modules)[prepared:]
    failed = response.get("batchItemFailures", []) if isinstance(response, dict) else []
    return {"initMs": init * 1000, "firstInvocationMs": first * 1000, "catalogMs": catalog * 1000,
            "catalogDecodeMs": decoding * 1000, "failedRecords": float(len(failed)),
            "libraries": [name for name in loaded if _importable_library(name)],  # type: ignore[dict-item]
            "awsCalls": calls}  # type: ignore[dict-item]


def _record_aws_calls() -> list[str]:
    """The AWS operations the invocation makes, in order (`service.Operation`): what its first invocation
    waited on, and a check that the sample did its function's real work. botocore is hooked when the
    function itself imports it (wrapt's post-import hook, as the X-Ray SDK patches it; the handler's
    import already loaded wrapt), so the sample does not load it ahead of the function and time less."""
    import wrapt

    calls: list[str] = []

    def hook(module: Any) -> None:
        make = module.BaseClient._make_api_call

        def recorded(self: Any, operation: str, params: Any) -> Any:
            calls.append(f"{self.meta.service_model.service_name}.{operation}")
            return make(self, operation, params)

        module.BaseClient._make_api_call = recorded

    wrapt.register_post_import_hook(hook, "botocore.client")
    return calls


def _importable_library(name: str) -> bool:
    """A module of the libraries, importable by its own name: not carpool's own code (the library, the
    handler, this bench), not an alias a package put in `sys.modules` under another name."""
    if name.split(".")[0] in ("carpool", "bench", "handler") or name.startswith("__"):
        return False
    spec = getattr(sys.modules.get(name), "__spec__", None)
    return spec is not None and spec.name == name


def _prepare(world: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The simulated cluster holding the world's nodes and pods (the kube-scheduler's binding done), the
    event, and how to build the production dependencies around that cluster."""
    from datetime import UTC, datetime

    from bench.provisioner_stages import apply_config, deployed_settings
    from carpool.sim.cluster.simulated import SimulatedCluster

    cluster = apply_config(SimulatedCluster(lambda: datetime.now(UTC)))
    for node in world["nodes"]:
        cluster.add_node(node)
    for pod in world["pods"]:
        cluster.add_pod(pod)
    cluster.bind()
    settings = deployed_settings()

    def build() -> Any:
        from carpool.adapters.aws.wiring import build_from_env

        return build_from_env(settings, cluster=cluster, karpenter=cluster)

    return world["event"], build


def _trace_header() -> str:
    """The `_X_AMZN_TRACE_ID` the Lambda runtime sets before each invocation of a traced function (a
    sampled cold start). Without it the X-Ray SDK discards every subsegment ("Lambda worker still
    initializing") and the sample would not pay for recording and sending the AWS calls' subsegments."""
    import secrets

    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=1"


class _Context:
    """The Lambda context object of `function`'s invocation (what Powertools reads)."""

    memory_limit_in_mb = 2048
    aws_request_id = "bench"

    def __init__(self, function: str) -> None:
        self.function_name = f"carpool-{function}"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:carpool-{function}"

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


def cold_environment(function: str = "provisioner") -> dict[str, str]:
    """The deployed function's environment (`lambda_package.lambda_environment`), finding this tree."""
    from bench.lambda_package import lambda_environment

    return {**lambda_environment(function), "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}


def measure(samples: int = 3, functions: Sequence[str] = FUNCTIONS) -> dict[str, list[dict[str, float]]]:
    """Fresh-interpreter samples of each function against one local AWS, each in the world a cold start of
    that function meets (`_Worlds`)."""
    import tempfile

    from bench.lambda_package import compile_shipped_code
    from bench.provisioner_stages import AL2023_X86, CLUSTER, DEPLOYED_ENV
    from carpool.sim.localaws import motofast
    from carpool.sim.localaws.server import LocalAws

    out: dict[str, list[dict[str, float]]] = {name: [] for name in functions}
    # the simulation's local AWS, with its speed-ups of moto's own bookkeeping (carpool.sim.localaws.motofast)
    with LocalAws(cluster=CLUSTER) as aws, motofast.faster_moto(), tempfile.TemporaryDirectory() as folder:
        aws.create_state()
        path = aws.create_event_path()
        aws.seed_network(zones=["us-east-1a", "us-east-1b", "us-east-1c"])
        aws.seed_amis([AL2023_X86])
        local = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "CARPOOL_"))}
        compile_shipped_code()
        world_file = Path(folder) / "world.json"

        def sample(function: str, world: dict[str, Any]) -> None:
            world_file.write_text(json.dumps(world, default=str))
            env = {**cold_environment(function), **local, WORLD: str(world_file), **DEPLOYED_ENV}
            done = subprocess.run([sys.executable, "-m", "bench.first_invocation", function], capture_output=True,
                                  text=True, env=env, cwd=ROOT)
            if done.returncode:
                raise RuntimeError(f"the {function} sample failed:\n{done.stderr[-3000:]}")
            out[function].append(json.loads(done.stdout.strip().splitlines()[-1]))

        for _ in range(samples):
            for function in functions:  # each in a world of its own: what one function did is not another's
                aws.clear_state()
                refresh_catalog()  # the state a running deployment has (clear_state emptied the table)
                sample(function, _Worlds(path).meeting(function))
    return out


class _Worlds:
    """What each function's cold start meets, made by carpool's own handlers run here (untimed) on a
    simulated cluster: pending pods (provisioner, watcher); the nodes the provisioner launched for them,
    just joined (registrar: their `Node Registered` events); those nodes registered by the registrar with
    the pods bound to them (disruption: its schedule; interruption: a spot interruption warning)."""

    def __init__(self, path: Any) -> None:
        from datetime import UTC, datetime

        from bench.provisioner_stages import apply_config
        from carpool.sim.cluster.simulated import SimulatedCluster

        self.path = path
        self.cluster = apply_config(SimulatedCluster(lambda: datetime.now(UTC)))
        for i in range(PODS):
            self.cluster.add_pod({"metadata": {"name": f"p{i}", "namespace": "default", "uid": f"p{i}"},
                                  "spec": {"containers": [{"name": "c", "image": "x",
                                                           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
        self.cluster.bind()

    def meeting(self, function: str) -> dict[str, Any]:
        """The world `function`'s cold start meets."""
        if function in ("provisioner", "watcher"):
            return self.pending(function)
        registering = self.launched()
        if function == "registrar":
            return registering
        return self.registered(registering["event"], function)

    def pending(self, function: str) -> dict[str, Any]:
        """Pods pending: the provisioner's batch of their events, or the watcher's schedule."""
        from bench.provisioner_stages import _batch
        from carpool.sim.localaws.lambda_runtime import scheduled_event

        event = (_batch(self.cluster.pending_pods(), _utc_now()) if function == "provisioner"
                 else scheduled_event(f"carpool-{function}", _utc_now(), "us-east-1"))
        return {"nodes": [], "pods": self._pods(), "event": event}

    def launched(self) -> dict[str, Any]:
        """The provisioner's claims launched; their nodes registered by their kubelets, not yet by carpool."""
        from carpool.api import events

        self._invoke("provisioner", self.pending("provisioner")["event"])
        nodes = [self.cluster.get_node(self.cluster.add_node(raw)) for raw in self._joined_nodes()]
        entries = [events.node_registered_entry(self._name(), node, _utc_now(), "bus") for node in nodes if node]
        return {"nodes": self._nodes(), "pods": self._pods(), "event": self._records(entries, "registrar")}

    def registered(self, registering: dict[str, Any], function: str) -> dict[str, Any]:
        """After the registrar's run on `registering`: nodes registered and Ready, the pods bound to them;
        the disruption function's schedule or a spot interruption warning for one of the nodes."""
        from carpool.api import events
        from carpool.sim.localaws.lambda_runtime import scheduled_event

        self._invoke("registrar", registering)
        self.cluster.bind()
        if function == "disruption":
            event = scheduled_event("carpool-disruption", _utc_now(), "us-east-1")
        else:
            instance = next(iter(self._instances()))
            warning = {"Time": _utc_now(), "Source": "aws.ec2", "DetailType": events.SPOT_INTERRUPTION,
                       "Detail": json.dumps({"instance-id": instance, "instance-action": "terminate"}),
                       "Resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance}"]}
            event = self._records([warning], "interruption")
        return {"nodes": self._nodes(), "pods": self._pods(), "event": event}

    def _invoke(self, function: str, event: dict[str, Any]) -> None:
        import contextlib
        import io

        from carpool.adapters.aws.wiring import build_from_env
        from carpool.app import wiring
        from carpool.sim.localaws.lambda_runtime import LambdaContext, load_handler

        handler = load_handler(function, ROOT / "functions")
        found = wiring.installed()
        wiring.use(build_from_env(self._settings(), cluster=self.cluster, karpenter=self.cluster))
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # its log lines
                answer = handler(event, LambdaContext.deployed(function))
        finally:  # the caller's wiring back: a world prepared in-process leaves none of its own behind
            wiring.use(found)
        if answer.get("batchItemFailures"):
            raise RuntimeError(f"preparing the bench world: the {function} failed {answer}")

    def _joined_nodes(self) -> list[dict[str, Any]]:
        """Each launched instance's Node as its kubelet registers it (`karpenter.sh/unregistered` taint on)."""
        from carpool.adapters.aws import session
        from carpool.sim.cluster.kubelet import InstanceFacts, static_node
        from carpool.sim.cluster.specs import Truth

        ec2 = session.client("ec2")
        nodes = []
        for instance_id, inst in self._instances().items():
            described = ec2.describe_instance_types(InstanceTypes=[inst["InstanceType"]])["InstanceTypes"][0]
            zone = inst["Placement"]["AvailabilityZone"]
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
            labels = {k: v for k, v in tags.items() if k in ("karpenter.sh/nodepool", "karpenter.k8s.aws/ec2nodeclass")}
            nodes.append(static_node(inst["PrivateDnsName"], InstanceFacts.from_ec2(described), zone, "us-east-1",
                                     inst.get("InstanceLifecycle", "on-demand"), "al2023", labels,
                                     [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}], Truth(),
                                     instance_id))
        return nodes

    def _instances(self) -> dict[str, dict[str, Any]]:
        """The instances of this world's claims (local EC2 keeps those of the worlds before it)."""
        from carpool.adapters.aws import session
        from carpool.adapters.aws.dynamodb.ledger import DynamoLedger

        ids = sorted(c.instance_id for c in DynamoLedger(self._settings().table).active() if c.instance_id)
        if not ids:
            raise RuntimeError("preparing the bench world: the provisioner launched nothing")
        pages = session.client("ec2").describe_instances(InstanceIds=ids)
        return {i["InstanceId"]: i for r in pages["Reservations"] for i in r["Instances"]}

    def _records(self, entries: list[dict[str, Any]], role: str) -> dict[str, Any]:
        """SQS records as the function's event source mapping delivers them from its queue."""
        from bench.provisioner_stages import sqs_records

        account, name = self.path.queues[role].rstrip("/").split("/")[-2:]
        return sqs_records(entries, f"arn:aws:sqs:us-east-1:{account}:{name}")

    def _nodes(self) -> list[dict[str, Any]]:
        return [dict(rec.raw) for rec in self.cluster.store("Node").values()]

    def _pods(self) -> list[dict[str, Any]]:
        return [dict(rec.raw) for rec in self.cluster.store("Pod").values()]

    def _settings(self) -> Any:


        from bench.provisioner_stages import deployed_settings

        return deployed_settings()

    @staticmethod
    def _name() -> str:
        from bench.provisioner_stages import CLUSTER

        return CLUSTER


def floor_ms(libraries: list[str], env: dict[str, str] | None = None, samples: int = 3) -> float:
    """Median milliseconds a fresh interpreter with `env` takes to import `libraries` in that order (see
    the module docstring: the floor under the cold start)."""
    import statistics

    code = ("import importlib, json, sys, time\nnames = json.loads(sys.stdin.read())\n"
            "start = time.perf_counter()\nfor name in names:\n    importlib.import_module(name)\n"
            "print((time.perf_counter() - start) * 1000)")
    times = []
    for _ in range(samples):
        done = subprocess.run([sys.executable, "-c", code], input=json.dumps(libraries), capture_output=True,
                              text=True, env=env or cold_environment(), cwd=ROOT, check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def refresh_catalog() -> None:
    """Store the live catalog the way the deployed disruption function does (not timed)."""
    from bench.provisioner_stages import deployed_settings
    from carpool.adapters.aws.wiring import build_from_env
    from carpool.app import catalog_refresh
    from carpool.sim.cluster.simulated import SimulatedCluster

    cluster = SimulatedCluster(_utc_now)
    deps = build_from_env(deployed_settings(), cluster=cluster, karpenter=cluster)
    if not catalog_refresh.run(deps):
        raise RuntimeError("the catalog refresh stored nothing (see the log)")


def _utc_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def rows(samples: int = 3, functions: Sequence[str] = FUNCTIONS) -> list[dict[str, Any]]:
    """One row per function: init + first invocation (median), its stages and the floor under it."""
    import statistics

    found = measure(samples, functions)
    out = []
    for function in functions:
        taken = found[function]
        init = statistics.median(s["initMs"] for s in taken)
        first = statistics.median(s["firstInvocationMs"] for s in taken)
        catalog = statistics.median(s["catalogMs"] for s in taken)
        stages = {"init": round(init, 1), "stored catalog": round(catalog, 1),
                  "rest of first invocation": round(first - catalog, 1)}
        libraries: list[str] = taken[0]["libraries"]  # type: ignore[assignment]
        floor = round(floor_ms(libraries, cold_environment(function)), 1)
        out.append({"benchmark": f"{function} init + first invocation", "milliseconds": round(init + first, 1),
                    "targetMilliseconds": TARGET_MS, "stages": stages,
                    "catalogDecodeMs": round(statistics.median(s["catalogDecodeMs"] for s in taken), 1),
                    "floorMs": floor,
                    "aboveFloorMs": round(init + first - floor, 1),
                    "floorModules": len(libraries), "failedRecords": max(s["failedRecords"] for s in taken),
                    "awsCalls": len(taken[0]["awsCalls"])})  # type: ignore[arg-type]
    return out


def print_rows(items: list[dict[str, Any]]) -> None:
    for r in items:
        total = r["milliseconds"]
        target = r["targetMilliseconds"]
        verdict = "" if target is None else f"target <= {target:.0f} ms {'ok' if total <= target else 'MISSED'}  "
        shares = ", ".join(f"{k} {v:.0f} ms ({100 * v / total:.0f}%)" for k, v in r["stages"].items())
        beside = f"; catalog decoded in {r['catalogDecodeMs']:.0f} ms" if r.get("catalogDecodeMs") else ""
        failed = f"; {r['failedRecords']:.0f} records FAILED" if r.get("failedRecords") else ""
        calls = f"; {r['awsCalls']} AWS calls" if "awsCalls" in r else ""
        print(f"{r['benchmark']:38} {total:>6.0f} ms  {verdict}({shares}{beside}{calls}{failed})")
        if "floorMs" in r:
            print(f"{'  floor: its libraries alone':38} {r['floorMs']:>6.0f} ms  (the {r['floorModules']} library "
                  "modules it loads, imported by a fresh interpreter: no carpool code, no request)")
            print(f"{'  above the floor':38} {r['aboveFloorMs']:>6.0f} ms  (carpool's code, its AWS calls, the libraries' "
                  "first use)")


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1] if len(sys.argv) > 1 else "provisioner")))
