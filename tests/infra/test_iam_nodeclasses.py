"""IAM for what the cluster's EC2NodeClasses may name (``infra/nodeclasses.py``), decided by context keys
as Karpenter's controller policy decides it: PassRole on exactly the stack's node role and the roles of
``-c nodeClassRoles`` (names or patterns) and ``-c instanceProfileRoleArns``, instance-profile actions only
on carpool's own profiles and only when other roles are named, KMS only for EBS through EC2 on the keys
named; and a one-shot ``-c configFile`` refused at synth, by field, when it asks for what is not granted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Environment
from cdk_support import ACCOUNT, NODE_ROLE_ARN, REGION, Synth, actions_of, as_list, flatten, statements
from iam_eval import evaluate
from infra.config_file import ConfigError

KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
OTHER_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/ffffffff-12ab-34cd-56ef-1234567890ab"
PROFILE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/team-b-nodes"
CLUSTER = "teams"
PROFILES = f"arn:aws:iam::{ACCOUNT}:instance-profile/carpool/{REGION}/{CLUSTER}/"
BINDINGS = {"${AWS::Partition}": "aws", "${AWS::Region}": REGION, "${AWS::AccountId}": ACCOUNT}


def config(*nodeclasses: str) -> str:
    pool = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: team}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
"""
    return "---\n".join([pool, *nodeclasses])


def nodeclass(name: str, identity: str, extra: str = "") -> str:
    return f"""\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  {identity}
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: teams}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: teams}}}}]
{extra}"""


ENCRYPTED = f"""\
  blockDeviceMappings:
    - deviceName: /dev/xvda
      ebs: {{volumeSize: 100Gi, encrypted: true, kmsKeyID: {KEY.rsplit('/', 1)[-1]}}}
"""
TEAMS = config(
    nodeclass("team", "role: teams/team-a-nodes", ENCRYPTED),
    nodeclass("stack", "role: KarpenterNodeRole-prod"),
    nodeclass("own", "instanceProfile: team-b-profile"),
)


#: the roles the teams' node classes name besides the stack's: team-a's by its path, anything of team-c's
NODE_CLASS_ROLES = "teams/team-a-nodes,team-c-*"
GRANTS = {"nodeClassRoles": NODE_CLASS_ROLES, "ebsKmsKeyArns": KEY, "instanceProfileRoleArns": PROFILE_ROLE}


def _context(tmp: Path, text: str, **extra: str) -> dict[str, str]:
    """A deployment with a one-shot ``configFile`` (checked, not stored)."""
    path = tmp / "nodepools.yaml"
    path.write_text(text)
    return {"clusterName": CLUSTER, "configFile": str(path), "nodeRoleArn": NODE_ROLE_ARN,
            "nodeClassRoles": "team-a-nodes,teams/*", **extra}


@pytest.fixture(scope="module")
def teams(synth: Callable[..., Synth]) -> Synth:
    """No file at all: what the cluster's node classes may name is the deployment's to say."""
    return synth({"clusterName": CLUSTER, "nodeRoleArn": NODE_ROLE_ARN, **GRANTS},
                 env=Environment(account=ACCOUNT, region=REGION))


def _bind(value: Any) -> Any:
    if isinstance(value, str):
        for placeholder, real in BINDINGS.items():
            value = value.replace(placeholder, real)
        return value
    if isinstance(value, list):
        return [_bind(v) for v in value]
    if isinstance(value, dict):
        return {k: _bind(v) for k, v in value.items()}
    return value


def policy(synth: Synth, function: str) -> list[dict[str, Any]]:
    role = synth.stack.functions.roles[function]
    return [_bind(s) for s in statements(synth.template.to_json(), synth.logical_id(role))]


def allowed(found: list[dict[str, Any]], action: str, resource: str, **context: str | list[str]) -> bool:
    ctx = {"aws:RequestedRegion": [REGION], **{k: v if isinstance(v, list) else [v] for k, v in context.items()}}
    return evaluate(found, action, resource, ctx).allowed


def _tags(prefix: str, **override: str) -> dict[str, str]:
    tags = {f"kubernetes.io/cluster/{CLUSTER}": "owned", "carpool.dev/cluster": CLUSTER,
            "eks:eks-cluster-name": CLUSTER, "karpenter.k8s.aws/ec2nodeclass": "team",
            "topology.kubernetes.io/region": REGION, **override}
    return {f"{prefix}/{k}": v for k, v in tags.items() if v}


TO_EC2 = {"iam:PassedToService": "ec2.amazonaws.com"}


