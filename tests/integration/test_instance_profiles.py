"""`spec.role` and `spec.instanceProfile` against local IAM and EC2: the profile a role needs is made with
carpool's path, tags and role, launched with, kept while an instance uses it and collected after."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from carpool_env import (
    CLUSTER,
    MakeDeps,
    helper_client,
    manifests,
    nodeclass,
    nodepool,
    pending_pods,
    running_instances,
)

from carpool.adapters.aws.iam import IamInstanceProfiles
from carpool.app import disrupt, profiles
from carpool.app.provisioning import provision
from carpool.app.sources import TextConfigSource
from carpool.launch import profiles as naming
from carpool.launch.failures import Cause
from carpool.ports import RoleNotFound

POOL = nodepool(requirements={"node.kubernetes.io/instance-type": ["m5.large"],
                              "karpenter.sh/capacity-type": ["on-demand"]})
TRUST = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}'


@pytest.fixture
def iam(aws: Any) -> Any:
    """Local IAM with two team roles and none of carpool's profiles left by an earlier test."""
    client = helper_client(aws, "iam")
    for role in ("team-a", "team-b"):
        with contextlib.suppress(client.exceptions.EntityAlreadyExistsException):
            client.create_role(RoleName=role, AssumeRolePolicyDocument=TRUST)
    adapter = IamInstanceProfiles(client)
    for p in adapter.list_profiles(naming.profile_path(CLUSTER, "us-east-1")):
        adapter.delete(p.name)
    return client


def _profile(iam: Any, name: str) -> dict[str, Any]:
    return iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]  # type: ignore[no-any-return]


def _launch(deps: Any, prefix: str) -> Any:
    return provision.provision_pods(pending_pods(1, cpu="1500m", prefix=prefix, deps=deps), deps, reason="test")


def _template_profile(aws: Any) -> set[str]:
    ec2 = helper_client(aws, "ec2")
    names = set()
    for t in ec2.describe_launch_templates()["LaunchTemplates"]:
        v = ec2.describe_launch_template_versions(LaunchTemplateId=t["LaunchTemplateId"])["LaunchTemplateVersions"][0]
        names.add(v["LaunchTemplateData"]["IamInstanceProfile"]["Name"])
    return names


def test_a_role_gets_its_own_tagged_profile_and_launches_with_it(aws: Any, iam: Any, make_deps: MakeDeps) -> None:
    deps = make_deps(manifests(POOL, nodeclass(role="team-a", tags={"team": "a"})), start=datetime.now(UTC))
    assert _launch(deps, "a").launched
    name = naming.profile_name(CLUSTER, "us-east-1", "default", "team-a")
    assert _template_profile(aws) == {name}  # not the stack's "node-profile"
    found = _profile(iam, name)
    assert found["Path"] == f"/carpool/us-east-1/{CLUSTER}/"
    assert [r["RoleName"] for r in found["Roles"]] == ["team-a"]
    tags = {t["Key"]: t["Value"] for t in found["Tags"]}
    assert tags == {"team": "a", f"kubernetes.io/cluster/{CLUSTER}": "owned", "carpool.dev/cluster": CLUSTER,
                    "eks:eks-cluster-name": CLUSTER, "karpenter.k8s.aws/ec2nodeclass": "default",
                    "topology.kubernetes.io/region": "us-east-1"}


def test_the_stack_role_launches_with_the_stacks_profile(aws: Any, iam: Any, make_deps: MakeDeps) -> None:
    deps = make_deps(manifests(POOL, nodeclass(role="node-role")), start=datetime.now(UTC))
    assert _launch(deps, "s").launched
    assert _template_profile(aws) == {"node-profile"}
    assert IamInstanceProfiles(iam).list_profiles(naming.profile_path(CLUSTER, "us-east-1")) == []


def test_instance_profile_is_launched_with_as_given(aws: Any, iam: Any, make_deps: MakeDeps) -> None:
    doc = nodeclass(role="x")
    del doc["spec"]["role"]
    doc["spec"]["instanceProfile"] = "team-a-own-profile"
    deps = make_deps(manifests(POOL, doc), start=datetime.now(UTC))
    assert _launch(deps, "i").launched
    assert _template_profile(aws) == {"team-a-own-profile"}
    assert IamInstanceProfiles(iam).list_profiles(naming.profile_path(CLUSTER, "us-east-1")) == []  # nothing made


