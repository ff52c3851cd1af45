"""The KMS authorizations the simulation's request model derives for a launch with encrypted volumes."""

from __future__ import annotations

from carpool.sim.localaws.requests import AwsCall, authorizations, kms_key_arn

KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _call(keys: list[str]) -> AwsCall:
    template = {"arn": "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-1", "tags": {}, "kmsKeys": keys}
    return AwsCall(function="provisioner", service="ec2", operation="CreateFleet", region="us-east-1",
                   account="123456789012", params={}, facts={"launchTemplates": {"t": template}, "subnets": []})


def test_a_key_id_is_the_callers_key_arn() -> None:
    assert kms_key_arn("1234abcd-12ab-34cd-56ef-1234567890ab", "us-east-1", "123456789012") == KEY
    assert kms_key_arn(KEY, "eu-west-1", "999999999999") == KEY


def test_an_encrypted_launch_asks_a_grant_for_ec2_and_key_use_through_ec2() -> None:
    checks = {c.action: c for c in authorizations(_call([KEY])) if c.action.startswith("kms:")}
    assert checks["kms:CreateGrant"].resource == KEY
    assert checks["kms:CreateGrant"].context["kms:GrantIsForAWSResource"] == ["true"]
    for action in ("kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
                   "kms:ReEncryptTo"):
        assert checks[action].context["kms:ViaService"] == ["ec2.us-east-1.amazonaws.com"], action
    assert not [c for c in authorizations(_call([])) if c.action.startswith("kms:")]
