"""Lambda init + first invocation of the provisioner, as a cold start pays them.

The parent starts local AWS (moto) with the state, network, AMI and config a deployment has, and runs
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 500.0
PODS = 10


def child() -> dict[str, float]:
    """In the fresh interpreter: init and first invocation, milliseconds."""
    import importlib.util

    before = list(sys.modules)
    start = time.perf_counter()
    spec = importlib.util.spec_from_file_location("handler", ROOT / "functions" / "provisioner" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    init = time.perf_counter() - start
    event, build = _prepare()  # not timed: the simulated cluster and the event stand for the world outside
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
    os.environ["_X_AMZN_TRACE_ID"] = _trace_header()
    prepared = len(sys.modules)
    start = time.perf_counter()
    wiring.use(build())
    response = module.handler(event, _Context())
    first = time.perf_counter() - start
    loaded = loaded_by_init + list(sys.modules)[prepared:]
    return {"initMs": init * 1000, "firstInvocationMs": first * 1000, "catalogMs": catalog * 1000,
            "catalogDecodeMs": decoding * 1000, "failedRecords": float(len(response["batchItemFailures"])),
            "libraries": [name for name in loaded if _importable_library(name)]}  # type: ignore[dict-item]


def _importable_library(name: str) -> bool:
    """A module of the libraries, importable by its own name: not carpool's own code (the library, the
    handler, this bench), not an alias a package put in `sys.modules` under another name."""
    if name.split(".")[0] in ("carpool", "bench", "handler") or name.startswith("__"):
        return False
    spec = getattr(sys.modules.get(name), "__spec__", None)
    return spec is not None and spec.name == name


def _prepare() -> tuple[dict[str, Any], Any]:
    import dataclasses
    from datetime import UTC, datetime

    from bench.provisioner_stages import CLUSTER, _batch
    from carpool.api.k8s import Pod
    from carpool.app.settings import Settings
    from carpool.sim.cluster import SimulatedCluster

    cluster = SimulatedCluster(lambda: datetime.now(UTC))
    for i in range(PODS):
        cluster.add_pod({"metadata": {"name": f"p{i}", "namespace": "default", "uid": f"p{i}"},
                         "spec": {"containers": [{"name": "c", "image": "x",
                                                  "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
    cluster.bind()
    pods: list[Pod] = cluster.pending_pods()
    settings = dataclasses.replace(Settings.from_env(), cluster_name=CLUSTER, instance_profile="node-profile")

    def build() -> Any:
        from carpool.adapters.aws.wiring import build_from_env

        return build_from_env(settings, cluster=cluster)

    return _batch(pods, datetime.now(UTC)), build


def _trace_header() -> str:
    """The `_X_AMZN_TRACE_ID` the Lambda runtime sets before each invocation of a traced function (a
    sampled cold start). Without it the X-Ray SDK discards every subsegment ("Lambda worker still
    initializing") and the sample would not pay for recording and sending the AWS calls' subsegments."""
    import secrets

    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=1"


class _Context:
    function_name = "carpool-provisioner"
    memory_limit_in_mb = 2048
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:carpool-provisioner"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


def cold_environment() -> dict[str, str]:
    """The deployed provisioner's environment (`lambda_package.lambda_environment`), finding this tree."""
    from bench.lambda_package import lambda_environment

    return {**lambda_environment("provisioner"), "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}


def measure(samples: int = 3) -> list[dict[str, float]]:
    """Fresh-interpreter samples against one local AWS (emptied of claims between samples)."""
    from bench.lambda_package import compile_shipped_code
    from bench.provisioner_stages import AL2023_X86, CONFIG
    from carpool.sim import motofast
    from carpool.sim.localaws import LocalAws

    out = []
    # the simulation's local AWS, with its speed-ups of moto's own bookkeeping (carpool.sim.motofast)
    with LocalAws(cluster="bench") as aws, motofast.faster_moto():
        aws.create_state()
        aws.seed_network(zones=["us-east-1a", "us-east-1b", "us-east-1c"])
        aws.seed_amis([AL2023_X86])
        aws.put_config(CONFIG)
        local = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "CARPOOL_"))}
        env = {**cold_environment(), **local}
        compile_shipped_code()
        for _ in range(samples):
            aws.clear_state()
            refresh_catalog()  # the state a running deployment has (clear_state emptied the table)
            done = subprocess.run([sys.executable, "-m", "bench.first_invocation"], capture_output=True, text=True,
                                  env=env, cwd=ROOT, check=True)
            out.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


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
    import dataclasses

    from bench.provisioner_stages import CLUSTER
    from carpool.adapters.aws.wiring import build_from_env
    from carpool.app import catalog_refresh
    from carpool.app.settings import Settings
    from carpool.sim.cluster import SimulatedCluster

    settings = dataclasses.replace(Settings.from_env(), cluster_name=CLUSTER)
    deps = build_from_env(settings, cluster=SimulatedCluster(_utc_now))
    if not catalog_refresh.run(deps):
        raise RuntimeError("the catalog refresh stored nothing (see the log)")


def _utc_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def rows(samples: int = 3) -> list[dict[str, Any]]:
    import statistics

    found = measure(samples)
    init = statistics.median(s["initMs"] for s in found)
    first = statistics.median(s["firstInvocationMs"] for s in found)
    catalog = statistics.median(s["catalogMs"] for s in found)
    stages = {"init": round(init, 1), "stored catalog": round(catalog, 1),
              "rest of first invocation": round(first - catalog, 1)}
    decoding = statistics.median(s["catalogDecodeMs"] for s in found)
    libraries: list[str] = found[0]["libraries"]  # type: ignore[assignment]
    return [{"benchmark": "provisioner init + first invocation", "milliseconds": round(init + first, 1),
             "targetMilliseconds": TARGET_MS, "stages": stages, "catalogDecodeMs": round(decoding, 1),
             "floorMs": round(floor_ms(libraries), 1), "floorModules": len(libraries),
             "failedRecords": max(s["failedRecords"] for s in found)}]


def print_rows(items: list[dict[str, Any]]) -> None:
    for r in items:
        total = r["milliseconds"]
        ok = "ok" if total <= r["targetMilliseconds"] else "MISSED"
        shares = ", ".join(f"{k} {v:.0f} ms ({100 * v / total:.0f}%)" for k, v in r["stages"].items())
        beside = f"; catalog decoded in {r['catalogDecodeMs']:.0f} ms" if "catalogDecodeMs" in r else ""
        print(f"{r['benchmark']:34} {total:>8.0f} ms  target <= {r['targetMilliseconds']:.0f} ms {ok}  "
              f"({shares}{beside})")
        if "floorMs" in r:
            print(f"{'  floor: its libraries alone':34} {r['floorMs']:>8.0f} ms  (the {r['floorModules']} library "
                  "modules it loads, imported by a fresh interpreter: no carpool code, no request)")


if __name__ == "__main__":
    print(json.dumps(child()))
