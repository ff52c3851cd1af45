"""The floor under the provisioner's cold start: the libraries it loads, imported alone."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from bench import first_invocation


def test_the_floor_keeps_libraries_and_leaves_out_carpool_and_aliases(monkeypatch) -> None:
    import botocore.session

    alias = types.ModuleType("six.moves.fake")  # a package's alias: its spec names another module
    alias.__spec__ = botocore.session.__spec__
    monkeypatch.setitem(sys.modules, "six.moves.fake", alias)
    assert first_invocation._importable_library("botocore.session")
    assert not first_invocation._importable_library("six.moves.fake")
    assert not first_invocation._importable_library("carpool.app.provisioning.provision")
    assert not first_invocation._importable_library("bench.first_invocation")
    assert not first_invocation._importable_library("__main__")


def test_the_floor_really_imports_what_it_is_given() -> None:
    # a name that cannot be imported fails the measurement instead of being timed as nothing
    with pytest.raises(subprocess.CalledProcessError):
        first_invocation.floor_ms(["carpool_no_such_module"], samples=1)


def test_more_libraries_cost_more_than_none() -> None:
    none = first_invocation.floor_ms([], samples=1)
    some = first_invocation.floor_ms(["botocore.session", "pydantic"], samples=1)
    assert 0 <= none < some


def test_each_function_meets_a_world_where_it_does_its_real_work() -> None:
    # the registrar registers the node the provisioner launched (and names its instance after its
    # claim), the interruption handler replaces the interrupted node (CreateFleet)
    found = first_invocation.measure(1, ["registrar", "interruption"])
    for function, samples in found.items():
        assert samples[0]["failedRecords"] == 0, function
        assert samples[0]["initMs"] > 0 and samples[0]["firstInvocationMs"] > 0, function
        assert "botocore.client" in samples[0]["libraries"], function
    assert "ec2.CreateTags" in found["registrar"][0]["awsCalls"]  # the instance named after its claim
    assert "ec2.CreateFleet" in found["interruption"][0]["awsCalls"]


def test_a_row_prints_what_is_above_the_floor(capsys) -> None:
    row = {"benchmark": "provisioner init + first invocation", "milliseconds": 946.0, "targetMilliseconds": 500.0,
           "stages": {"init": 390.0, "stored catalog": 0.0, "rest of first invocation": 556.0},
           "floorMs": 490.0, "aboveFloorMs": 456.0, "floorModules": 605, "awsCalls": 20}
    first_invocation.print_rows([row])
    lines = capsys.readouterr().out.splitlines()
    assert "MISSED" in lines[0] and "20 AWS calls" in lines[0]
    assert "490 ms" in lines[1] and "floor" in lines[1]
    assert "456 ms" in lines[2] and "above the floor" in lines[2]
