"""The cold-import probe imports handlers the way the deployed functions do: with X-Ray tracing on."""

from __future__ import annotations

import subprocess
import sys

from bench.lambda_package import ROOT, lambda_environment


def test_the_probe_environment_enables_the_tracer_like_the_stack_does(monkeypatch) -> None:
    # a developer's shell may disable tracing; the deployed functions (tracing ACTIVE) never do
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    env = lambda_environment("provisioner")
    assert "POWERTOOLS_TRACE_DISABLED" not in env
    assert env["LAMBDA_TASK_ROOT"] == str(ROOT / "functions" / "provisioner")
    out = subprocess.run(
        [sys.executable, "-c", "from aws_lambda_powertools import Tracer; print(Tracer().disabled)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert out.stdout.strip() == "False"
