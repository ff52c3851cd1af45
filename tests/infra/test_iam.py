"""IAM: ownership-tag conditions on every EC2 write, PassRole scoping, no mutating action on "*",
per-function capabilities, the node role and the EKS access entries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cdk_support import ACCOUNT, NODE_ROLE_ARN, REGION, Synth, actions_of, as_list, flatten, statements

#: Non-mutating verbs; anything else is treated as a write.
READ_ONLY = re.compile(r"^[a-z0-9-]+:(Describe|Get|List|BatchGet|Query|Scan|ConditionCheck)\w*\*?$")
#: Writes that AWS cannot scope to a resource at all.
UNSCOPABLE_WRITES = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
OWNED_REQUEST_TAGS = {"aws:RequestTag/kubernetes.io/cluster/demo": "owned", "aws:RequestTag/carpool.dev/cluster": "demo"}
OWNED_RESOURCE_TAGS = {
    "aws:ResourceTag/kubernetes.io/cluster/demo": "owned",
    "aws:ResourceTag/carpool.dev/cluster": "demo",
}


def role_statements(synth: Synth, name: str) -> list[dict[str, Any]]:
    role = synth.stack.functions.roles[name]
    return statements(synth.template.to_json(), synth.logical_id(role))


def with_action(found: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in found if action in actions_of(s)]


def all_actions(found: list[dict[str, Any]]) -> set[str]:
    return {a for s in found for a in actions_of(s)}


@pytest.mark.parametrize("variant", ["default", "full", "rbac"])
def test_no_mutating_action_on_star(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    checked = 0
    for statement in statements(synth.template.to_json()):
        resources = as_list(statement["Resource"])
        if "*" not in resources:
            continue
        for action in actions_of(statement):
            checked += 1
            assert READ_ONLY.match(action) or action in UNSCOPABLE_WRITES or action == "pricing:GetProducts", (
                f"{action} is allowed on Resource '*'"
            )
    assert checked, "expected the read-only Describe statement to be checked"


def test_launch_statements_require_ownership_request_tags(default: Synth) -> None:
    found = role_statements(default, "provisioner")
    for action in ("ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"):
        for statement in with_action(found, action):
            resources = as_list(statement["Resource"])
            creates = [r for r in resources if re.search(r":(instance|volume|network-interface|fleet|spot-instances-request)/\*$", r)]
            if creates:
                # Everything a launch creates must be requested with both ownership tags.
                assert statement["Condition"] == {"StringEquals": OWNED_REQUEST_TAGS}, statement
            elif any(r.endswith(":launch-template/*") for r in resources) and action != "ec2:CreateLaunchTemplate":
                # Launching from a template: only carpool's own templates.
                assert statement["Condition"] == {"StringEquals": {"aws:ResourceTag/carpool.dev/cluster": "demo"}}
            else:
                # Inputs a launch reads but never changes.
                assert "Condition" not in statement
                assert all(re.search(r":(image|snapshot|subnet|security-group|capacity-reservation)/\*$", r) for r in resources), resources
    create_lt = with_action(found, "ec2:CreateLaunchTemplate")
    assert len(create_lt) == 1 and create_lt[0]["Condition"] == {"StringEquals": OWNED_REQUEST_TAGS}


def test_instance_creating_statement_covers_every_launched_resource(default: Synth) -> None:
    (statement,) = [s for s in role_statements(default, "provisioner") if s.get("Sid") == "LaunchOnlyTaggedResources"]
    suffixes = sorted(r.rsplit(":", 1)[1] for r in as_list(statement["Resource"]))
    assert suffixes == sorted(
        f"{t}/*" for t in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    )
    assert all(r.startswith("arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:") for r in statement["Resource"])


def test_create_tags_only_during_create_calls_or_for_the_claim_name(default: Synth) -> None:
    """Launchers write tags only with their create calls; the claim name of an instance is written once its
    node registers (as Karpenter's tagging controller does), by the registrar: only on the cluster's own
    instances, only that key."""
    for name in sorted(LAUNCHERS):
        (creating,) = with_action(role_statements(default, name), "ec2:CreateTags")
        assert creating.get("Sid") == "TagOnlyOnCreate", (name, creating)
        assert creating["Condition"] == {
            "StringEquals": {
                **OWNED_REQUEST_TAGS,
                "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
            }
        }
    (naming,) = with_action(role_statements(default, "registrar"), "ec2:CreateTags")
    assert naming.get("Sid") == "TagOwnInstancesWithTheirClaim"
    assert naming["Resource"] == "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*"
    assert naming["Condition"] == {
        "StringEquals": OWNED_RESOURCE_TAGS,
        "ForAllValues:StringEquals": {"aws:TagKeys": ["karpenter.sh/nodeclaim"]},
    }


@pytest.mark.parametrize("name", ["provisioner", "interruption", "disruption"])
def test_terminate_requires_ownership_resource_tags(default: Synth, name: str) -> None:
    (statement,) = with_action(role_statements(default, name), "ec2:TerminateInstances")
    assert statement["Resource"] == "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*"
    assert statement["Condition"] == {"StringEquals": OWNED_RESOURCE_TAGS}


@pytest.mark.parametrize("name", ["disruption"])
def test_delete_launch_template_requires_ownership_resource_tags(default: Synth, name: str) -> None:
    (statement,) = with_action(role_statements(default, name), "ec2:DeleteLaunchTemplate")
    assert statement["Resource"] == "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:launch-template/*"
    assert statement["Condition"] == {"StringEquals": OWNED_RESOURCE_TAGS}


def test_tags_are_written_only_by_the_create_calls(default: Synth) -> None:
    """Outside the create calls, no function may write any tag but the claim name on its own instances."""
    for name in CAPABILITIES:
        for statement in with_action(role_statements(default, name), "ec2:CreateTags"):
            condition = statement["Condition"]
            if "ec2:CreateAction" in condition["StringEquals"]:
                continue
            assert condition["ForAllValues:StringEquals"] == {"aws:TagKeys": ["karpenter.sh/nodeclaim"]}, (name, statement)
            assert condition["StringEquals"] == OWNED_RESOURCE_TAGS, (name, statement)


def test_pass_role_only_for_the_node_role_and_only_to_ec2(default: Synth, full: Synth) -> None:
    node_role = default.logical_id(default.stack.cluster.node_role)
    for synth, expected in ((default, "${" + node_role + ".Arn}"), (full, NODE_ROLE_ARN)):
        passing = {name for name in CAPABILITIES if with_action(role_statements(synth, name), "iam:PassRole")}
        assert passing == LAUNCHERS, "only the functions that launch pass a role"
        for statement in [s for s in statements(synth.template.to_json()) if "iam:PassRole" in actions_of(s)]:
            assert statement["Resource"] == expected
            assert statement["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
            assert actions_of(statement) == ["iam:PassRole"]


LAUNCH = {"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags", "iam:PassRole"}
#: Interruption and disruption launch replacements themselves (`carpool.app.provisioning.provision.provision_pods`).
LAUNCHERS = {"provisioner", "interruption", "disruption"}
CATALOG = {"pricing:GetProducts", "ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings",
           "ec2:DescribeSpotPriceHistory"}
#: Only the disruption function builds the catalog from EC2 (its scheduled refresh); the others read the
#: stored one from the state table.
CAPABILITIES = {
    "watcher": set(),
    "provisioner": LAUNCH | {"ec2:TerminateInstances", "ec2:DescribeImages", "ec2:DescribeSubnets",
                             "ec2:DescribeSecurityGroups"},
    "registrar": {"ec2:DescribeImages", "ec2:DescribeInstances", "ec2:CreateTags"},
    "interruption": LAUNCH | {"ec2:TerminateInstances", "ec2:DescribeImages", "ec2:DescribeSubnets",
                              "ec2:DescribeSecurityGroups", "ec2:DescribeInstances"},
    "disruption": LAUNCH | CATALOG | {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "ec2:DescribeImages",
                                      "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
                                      "ec2:DescribeLaunchTemplates"},
}  # fmt: skip
EC2_SIDE = {a for actions in CAPABILITIES.values() for a in actions}


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_each_function_gets_only_its_ec2_capabilities(default: Synth, name: str) -> None:
    actions = all_actions(role_statements(default, name))
    assert actions & EC2_SIDE == CAPABILITIES[name]
    assert "eks:DescribeCluster" in actions
    assert ("events:PutEvents" in actions) == (name == "watcher")
    sids = {s.get("Sid") for s in role_statements(default, name)}
    assert ("ReadAmiParameters" in sids) == (name != "watcher")


RELEASE = {"dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"}
PROVISION = {"dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem",
             "dynamodb:BatchWriteItem"}
#: State-table actions per function: the watcher only reads.
STATE = {
    "watcher": set(),  # pods awaiting their node come from the claims on the status index
    "provisioner": PROVISION | RELEASE,
    "registrar": {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"} | RELEASE,
    "interruption": PROVISION | RELEASE,
    "disruption": PROVISION | RELEASE,
}  # fmt: skip


@pytest.mark.parametrize("variant", ["default", "full", "rbac"])
def test_describe_actions_are_named_not_wildcarded(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    for statement in statements(synth.template.to_json()):
        for action in actions_of(statement):
            assert "*" not in action, f"{action}: grant the actions used, not a wildcard"


def test_state_table_access_per_role(default: Synth) -> None:
    table = "${" + default.logical_id(default.stack.tables.state) + ".Arn}"
    idempotency = default.logical_id(default.stack.tables.idempotency)
    for name in CAPABILITIES:
        found = role_statements(default, name)
        on_table = {a for s in found if table in as_list(s["Resource"]) for a in actions_of(s) if a.startswith("dynamodb:")}
        assert on_table == STATE[name], name
        (index,) = [s for s in found if s.get("Sid") == "QueryClaimsByStatus"]
        assert index["Resource"] == f"{table}/index/gsi1" and actions_of(index) == ["dynamodb:Query"]
        assert idempotency not in str(found), f"{name}: no code uses the idempotency table"


def test_ami_parameters_are_the_public_paths_only(default: Synth) -> None:
    (statement,) = [s for s in role_statements(default, "provisioner") if s.get("Sid") == "ReadAmiParameters"]
    assert sorted(statement["Resource"]) == sorted(
        f"arn:${{AWS::Partition}}:ssm:${{AWS::Region}}::parameter/aws/service/{p}/*"
        for p in ("eks", "bottlerocket", "ami-windows-latest")
    )


def test_no_function_reads_a_config_from_ssm(default: Synth, full: Synth) -> None:
    """The config is the cluster's NodePools and EC2NodeClasses (read through the API, `infra/rbac.yaml`):
    the only SSM reads are AWS's public AMI parameters."""
    for synth in (default, full):
        for name in CAPABILITIES:
            for statement in role_statements(synth, name):
                if any(a.startswith("ssm:") for a in actions_of(statement)):
                    assert statement["Sid"] == "ReadAmiParameters", (name, statement)
                    assert all("::parameter/aws/service/" in str(r) for r in statement["Resource"]), statement


def test_describe_cluster_is_scoped_to_the_cluster(full: Synth) -> None:
    for name in CAPABILITIES:
        (statement,) = with_action(role_statements(full, name), "eks:DescribeCluster")
        # a known Region makes the partition a literal (cdk.json: @aws-cdk/core:enablePartitionLiterals)
        assert statement["Resource"] == f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/prod"


def test_put_events_only_on_the_carpool_bus(default: Synth) -> None:
    bus = default.logical_id(default.stack.routing.bus)
    for statement in statements(default.template.to_json()):
        if "events:PutEvents" in actions_of(statement):
            assert statement["Resource"] == "${" + bus + ".Arn}"


def test_state_tables_granted_by_arn(default: Synth) -> None:
    table = default.logical_id(default.stack.tables.state)
    found = with_action(role_statements(default, "provisioner"), "dynamodb:PutItem")
    resources = {r for s in found for r in as_list(s["Resource"])}
    assert "${" + table + ".Arn}" in resources
    assert "*" not in resources


def test_node_role_and_instance_profile(default: Synth, full: Synth) -> None:
    role = default.resources("AWS::IAM::Role")[default.logical_id(default.stack.cluster.node_role)]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    policies = sorted(flatten(p).rsplit("/", 1)[1] for p in role["ManagedPolicyArns"])
    assert policies == sorted(
        ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly",
         "AmazonSSMManagedInstanceCore"]
    )  # fmt: skip
    default.template.has_resource_properties(
        "AWS::IAM::InstanceProfile", {"Roles": [{"Ref": default.logical_id(default.stack.cluster.node_role)}]}
    )
    # An existing role is used as is (not modified), and still gets a profile.
    assert all("KarpenterNode" not in str(r) for r in full.resources("AWS::IAM::Role").values())
    full.template.has_resource_properties("AWS::IAM::InstanceProfile", {"Roles": ["KarpenterNodeRole-prod"]})


