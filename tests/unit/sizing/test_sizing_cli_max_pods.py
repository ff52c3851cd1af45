"""`carpool max-pods` through typer's CliRunner: JSON shape, options, unknown types."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from carpool.cli import app

runner = CliRunner()


def run_json(*args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["max-pods", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_shape_for_m5_large() -> None:
    [row] = run_json("m5.large")
    assert row["instanceType"] == "m5.large"
    assert row["maxPods"] == 29
    assert row["eniLimitedPods"] == 29
    assert row["kubeReserved"] == {"cpuMillis": 70, "memoryMiB": 574}
    assert row["allocatable"] == {"cpuMillis": 1930, "memoryMiB": 6903, "pods": 29}
    assert row["notes"] == []


def test_several_types_keep_their_order() -> None:
    rows = run_json("t3.micro", "m5.24xlarge", "c6g.medium")
    assert [(r["instanceType"], r["maxPods"]) for r in rows] == [("t3.micro", 4), ("m5.24xlarge", 737), ("c6g.medium", 8)]


def test_prefix_delegation_and_reservation_notes() -> None:
    m5, c6g = run_json("m5.large", "c6g.medium", "--prefix-delegation")
    assert m5["maxPods"] == 110 and m5["allocatable"]["pods"] == 110
    assert m5["kubeReserved"] == {"cpuMillis": 70, "memoryMiB": 1465}
    assert c6g["maxPods"] == 98  # max-pods-calculator.sh --cni-prefix-delegation-enabled
    assert c6g["kubeReserved"] == {"cpuMillis": 60, "memoryMiB": 1333}
    assert c6g["allocatable"] == {"cpuMillis": 940, "memoryMiB": 402, "pods": 98}
    [note] = [n for n in c6g["notes"] if n.startswith("kube-reserved memory")]
    assert "as the user data states" in note and "small type loses" in note


def test_table_explains_that_reservations_follow_max_pods() -> None:
    result = runner.invoke(app, ["max-pods", "c6g.medium", "--prefix-delegation"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "kube-reserved memory is 255Mi + 11Mi x max pods, for the max pods carpool's user data sets" in text
    assert "small types lose room" in text
    windows = runner.invoke(app, ["max-pods", "m5.large", "--ami-family", "windows"])
    assert "user data sets" not in windows.stdout  # carpool does not write Windows user data


def test_network_and_kubelet_options() -> None:
    assert run_json("m5.large", "--custom-networking")[0]["maxPods"] == 20
    assert run_json("m5.large", "--reserved-enis", "1")[0]["maxPods"] == 20
    assert run_json("m5.large", "--max-pods", "58")[0]["maxPods"] == 58
    assert run_json("m5.large", "--pods-per-core", "5")[0]["maxPods"] == 10


def test_ami_family_option() -> None:
    [row] = run_json("m5.large", "--prefix-delegation", "--ami-family", "bottlerocket")
    assert row["kubeReserved"]["memoryMiB"] == 1465
    assert run_json("m5.large", "--ami-family", "windows")[0]["maxPods"] == 110


def test_table_output() -> None:
    result = runner.invoke(app, ["max-pods", "m5.large", "m4.large", "--prefix-delegation"])
    assert result.exit_code == 0, result.output
    assert "m5.large" in result.stdout and "110" in result.stdout
    assert "non-Nitro" in result.stdout


def test_unknown_type_exits_2_naming_it_with_suggestions() -> None:
    result = runner.invoke(app, ["max-pods", "m5.lage", "m5.large"])
    assert result.exit_code == 2
    assert "m5.lage" in result.stderr
    assert "did you mean" in result.stderr and "m5.large" in result.stderr


def test_invalid_ami_family_is_a_usage_error() -> None:
    result = runner.invoke(app, ["max-pods", "m5.large", "--ami-family", "ubuntu"])
    assert result.exit_code == 2
