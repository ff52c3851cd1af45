"""The provisioner's Lambda init pauses the cyclic collector while its modules load and freezes what they
made out of its reach; the collector is on afterwards, unless it was off before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_PROBE = """
import gc, importlib.util, json, sys
if sys.argv[1] == "off":
    gc.disable()
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
spec = importlib.util.spec_from_file_location("handler", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "collections": len(collections)}))
"""


def _import_handler(collector: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)]),
           "POWERTOOLS_TRACE_DISABLED": "1"}
    done = subprocess.run([sys.executable, "-c", _PROBE, collector, str(ROOT / "functions" / "provisioner" / "handler.py")],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=True, timeout=120)
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_import_runs_without_collections_and_freezes_what_it_made() -> None:
    found = _import_handler("on")
    assert found["enabled"] is True
    assert found["collections"] <= 2  # before the handler runs (its spec, its code); unpaused: a hundred-odd
    assert isinstance(found["frozen"], int) and found["frozen"] > 10_000


def test_a_collector_switched_off_before_the_import_stays_off() -> None:
    assert _import_handler("off")["enabled"] is False