# -- PassRole ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("function", ["provisioner", "interruption", "disruption"])
def test_pass_role_covers_exactly_the_roles_the_deployment_names(teams: Synth, function: str) -> None:
    found = policy(teams, function)
    for role in (NODE_ROLE_ARN, f"arn:aws:iam::{ACCOUNT}:role/teams/team-a-nodes", PROFILE_ROLE,
                 f"arn:aws:iam::{ACCOUNT}:role/team-c-gpu", f"arn:aws:iam::{ACCOUNT}:role/team-c-"):
        assert allowed(found, "iam:PassRole", role, **TO_EC2), role
        assert not allowed(found, "iam:PassRole", role, **{"iam:PassedToService": "lambda.amazonaws.com"})
    for role in ("admin", "team-a-nodes", "teams/team-c-nodes"):  # team-a's path is part of its ARN
        assert not allowed(found, "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/{role}", **TO_EC2), role
    assert not allowed(found, "iam:PassRole", "arn:aws:iam::999999999999:role/team-c-gpu", **TO_EC2)


def test_without_other_roles_only_the_stack_node_role_is_passed(default: Synth, full: Synth) -> None:
    """Karpenter's `AllowPassingInstanceRole`: the one node role, whatever the cluster's node classes say."""
    for synth in (default, full):
        (statement,) = [s for s in policy(synth, "provisioner") if s.get("Sid") == "PassNodeRoles"]
        role = synth.stack.cluster.node_role
        assert as_list(statement["Resource"]) == [flatten(synth.stack.resolve(role.role_arn))]


def test_functions_that_launch_nothing_pass_no_role(teams: Synth) -> None:
    for function in ("watcher", "registrar"):
        assert not any(a.startswith(("iam:", "kms:")) for s in policy(teams, function) for a in actions_of(s))


# -- instance profiles -----------------------------------------------------------------------------------------
def test_profiles_are_created_only_under_carpools_path_with_carpools_tags(teams: Synth) -> None:
    found = policy(teams, "provisioner")
    name = PROFILES + "teams_0123456789abcdef"
    for action in ("iam:CreateInstanceProfile", "iam:TagInstanceProfile"):
        assert allowed(found, action, name, **_tags("aws:RequestTag"))
        assert not allowed(found, action, name, **_tags("aws:RequestTag", **{"carpool.dev/cluster": "other"}))
        assert not allowed(found, action, name, **_tags("aws:RequestTag", **{f"kubernetes.io/cluster/{CLUSTER}": ""}))
        assert not allowed(found, action, name, **_tags("aws:RequestTag", **{"karpenter.k8s.aws/ec2nodeclass": ""}))
        assert not allowed(found, action, f"arn:aws:iam::{ACCOUNT}:instance-profile/karpenter/x", **_tags("aws:RequestTag"))
    assert allowed(found, "iam:GetInstanceProfile", name)
    # a profile not made yet is named without its path
    assert allowed(found, "iam:GetInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/teams_0123456789abcdef")
    assert not allowed(found, "iam:GetInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/other")
    for action in ("iam:CreateInstanceProfile", "iam:AddRoleToInstanceProfile"):  # but nothing else is
        assert not allowed(found, action, f"arn:aws:iam::{ACCOUNT}:instance-profile/teams_0123456789abcdef",
                           **_tags("aws:RequestTag"), **_tags("aws:ResourceTag"))


def test_the_role_of_a_profile_changes_only_on_carpools_tagged_profiles(teams: Synth) -> None:
    found = policy(teams, "provisioner")
    name = PROFILES + "teams_0123456789abcdef"
    for action in ("iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"):
        assert allowed(found, action, name, **_tags("aws:ResourceTag"))
        assert not allowed(found, action, name, **_tags("aws:ResourceTag", **{"carpool.dev/cluster": "other"}))
        assert not allowed(found, action, name)


def test_only_the_disruption_function_lists_and_deletes_profiles(teams: Synth) -> None:
    name = PROFILES + "teams_0123456789abcdef"
    gc = policy(teams, "disruption")
    assert allowed(gc, "iam:ListInstanceProfiles", PROFILES)
    assert allowed(gc, "iam:DeleteInstanceProfile", name, **_tags("aws:ResourceTag"))
    assert not allowed(gc, "iam:DeleteInstanceProfile", name, **_tags("aws:ResourceTag", **{"carpool.dev/cluster": "x"}))
    assert not allowed(gc, "iam:DeleteInstanceProfile", f"arn:aws:iam::{ACCOUNT}:instance-profile/team-b-profile",
                       **_tags("aws:ResourceTag"))
    for function in ("provisioner", "interruption"):
        found = policy(teams, function)
        assert not allowed(found, "iam:DeleteInstanceProfile", name, **_tags("aws:ResourceTag"))
        assert not allowed(found, "iam:ListInstanceProfiles", PROFILES)