def access_entries(synth: Synth) -> list[dict[str, Any]]:
    return [flatten(r["Properties"]) for r in synth.resources("AWS::EKS::AccessEntry").values()]


def test_access_entries_map_the_functions_to_the_least_privilege_group_by_default(default: Synth) -> None:
    entries = access_entries(default)
    node = [e for e in entries if e["Type"] == "EC2_LINUX"]
    assert len(node) == 1 and node[0]["ClusterName"] == "demo"
    standard = [e for e in entries if e["Type"] == "STANDARD"]
    assert len(standard) == 5
    assert all(e["KubernetesGroups"] == ["carpool-controller"] and "AccessPolicies" not in e for e in standard)
    setup = default.template.to_json()["Outputs"]["KubernetesAccessSetup"]["Value"]
    assert setup.startswith("kubectl apply -f infra/rbac.yaml --namespace kube-system")
    assert ("kubectl create rolebinding carpool-karpenter-lease --namespace kube-system "
            "--role=carpool-karpenter-lease --group=carpool-controller") in setup


def test_the_rbac_file_grants_what_carpools_functions_do_to_the_api() -> None:
    """`infra/rbac.yaml`, which the default deploy binds to the functions' group: nodes patched and deleted,
    pods evicted and deleted (a NodePool's terminationGracePeriod), events written, the rest read."""
    import yaml

    lease_role, role = yaml.safe_load_all((Path(__file__).resolve().parents[2] / "infra" / "rbac.yaml").read_text())
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "carpool-controller")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    for wanted in [("", "nodes", "patch"), ("", "nodes", "delete"), ("", "pods/eviction", "create"),
                   ("", "pods", "delete"), ("", "events", "create"), ("", "events", "get"), ("", "events", "patch"), ("", "pods", "watch"), ("", "nodes", "watch"),
                   ("apps", "daemonsets", "get"), ("policy", "poddisruptionbudgets", "list")]:
        assert wanted in granted, wanted
    assert not any(v in {"*", "escalate", "bind", "impersonate"} for _g, _r, v in granted)
    # Karpenter's leader-election Lease, read only, and no other Lease (`carpool.app.standstill`): a Role with
    # no namespace of its own, applied and bound in Karpenter's (`KubernetesAccessSetup`)
    assert not [r for r in role["rules"] if "leases" in r["resources"]]
    assert (lease_role["kind"], lease_role["metadata"]) == ("Role", {"name": "carpool-karpenter-lease"})
    assert lease_role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                    "resourceNames": ["karpenter-leader-election"], "verbs": ["get"]}]


