"""`tools/behaviour_fingerprint.py`: what a run draws at random is neutral, what carpool decides is not."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "behaviour_fingerprint.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("behaviour_fingerprint", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def result(instance: str, message_id: str, instance_type: str = "m6a.xlarge", **extra: Any) -> dict[str, Any]:
    return {
        "launches": [{"instanceId": instance, "instanceType": instance_type, "claim": "general-74c5bf450c"}],
        "decisions": [
            {"at": 12.4, "message": f"record {message_id} will be retried", "source": "provisioner",
             "data": {"stages": {"observe": 0.004}}},
            {"at": 12.4, "message": "", "source": "provisioner",
             "data": {"metric": "SchedulingDurationSeconds", "value": 0.0067}},
            {"at": 57.4, "message": f"registered node ip-10-0-1-7.ec2.internal for {instance}", "source": "registrar"},
        ],
        "wallSeconds": 4.2,
        **extra,
    }


def write(directory: Path, name: str, data: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(data))


def test_random_ids_timings_and_order_at_one_moment_are_not_behaviour(tool: ModuleType, tmp_path: Path) -> None:
    write(tmp_path / "a", "x.yaml.json", result("i-0123456789abcdef0", "38b69374-56df-41a8-b2da-0bc16647eccb"))
    other = result("i-0fedcba9876543210", "1368a8af-0ad0-4440-bfe1-7afded8cb24d", wallSeconds=9.9)
    other["decisions"].reverse()
    other["decisions"][1]["data"]["value"] = 0.0099
    write(tmp_path / "b", "x.yaml.json", other)
    assert tool.compare(tmp_path / "a", tmp_path / "b") == 0


def test_a_different_decision_is_reported(tool: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "a", "x.yaml.json", result("i-0123456789abcdef0", "38b69374-56df-41a8-b2da-0bc16647eccb"))
    write(tmp_path / "b", "x.yaml.json",
          result("i-0123456789abcdef0", "38b69374-56df-41a8-b2da-0bc16647eccb", instance_type="m6a.2xlarge"))
    assert tool.compare(tmp_path / "a", tmp_path / "b") == 1
    assert "x.yaml: DIFFERS in launches" in capsys.readouterr().out


def test_a_run_missing_after_is_reported(tool: ModuleType, tmp_path: Path) -> None:
    write(tmp_path / "a", "x.yaml.json", result("i-0123456789abcdef0", "38b69374-56df-41a8-b2da-0bc16647eccb"))
    (tmp_path / "b").mkdir()
    assert tool.compare(tmp_path / "a", tmp_path / "b") == 1
