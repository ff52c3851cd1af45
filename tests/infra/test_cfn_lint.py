"""The synthesized templates pass cfn-lint (AWS's CloudFormation linter) with no error.

cdk-nag checks security practice; cfn-lint checks what CloudFormation itself would refuse or get wrong
(property types, allowed values, references, IAM policy syntax, resource limits) against the resource
specifications AWS publishes. Warnings are informational; errors fail the test with their rule and path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk_support import Synth
from cfnlint.api import ManualArgs, lint

#: Both regions are checked in one run: cfn-lint validates each resource once against the schemas of every
#: region given, so a second region costs next to nothing and catches what one region's specification
#: refuses (a runtime or instance type not offered there).
REGIONS = ["us-east-1", "eu-west-1"]


def _errors(template: dict[str, Any], regions: list[str] = REGIONS) -> list[str]:
    matches = lint(json.dumps(template), config=ManualArgs(regions=regions))
    return [f"{m.rule.id} {'/'.join(str(p) for p in m.path)}: {m.message}" for m in matches
            if m.rule.id.startswith("E")]


@pytest.mark.parametrize("variant", ["default", "full"])
def test_template_has_no_cfn_lint_error(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    errors = _errors(synth.template.to_json())
    assert not errors, "\n".join(errors)


def test_cfn_lint_would_catch_a_broken_template(default: Synth) -> None:
    """The check can fail: a function with an invalid runtime is reported as an error, at that property.

    Linted as one function with the resources it refers to (role, policies, layer, log group, queues...),
    so that nothing else can be the error found: validating every resource of the stack again, seconds
    of schema checks, would prove no more.
    """
    template = default.template.to_json()
    name = next(k for k, v in template["Resources"].items() if v["Type"] == "AWS::Lambda::Function")
    small = _with_dependencies(template, name)
    assert len(small["Resources"]) < len(template["Resources"])
    assert _errors(small) == []  # the extract is itself a valid template
    function = small["Resources"][name]
    function["Properties"] = {**function["Properties"], "Runtime": "python2.1"}
    errors = _errors(small)
    assert errors and all(e.split()[1] == f"Resources/{name}/Properties/Runtime:" for e in errors), errors


def _with_dependencies(template: dict[str, Any], name: str) -> dict[str, Any]:
    """``template`` reduced to resource ``name`` and every resource it refers to, directly or not (Ref,
    Fn::GetAtt, DependsOn), and to the parameters and conditions those use."""
    resources = template["Resources"]
    keep: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in keep or current not in resources:
            continue
        keep.add(current)
        pending += _references(resources[current])
    return {
        **{k: v for k, v in template.items() if k not in {"Resources", "Outputs", "Rules"}},
        "Resources": {k: v for k, v in resources.items() if k in keep},
    }


def _references(value: Any) -> list[str]:
    if isinstance(value, dict):
        found: list[str] = []
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.append(inner)
            elif key == "Fn::GetAtt":
                found.append(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
            elif key == "DependsOn":
                found += [inner] if isinstance(inner, str) else list(inner)
            found += _references(inner)
        return found
    if isinstance(value, list):
        return [ref for inner in value for ref in _references(inner)]
    return []
