"""Independent calls made at once (`carpool.together`): answers in order, failures as if made in turn, the
caller's context and X-Ray entity carried into the worker threads."""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from carpool import together

ROOT = Path(__file__).resolve().parents[3]


def test_calls_run_at_once_and_answer_in_order() -> None:
    barrier = threading.Barrier(3, timeout=10)  # made one after the other, the first would wait forever

    def call(n: int) -> int:
        barrier.wait()
        return n

    assert together.run([lambda: call(1), lambda: call(2), lambda: call(3)]) == [1, 2, 3]


def test_the_first_failure_in_order_is_raised_once_all_have_run() -> None:
    finished: list[str] = []

    def fail(name: str) -> None:
        finished.append(name)
        raise ValueError(name)

    def slow() -> None:
        threading.Event().wait(0.2)
        finished.append("slow")

    with pytest.raises(ValueError, match="first"):
        together.run([slow, lambda: fail("first"), lambda: fail("second")])
    assert sorted(finished) == ["first", "second", "slow"]


def test_workers_see_the_callers_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("probe", default="unset")
    var.set("caller's")
    assert together.run([var.get, var.get]) == ["caller's", "caller's"]


def test_beside_runs_its_own_call_here_meanwhile() -> None:
    here = threading.get_ident()
    gate = threading.Event()

    def worker() -> int:
        assert gate.wait(10)  # released only by the call on the caller's thread: both run at once
        return threading.get_ident()

    def mine() -> int:
        gate.set()
        return threading.get_ident()

    (mine_thread, (worker_thread,)) = together.beside(mine, [worker])
    assert mine_thread == here and worker_thread != here


def test_beside_raises_a_workers_failure_first() -> None:
    def boom() -> None:
        raise KeyError("worker")

    def mine() -> None:
        raise ValueError("here")

    with pytest.raises(KeyError):
        together.beside(mine, [boom])
    with pytest.raises(ValueError):
        together.beside(mine, [lambda: None])


_PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)
import boto3  # X-Ray patches botocore now (carpool.observability.trace_calls)
from aws_xray_sdk.core import xray_recorder
from carpool import together

def child():
    entity = xray_recorder.get_trace_entity()
    sub = xray_recorder.begin_subsegment("in-worker")
    xray_recorder.end_subsegment()
    return entity.id, sub.parent_id, type(entity).__name__

parent = xray_recorder.begin_subsegment("## handler")
carried = together.run([child, child])
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(1) as pool:  # a bare thread, for contrast
    bare = pool.submit(child).result()
xray_recorder.end_subsegment()
report = {"parent": parent.id, "carried": carried, "bare": bare}
print(json.dumps(report))
"""


def test_worker_calls_are_recorded_under_the_callers_subsegment_in_lambda() -> None:
    environment = {k: v for k, v in os.environ.items() if k != "POWERTOOLS_TRACE_DISABLED"}
    environment.update(
        PYTHONPATH=str(ROOT / "shared"), AWS_DEFAULT_REGION="us-east-1",
        LAMBDA_TASK_ROOT=str(ROOT / "functions" / "provisioner"),
        # a sampled invocation, as the Lambda runtime sets it
        _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
    )
    out = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT / "functions" / "provisioner" / "handler.py")],
                         env=environment, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    for entity_id, parent_id, kind in report["carried"]:
        assert (entity_id, parent_id, kind) == (report["parent"], report["parent"], "Subsegment")
    # what a worker thread records without it: under a facade segment of its own, beside the handler's
    assert report["bare"][2] == "FacadeSegment" and report["bare"][1] != report["parent"]
