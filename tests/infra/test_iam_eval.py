"""The IAM evaluator used by test_iam_requests.py, against cases from AWS's policy evaluation docs."""

from __future__ import annotations

import pytest
from iam_eval import Decision, UnsupportedPolicy, condition_holds, evaluate, resource_matches

ARN = "arn:aws:ec2:us-east-1:123456789012:instance/i-1"


def allow(action: str | list[str] = "ec2:TerminateInstances", resource: str | list[str] = "*", **condition):  # type: ignore[no-untyped-def]
    statement = {"Effect": "Allow", "Action": action, "Resource": resource}
    if condition:
        statement["Condition"] = condition
    return statement


def test_allow_needed_and_explicit_deny_wins() -> None:
    assert evaluate([], "ec2:TerminateInstances", ARN, {}).decision is Decision.IMPLICIT_DENY
    assert evaluate([allow()], "ec2:TerminateInstances", ARN, {}).decision is Decision.ALLOW
    deny = {**allow(), "Effect": "Deny"}
    result = evaluate([allow(), deny], "ec2:TerminateInstances", ARN, {})
    assert result.decision is Decision.EXPLICIT_DENY and result.statements == (1,)


def test_actions_match_case_insensitively_with_wildcards() -> None:
    assert evaluate([allow("EC2:terminate*")], "ec2:TerminateInstances", ARN, {}).allowed
    assert evaluate([allow("ec2:Describe?nstances")], "ec2:DescribeInstances", "*", {}).allowed
    assert not evaluate([allow("ec2:Describe*")], "ec2:TerminateInstances", ARN, {}).allowed
    assert evaluate([{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}], "ec2:RunInstances", ARN, {}).allowed
    assert not evaluate([{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}], "iam:PassRole", ARN, {}).allowed


def test_resources_match_segment_by_segment_and_case_sensitively() -> None:
    assert resource_matches("arn:aws:ec2:us-east-1:*:instance/*", ARN)
    assert resource_matches("*", ARN)
    assert not resource_matches("arn:aws:ec2:us-east-1:123456789012:Instance/*", ARN)
    # a wildcard does not reach into the next segment: the account is empty for public images
    assert not resource_matches("arn:aws:ec2:*:image/*", "arn:aws:ec2:us-east-1::image/ami-1")
    assert resource_matches("arn:aws:ec2:us-east-1::image/*", "arn:aws:ec2:us-east-1::image/ami-1")
    assert not resource_matches("arn:aws:ec2:us-east-1::image/*", "arn:aws:ec2:us-east-1:123456789012:image/ami-1")
    assert not evaluate([{"Effect": "Allow", "Action": "*", "NotResource": ARN}], "ec2:X", ARN, {}).allowed


def test_string_conditions() -> None:
    owned = {"StringEquals": {"aws:ResourceTag/carpool.dev/cluster": "demo"}}
    assert condition_holds(owned, {"aws:ResourceTag/carpool.dev/cluster": ["demo"]})
    assert condition_holds(owned, {"AWS:RESOURCETAG/carpool.dev/cluster": ["demo"]})  # key names: any case
    assert not condition_holds(owned, {"aws:ResourceTag/carpool.dev/cluster": ["Demo"]})  # values: exact
    assert not condition_holds(owned, {})  # a missing key fails a positive operator
    assert condition_holds({"StringEqualsIfExists": owned["StringEquals"]}, {})
    assert condition_holds({"StringNotEquals": {"aws:ResourceTag/env": "prod"}}, {})  # ...satisfies a negated one
    assert not condition_holds({"StringNotEquals": {"aws:ResourceTag/env": ["prod", "stage"]}},
                               {"aws:ResourceTag/env": ["stage"]})
    assert condition_holds({"StringLike": {"aws:ResourceTag/name": "carpool/*"}}, {"aws:ResourceTag/name": ["carpool/x"]})
    assert condition_holds({"StringEqualsIgnoreCase": {"k": "ABC"}}, {"k": ["abc"]})
    # any listed value of a key will do; every key and every block must hold
    both = {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"], "aws:RequestTag/a": "1"}}
    assert condition_holds(both, {"ec2:CreateAction": ["CreateFleet"], "aws:RequestTag/a": ["1"]})
    assert not condition_holds(both, {"ec2:CreateAction": ["CreateFleet"]})


def test_set_qualifiers_on_multivalued_keys() -> None:
    only = {"ForAllValues:StringEquals": {"aws:TagKeys": ["Name", "karpenter.sh/nodeclaim"]}}
    assert condition_holds(only, {"aws:TagKeys": ["Name"]})
    assert not condition_holds(only, {"aws:TagKeys": ["Name", "kubernetes.io/cluster/demo"]})
    assert condition_holds(only, {})  # ForAllValues holds for a missing key (AWS's documented pitfall)
    some = {"ForAnyValue:StringEquals": {"aws:TagKeys": "Name"}}
    assert condition_holds(some, {"aws:TagKeys": ["x", "Name"]})
    assert not condition_holds(some, {})
    with pytest.raises(UnsupportedPolicy):  # single-valued operator on several values: undefined here
        condition_holds({"StringEquals": {"aws:TagKeys": "Name"}}, {"aws:TagKeys": ["Name", "x"]})


def test_null_bool_and_arn_conditions() -> None:
    assert condition_holds({"Null": {"aws:RequestTag/team": "true"}}, {})
    assert not condition_holds({"Null": {"aws:RequestTag/team": "true"}}, {"aws:RequestTag/team": ["a"]})
    assert condition_holds({"Null": {"aws:RequestTag/team": "false"}}, {"aws:RequestTag/team": ["a"]})
    assert condition_holds({"Bool": {"aws:SecureTransport": True}}, {"aws:SecureTransport": ["true"]})
    assert not condition_holds({"Bool": {"aws:SecureTransport": "true"}}, {"aws:SecureTransport": ["false"]})
    assert condition_holds({"ArnLike": {"aws:SourceArn": "arn:aws:events:*:*:rule/*"}},
                           {"aws:SourceArn": ["arn:aws:events:us-east-1:1:rule/x"]})


def test_a_failed_allow_condition_is_not_a_deny() -> None:
    """An Allow whose condition fails does not apply (moto's evaluator turns it into a Deny)."""
    statements = [allow(**{"StringEquals": {"aws:ResourceTag/a": "1"}}), allow()]
    assert evaluate(statements, "ec2:TerminateInstances", ARN, {}).statements == (1,)


def test_what_it_cannot_judge_is_an_error() -> None:
    for condition in ({"NumericLessThan": {"k": "1"}}, {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01"}},
                      {"ForAllValues:Null": {"k": "true"}}):
        with pytest.raises(UnsupportedPolicy):
            condition_holds(condition, {"k": ["1"], "aws:CurrentTime": ["2021-01-01"]})
    with pytest.raises(UnsupportedPolicy):  # an unresolved CloudFormation reference
        evaluate([allow(resource="${Table.Arn}")], "ec2:TerminateInstances", ARN, {})
