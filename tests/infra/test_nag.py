"""cdk-nag: AwsSolutions and ServerlessChecks report nothing unsuppressed, in every deployment variant.

A new resource or permission that breaks a rule fails here; so does a suppression without a reason.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations, Match
from cdk_support import Synth
from infra.stack import CarpoolStack

PACKS = (Match.string_like_regexp("AwsSolutions-.*"), Match.string_like_regexp("Serverless-.*"))


def findings(synth: Synth) -> list[str]:
    annotations = Annotations.from_stack(synth.stack)
    found = []
    for pattern in PACKS:
        for message in annotations.find_error("*", pattern) + annotations.find_warning("*", pattern):
            found.append(f"{message.id}: {message.entry.data}")
    return found


@pytest.mark.parametrize("variant", ["default", "full", "rbac"])
def test_no_unsuppressed_findings(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    assert findings(synth) == []


@pytest.mark.parametrize("variant", ["default", "full"])
def test_both_packs_actually_ran(variant: str, request: pytest.FixtureRequest) -> None:
    """Suppressed findings are still recorded in the resource metadata: prove the packs looked."""
    synth: Synth = request.getfixturevalue(variant)
    rules = set()
    for resource in synth.template.to_json()["Resources"].values():
        for suppression in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            rules.add(suppression["id"])
            assert len(suppression["reason"]) >= 40, suppression  # a reason, not a shrug
    assert any(r.startswith("AwsSolutions-") for r in rules)
    assert any(r.startswith("Serverless-") for r in rules)


def test_iam5_suppressions_name_their_wildcards(default: Synth) -> None:
    for resource in default.template.to_json()["Resources"].values():
        for suppression in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            if suppression["id"] in {"AwsSolutions-IAM5", "AwsSolutions-IAM4"}:
                assert suppression.get("applies_to"), suppression


def test_an_unreviewed_wildcard_or_resource_is_reported(synth: Callable[..., Synth]) -> None:
    """The suppressions are narrow: a wildcard or a resource nobody reviewed still fails the check."""

    def break_things(stack: CarpoolStack) -> None:
        stack.functions.roles["watcher"].add_to_policy(
            iam.PolicyStatement(actions=["s3:*"], resources=["arn:aws:s3:::some-bucket/*"])
        )
        sqs.CfnQueue(stack, "PlainQueue")  # no encryption, no TLS policy, no DLQ

    found = findings(synth({"clusterName": "canary"}, customize=break_things))
    assert any("WatcherRole" in f and "AwsSolutions-IAM5[Action::s3:*]" in f for f in found), found
    assert any("WatcherRole" in f and "AwsSolutions-IAM5[Resource::arn:aws:s3:::some-bucket/*]" in f for f in found)
    assert any("PlainQueue" in f and "AwsSolutions-SQS3" in f for f in found), found
    assert any("PlainQueue" in f and "Serverless-SQSRedrivePolicy" in f for f in found), found
