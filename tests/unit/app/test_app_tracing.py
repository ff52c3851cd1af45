"""X-Ray in the handlers: AWS calls are traced in Lambda, yet importing a handler loads no AWS SDK.

Each case runs in a fresh interpreter: X-Ray's patches and Powertools' Tracer configuration are
process-wide, and the point is what a cold start imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HANDLERS = ("provisioner", "registrar", "interruption", "watcher", "disruption")

_PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
handler = importlib.util.module_from_spec(spec)
spec.loader.exec_module(handler)
report = {
    "disabled": handler.tracer.disabled,
    "loaded": sorted(m for m in ("boto3", "botocore.client", "requests", "sqlite3") if m in sys.modules),
}
import boto3, botocore.client
boto3.client("sts", region_name="us-east-1")
report["botocore_patched"] = getattr(botocore.client, "_xray_enabled", False)
print(json.dumps(report))
"""


def _import_handler(name: str, **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "POWERTOOLS_TRACE_DISABLED"}
    environment.update(PYTHONPATH=str(ROOT / "shared"), AWS_DEFAULT_REGION="us-east-1", **env)
    path = ROOT / "functions" / name / "handler.py"
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)], env=environment, capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", HANDLERS)
def test_in_lambda_the_tracer_is_on_and_botocore_is_patched_once_boto3_is_imported(name: str) -> None:
    report = _import_handler(name, LAMBDA_TASK_ROOT=str(ROOT / "functions" / name))
    assert report["disabled"] is False
    # Powertools' default auto-patching would have imported botocore.client (and requests, sqlite3...)
    assert report["loaded"] == []
    assert report["botocore_patched"] is True


def test_with_tracing_disabled_nothing_is_patched() -> None:
    report = _import_handler(
        "provisioner",
        LAMBDA_TASK_ROOT=str(ROOT / "functions" / "provisioner"),
        POWERTOOLS_TRACE_DISABLED="true",
    )
    assert report["disabled"] is True
    assert report["botocore_patched"] is False
