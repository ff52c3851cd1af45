"""The synthesized templates pass cfn-lint (AWS's CloudFormation linter) with no error.

cdk-nag checks security practice; cfn-lint checks what CloudFormation itself would refuse or get wrong
(property types, allowed values, references, IAM policy syntax, resource limits) against the resource
specifications AWS publishes. Warnings are informational; errors fail the test with their rule and path.
"""

from __future__ import annotations

import json

import pytest
from cdk_support import Synth
from cfnlint.api import ManualArgs, lint


def _errors(synth: Synth) -> list[str]:
    text = json.dumps(synth.template.to_json())
    matches = lint(text, config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    return [f"{m.rule.id} {'/'.join(str(p) for p in m.path)}: {m.message}" for m in matches
            if m.rule.id.startswith("E")]


@pytest.mark.parametrize("variant", ["default", "full"])
def test_template_has_no_cfn_lint_error(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    errors = _errors(synth)
    assert not errors, "\n".join(errors)


def test_cfn_lint_would_catch_a_broken_template(default: Synth) -> None:
    """The check can fail: a function with an invalid runtime is reported as an error."""
    template = default.template.to_json()
    name, fn = next((k, v) for k, v in template["Resources"].items() if v["Type"] == "AWS::Lambda::Function")
    broken = {**template, "Resources": {**template["Resources"],
                                        name: {**fn, "Properties": {**fn["Properties"], "Runtime": "python2.1"}}}}
    matches = lint(json.dumps(broken), config=ManualArgs(regions=["us-east-1"]))
    assert any(m.rule.id.startswith("E") for m in matches)