def test_the_rbac_file_grants_exactly_what_carpool_does_to_karpenters_objects() -> None:
    """Karpenter's kinds (`carpool.karpenter_objects`): the user's NodePools and EC2NodeClasses read and
    watched, their status written; carpool's NodeClaims created, patched, deleted, their status written.
    Nothing more: no write of a NodePool's or EC2NodeClass's spec, no delete of either, no wildcard."""
    import yaml

    _lease_role, role = yaml.safe_load_all((Path(__file__).resolve().parents[2] / "infra" / "rbac.yaml").read_text())
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "carpool-controller")
    karpenter_groups = {"karpenter.sh", "karpenter.k8s.aws"}
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] if g in karpenter_groups
               for r in rule["resources"] for v in rule["verbs"]}
    wanted = {("karpenter.sh", "nodepools", v) for v in ("get", "list", "watch")}
    wanted |= {("karpenter.k8s.aws", "ec2nodeclasses", v) for v in ("get", "list", "watch")}
    wanted |= {("karpenter.sh", "nodepools/status", v) for v in ("get", "patch", "update")}
    wanted |= {("karpenter.k8s.aws", "ec2nodeclasses/status", v) for v in ("get", "patch", "update")}
    wanted |= {("karpenter.sh", "nodeclaims", v)
               for v in ("get", "list", "watch", "create", "patch", "update", "delete")}
    wanted |= {("karpenter.sh", "nodeclaims/status", v) for v in ("patch", "update")}
    assert granted == wanted, (sorted(granted - wanted), sorted(wanted - granted))
    assert not any("resourceNames" in rule for rule in role["rules"] if set(rule["apiGroups"]) & karpenter_groups)