def test_a_missing_role_fails_the_claim_with_a_line_naming_spec_role(aws: Any, iam: Any, make_deps: MakeDeps) -> None:
    """Local IAM refuses AddRoleToInstanceProfile for a role that does not exist (NoSuchEntity, as IAM does):
    the pool's node class is not ready, named by cause, and its pods say why rather than being retried."""
    deps = make_deps(manifests(POOL, nodeclass(role="no-such-role")), start=datetime.now(UTC))
    outcome = _launch(deps, "m")
    assert not outcome.launched and not outcome.failed
    (refused,) = outcome.not_ready.values()
    assert refused.cause is Cause.ROLE and refused.nodeclass == "default"
    assert "spec.role" in refused.message and "no-such-role" in refused.message
    assert all(set(r) == {refused.nodepool} and "RoleNotFound" in r[refused.nodepool]
               for r in outcome.unschedulable.values()) and outcome.unschedulable
    with pytest.raises(RoleNotFound):
        IamInstanceProfiles(iam).ensure(naming.request_for(CLUSTER, "us-east-1", "other", "no-such-role"))


def test_a_changed_role_gets_the_profile_its_role_names(iam: Any) -> None:
    adapter = IamInstanceProfiles(iam)
    request = naming.request_for(CLUSTER, "us-east-1", "nc", "team-a")
    adapter.ensure(request)
    adapter.ensure(request)  # idempotent
    iam.remove_role_from_instance_profile(InstanceProfileName=request.name, RoleName="team-a")
    iam.add_role_to_instance_profile(InstanceProfileName=request.name, RoleName="team-b")
    adapter.ensure(request)  # a profile holds one role: the wrong one is replaced
    assert [r["RoleName"] for r in _profile(iam, request.name)["Roles"]] == ["team-a"]


def test_profiles_no_nodeclass_names_are_collected_once_no_instance_uses_them(
    aws: Any, iam: Any, make_deps: MakeDeps
) -> None:
    start = datetime.now(UTC)
    deps = make_deps(manifests(POOL, nodeclass(role="team-a")), start=start)
    assert _launch(deps, "c").launched
    old = naming.profile_name(CLUSTER, "us-east-1", "default", "team-a")
    new = naming.profile_name(CLUSTER, "us-east-1", "default", "team-b")
    ec2 = helper_client(aws, "ec2")
    instance_ids = [i["InstanceId"] for i in running_instances(aws)]
    # moto's CreateFleet records no profile on the instance; EC2 does: give it the one it launched with
    association = ec2.associate_iam_instance_profile(IamInstanceProfile={"Name": old}, InstanceId=instance_ids[0])
    assert association["IamInstanceProfileAssociation"]["State"] in ("associating", "associated")

    # the config now names another role for the node class
    later = start + naming.GRACE + timedelta(minutes=1)
    nodeclasses = TextConfigSource(lambda: manifests(POOL, nodeclass(role="team-b"))).load().nodeclasses
    profiles.instance_profile(nodeclasses[0], deps)
    live = lambda: running_instances(aws)  # noqa: E731
    assert profiles.collect(deps, nodeclasses, live, later) == []  # in use by its instance
    assert {p.name for p in IamInstanceProfiles(iam).list_profiles(naming.profile_path(CLUSTER, "us-east-1"))} == {old, new}

    ec2.terminate_instances(InstanceIds=instance_ids)
    assert profiles.collect(deps, nodeclasses, live, later + timedelta(minutes=1)) == []  # not due yet
    unused = later + profiles.COLLECT_EVERY
    assert profiles.collect(deps, nodeclasses, live, unused) == []  # unused from now on: a grace period
    assert profiles.collect(deps, nodeclasses, live, unused + profiles.COLLECT_EVERY) == [old]
    assert {p.name for p in IamInstanceProfiles(iam).list_profiles(naming.profile_path(CLUSTER, "us-east-1"))} == {new}


def test_the_disruption_run_collects_profiles(aws: Any, iam: Any, make_deps: MakeDeps) -> None:
    start = datetime.now(UTC)
    stale = naming.request_for(CLUSTER, "us-east-1", "gone", "team-a")
    IamInstanceProfiles(iam).ensure(stale)
    deps = make_deps(manifests(POOL, nodeclass(role="team-b")), start=start + naming.GRACE + timedelta(minutes=1))
    assert disrupt.run(deps).instance_profiles_deleted == []  # first seen unnamed
    deps.clock.now += profiles.COLLECT_EVERY  # type: ignore[attr-defined]
    assert disrupt.run(deps).instance_profiles_deleted == [stale.name]
    assert IamInstanceProfiles(iam).list_profiles(naming.profile_path(CLUSTER, "us-east-1")) == []