def test_iam_actions_granted_are_exactly_what_profiles_need(teams: Synth) -> None:
    launch = {"iam:PassRole", "iam:GetInstanceProfile", "iam:CreateInstanceProfile", "iam:TagInstanceProfile",
              "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"}
    for function, expected in (("provisioner", launch), ("interruption", launch),
                               ("disruption", launch | {"iam:ListInstanceProfiles", "iam:DeleteInstanceProfile"})):
        got = {a for s in policy(teams, function) for a in actions_of(s) if a.startswith("iam:")}
        assert got == expected, function


def test_a_deployment_naming_no_other_role_grants_no_profile_action(full: Synth, default: Synth) -> None:
    for synth in (full, default):
        for function in ("provisioner", "disruption"):
            got = {a for s in policy(synth, function) for a in actions_of(s) if a.startswith(("iam:", "kms:"))}
            assert got == {"iam:PassRole"}, (function, got)


# -- EBS with a customer-managed key -------------------------------------------------------------------------
@pytest.mark.parametrize("function", ["provisioner", "interruption", "disruption"])
def test_ec2_may_use_the_granted_key_for_the_launch_and_nothing_else(teams: Synth, function: str) -> None:
    found = policy(teams, function)
    assert allowed(found, "kms:CreateGrant", KEY, **{"kms:GrantIsForAWSResource": "true"})
    assert not allowed(found, "kms:CreateGrant", KEY, **{"kms:GrantIsForAWSResource": "false"})
    assert not allowed(found, "kms:CreateGrant", KEY)
    assert not allowed(found, "kms:CreateGrant", OTHER_KEY, **{"kms:GrantIsForAWSResource": "true"})
    via_ec2 = {"kms:ViaService": f"ec2.{REGION}.amazonaws.com"}
    for action in ("kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
                   "kms:ReEncryptTo"):
        assert allowed(found, action, KEY, **via_ec2), action
        assert not allowed(found, action, KEY), action
        assert not allowed(found, action, OTHER_KEY, **via_ec2), action
    assert not allowed(found, "kms:Encrypt", KEY, **via_ec2)


# -- a one-shot configFile refused at synth, by field --------------------------------------------------------
def test_a_role_the_deployment_may_not_pass_is_refused_naming_the_field(
    synth: Callable[..., Synth], tmp_path: Path
) -> None:
    text = config(nodeclass("team", "role: team-b-nodes"))
    with pytest.raises(ConfigError, match=r"EC2NodeClass team: spec\.role 'team-b-nodes'") as info:
        synth(_context(tmp_path, text), nag=False)
    assert "-c nodeClassRoles=team-b-nodes" in str(info.value) and "\n" not in str(info.value)
    synth(_context(tmp_path, text, nodeClassRoles="team-*"), nag=False)  # a pattern covers it


def test_a_file_within_the_grants_passes_the_check_and_changes_no_policy(
    synth: Callable[..., Synth], teams: Synth, tmp_path: Path
) -> None:
    checked = synth({**_context(tmp_path, TEAMS), **GRANTS}, env=Environment(account=ACCOUNT, region=REGION), nag=False)
    for function in ("provisioner", "disruption"):
        assert policy(checked, function) == policy(teams, function)


def test_the_stack_node_role_is_passable_whether_named_or_created(synth: Callable[..., Synth], tmp_path: Path) -> None:
    """`-c nodeRoleArn` names it; a role the stack creates is named after the stack (`<stack>-...`)."""
    synth(_context(tmp_path, config(nodeclass("team", "role: KarpenterNodeRole-prod"))), nag=False)
    created = config(nodeclass("team", f"role: carpool-{CLUSTER}-ClusterNodeRole1A2B3C-XYZ"))
    context = {k: v for k, v in _context(tmp_path, created).items() if k != "nodeRoleArn"}
    synth(context, nag=False)

