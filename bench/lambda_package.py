"""Lambda-side figures (what a deployment pays): handler cold import time and layer size.

Cold import: a fresh interpreter per sample imports `functions/<name>/handler.py` exactly as the Lambda
runtime does (by path, nothing pre-imported), so the time is what a cold start pays before the first
event. The environment is the deployed one as far as import work goes (`lambda_environment`): in
particular the X-Ray Tracer is enabled, since the stack deploys with tracing ACTIVE.
Layer size: the layer a synth would ship (built from the library and the lock, or taken from its cache in
`build/layer-<digest>`), unzipped, boto3/botocore excluded (the runtime provides them), and how much of it
is CPython 3.12 bytecode (none when the build machine has no 3.12: then every cold start compiles the layer).
The cold imports above run from the venv, which has bytecode: they match a layer that has it too.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COLD_IMPORT_TARGET_MS = 400.0
#: The layer's budget, unzipped. It ships CPython 3.12 bytecode (about 11 MB of it): Lambda's /opt is
#: read-only, so without it every cold start compiles the layer's modules, about 0.6 s of init. Bytecode is
#: worth more than the 5 MB it adds to the zip Lambda fetches; 35 MB stays far below Lambda's 250 MB.
LAYER_TARGET_BYTES = 35 * 1000 * 1000
_PROBE = (
    "import time, importlib.util as u; t = time.perf_counter();"
    "s = u.spec_from_file_location('h', {path!r}); m = u.module_from_spec(s); s.loader.exec_module(m);"
    "print((time.perf_counter() - t) * 1000)"
)


#: Set on a developer's machine or in CI, never by the Lambda runtime or carpool's stack; each would change
#: what a handler does on import (Powertools skips the X-Ray setup when tracing is disabled).
#: (`PYTHONDONTWRITEBYTECODE`: the layer ships compiled bytecode, so a sample must not recompile carpool's
#: modules on every start; `compile_shipped_code` compiles them first, as the layer build does)
_NOT_IN_LAMBDA = frozenset(
    {"POWERTOOLS_TRACE_DISABLED", "POWERTOOLS_DEV", "AWS_SAM_LOCAL", "AWS_CHALICE_CLI_MODE", "PYTHONDONTWRITEBYTECODE"}
)


def compile_shipped_code() -> None:
    """Bytecode for the library and the handlers, as the deployed layer and function code carry it: without
    it each cold sample would pay for compiling every module edited since it was last imported."""
    import compileall

    for folder in (ROOT / "shared" / "carpool", ROOT / "functions"):
        compileall.compile_dir(folder, quiet=1)


def lambda_environment(function: str) -> dict[str, str]:
    """The environment of a cold-import sample: what the deployed function sees, as far as it changes
    import work. `LAMBDA_TASK_ROOT` is set by the Lambda runtime and is how Powertools and the X-Ray SDK
    tell they run in Lambda; the stack (`infra/functions.py`) deploys every function with tracing ACTIVE
    and without `POWERTOOLS_TRACE_DISABLED`, so the Tracer is enabled here as it is there."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_IN_LAMBDA}
    env.update(
        {
            "PYTHONPATH": str(ROOT / "shared"),
            "LAMBDA_TASK_ROOT": str(ROOT / "functions" / function),
            "AWS_LAMBDA_FUNCTION_NAME": f"carpool-{function}",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            # the stack's own variables (infra/functions.py `_environment`) that Powertools reads
            "POWERTOOLS_SERVICE_NAME": "carpool",
            "POWERTOOLS_METRICS_NAMESPACE": "Carpool",
            "LOG_LEVEL": "INFO",
        }
    )
    return env


def cold_import_ms(function: str, samples: int = 5) -> float:
    """Median milliseconds to import one handler in a fresh interpreter."""
    path = ROOT / "functions" / function / "handler.py"
    env = lambda_environment(function)
    compile_shipped_code()
    times = []
    for _ in range(samples):
        out = subprocess.run([sys.executable, "-c", _PROBE.format(path=str(path))], capture_output=True, text=True,
                             env=env, check=True, cwd=ROOT)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in ("provisioner", "registrar", "interruption", "watcher", "disruption"):
        ms = cold_import_ms(name)
        out.append({"benchmark": f"cold import {name}", "milliseconds": round(ms, 1),
                    "targetMilliseconds": COLD_IMPORT_TARGET_MS if name == "provisioner" else None})
    from infra.layer import LayerError, build_layer

    try:
        build = build_layer(log=lambda _message: None)
    except LayerError as exc:
        out.append({"benchmark": "layer size", "note": f"layer could not be built: {str(exc).splitlines()[0]}"})
    else:
        bytecode = sum(p.stat().st_size for p in build.path.rglob("*.pyc"))
        out.append({"benchmark": "layer size (unzipped, no boto3)", "bytes": build.size_bytes,
                    "targetBytes": LAYER_TARGET_BYTES, "bytecodeBytes": bytecode,
                    "bytecode": build.bytecode.cache_tag if build.bytecode else None})
    return out


def print_rows(items: list[dict[str, Any]]) -> None:
    print()
    for r in items:
        if "milliseconds" in r:
            target = r.get("targetMilliseconds")
            verdict = f"  target <= {target:.0f} ms {'ok' if r['milliseconds'] <= target else 'MISSED'}" if target else ""
            print(f"{r['benchmark']:34} {r['milliseconds']:>8.1f} ms{verdict}")
        elif "bytes" in r:
            ok = "ok" if r["bytes"] <= r["targetBytes"] else "MISSED"
            print(f"{r['benchmark']:34} {r['bytes'] / 1e6:>8.1f} MB  target <= {r['targetBytes'] / 1e6:.0f} MB {ok}")
            if "bytecodeBytes" in r:
                tag = r["bytecode"] or "NONE: no CPython 3.12 at build time, cold starts compile from source"
                print(f"{'  of which bytecode':34} {r['bytecodeBytes'] / 1e6:>8.1f} MB  ({tag})")
        else:
            print(f"{r['benchmark']:34} {r['note']}")