def test_access_entries_with_managed_access_policies_when_asked(full: Synth) -> None:
    entries = access_entries(full)
    functions = {e["PrincipalArn"]: e for e in entries if e["Type"] == "STANDARD"}
    assert len(functions) == 5
    assert "KubernetesAccessSetup" not in full.template.to_json()["Outputs"]
    for name, role in full.stack.functions.roles.items():
        entry = functions["${" + full.logical_id(role) + ".Arn}"]
        (policy,) = entry["AccessPolicies"]
        expected = "AmazonEKSAdminViewPolicy" if name in {"watcher", "provisioner"} else "AmazonEKSClusterAdminPolicy"
        assert re.fullmatch(rf"arn:(aws|\$\{{AWS::Partition\}}):eks::aws:cluster-access-policy/{expected}",
                            policy["PolicyArn"]), policy["PolicyArn"]
        assert policy["AccessScope"] == {"Type": "cluster"}


def test_access_entries_with_a_kubernetes_group(rbac: Synth, full: Synth) -> None:
    standard = [e for e in access_entries(rbac) if e["Type"] == "STANDARD"]
    assert len(standard) == 5
    for entry in standard:
        assert entry["KubernetesGroups"] == ["carpool-controller"]
        assert "AccessPolicies" not in entry
    # With an existing node role, its access is assumed to exist already (no EC2_LINUX entry).
    assert not [e for e in access_entries(full) if e["Type"] == "EC2_LINUX"]


def test_access_entries_can_be_left_out(no_access_entries: Synth) -> None:
    no_access_entries.template.resource_count_is("AWS::EKS::AccessEntry", 0)