def test_a_key_the_deployment_was_not_granted_is_refused_naming_the_field(
    synth: Callable[..., Synth], tmp_path: Path
) -> None:
    text = config(nodeclass("team", "role: team-a-nodes", ENCRYPTED))
    with pytest.raises(ConfigError, match=r"EC2NodeClass team: spec\.blockDeviceMappings\[0\]\.ebs\.kmsKeyID") as info:
        synth(_context(tmp_path, text, ebsKmsKeyArns=OTHER_KEY), nag=False)
    assert "\n" not in str(info.value) and "ebsKmsKeyArns" in str(info.value)
    with pytest.raises(ConfigError, match=r"kmsKeyID"):
        synth(_context(tmp_path, text), nag=False)


def test_an_instance_profile_without_its_role_named_is_refused_naming_the_field(
    synth: Callable[..., Synth], tmp_path: Path
) -> None:
    text = config(nodeclass("team", "instanceProfile: team-b-profile"))
    with pytest.raises(ConfigError, match=r"EC2NodeClass team: spec\.instanceProfile 'team-b-profile'") as info:
        synth(_context(tmp_path, text), nag=False)
    assert "instanceProfileRoleArns" in str(info.value) and "\n" not in str(info.value)


# -- cdk-nag ----------------------------------------------------------------------------------------------------
def test_the_instance_profile_wildcard_is_reviewed_and_nothing_else_is_reported(
    teams: Synth, synth: Callable[..., Synth], tmp_path: Path
) -> None:
    from test_nag import findings

    agnostic = synth({"clusterName": CLUSTER, "nodeRoleArn": NODE_ROLE_ARN, **GRANTS})
    for variant in (teams, agnostic):  # literal and token region/account
        assert findings(variant) == []


def test_synth_names_the_refused_capacity_reservation_fields(synth: Callable[..., Synth], tmp_path: Path) -> None:
    reservations = "  capacityReservationSelectorTerms: [{id: cr-0123abcd}]\n"
    text = config(nodeclass("team", "role: team-a-nodes", reservations)).replace("values: [on-demand]",
                                                                                 "values: [reserved]")
    with pytest.raises(ConfigError) as info:
        synth(_context(tmp_path, text), nag=False)
    assert "spec.capacityReservationSelectorTerms" in str(info.value)
    assert "spec.template.spec.requirements[0]" in str(info.value) and 'capacity type "reserved"' in str(info.value)


def test_the_kms_authorizations_of_an_encrypted_launch_are_allowed_for_granted_keys_only(teams: Synth) -> None:
    """The simulation's model of what EC2 authorizes for a CMK-encrypted launch (`carpool.sim.localaws.requests`)
    against the synthesized policy: every check for the granted key passes, none for another key."""
    from carpool.sim.localaws.requests import AwsCall, authorizations

    def launch(key: str) -> list[Any]:
        template = {"arn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/lt-1", "tags": {}, "kmsKeys": [key]}
        call = AwsCall(function="provisioner", service="ec2", operation="CreateFleet", region=REGION,
                       account=ACCOUNT, params={}, facts={"launchTemplates": {"t": template}, "subnets": []})
        return [c for c in authorizations(call) if c.action.startswith("kms:")]

    found = policy(teams, "provisioner")
    granted = launch(KEY)
    assert {c.action for c in granted} == {"kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey",
                                           "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
                                           "kms:ReEncryptTo"}
    assert all(evaluate(found, c.action, c.resource, c.context).allowed for c in granted)
    assert not any(evaluate(found, c.action, c.resource, c.context).allowed for c in launch(OTHER_KEY))


@pytest.mark.parametrize(("alias", "extra", "field"), [
    ("bottlerocket@latest", "  kubelet: {podsPerCore: 10}\n", "spec.kubelet.podsPerCore"),
    ("windows2022@latest", "  instanceStorePolicy: RAID0\n", "spec.instanceStorePolicy"),
    ("al2023@latest", "  amiFamily: Custom\n  userData: 'x'\n  kubelet: {clusterDNS: [10.0.0.10]}\n",
     "spec.kubelet.clusterDNS"),
], ids=["bottlerocket-podsPerCore", "windows-raid0", "custom-clusterDNS"])
def test_synth_names_a_field_the_ami_family_cannot_carry(synth: Callable[..., Synth], tmp_path: Path, alias: str,
                                                         extra: str, field: str) -> None:
    """What a family's user data cannot carry is refused at synth as at `carpool validate`, by field."""
    text = config(nodeclass("team", "role: team-a-nodes", extra).replace("al2023@latest", alias))
    with pytest.raises(ConfigError) as info:
        synth(_context(tmp_path, text), nag=False)
    assert field in str(info.value)
