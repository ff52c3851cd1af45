"""Context parsing: one required key, typed optional ones, errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from infra.settings import Settings, SettingsError


def test_only_cluster_name_is_required() -> None:
    settings = Settings.from_context({"clusterName": "demo"})
    assert settings.cluster_name == "demo"
    assert settings.bus_name == "carpool-demo"
    assert settings.stack_name == "carpool-demo"
    assert settings.node_class_roles == () and settings.instance_profile_role_arns == ()
    assert settings.node_role_arn is None and settings.vpc_id is None and settings.config_file is None
    assert settings.access_entries and settings.reserved_concurrency and settings.retain_state
    assert settings.log_retention_days == 30 and settings.log_level == "INFO"
    assert settings.alarm_email is None
    assert settings.karpenter_namespace == "kube-system"


@pytest.mark.parametrize("namespace", ["Karpenter", "kube_system", "-karpenter", "a" * 64])
def test_karpenters_namespace_must_be_a_namespace_name(namespace: str) -> None:
    with pytest.raises(SettingsError, match=r"karpenterNamespace=.* is malformed; expected something like karpenter"):
        Settings.from_context({"clusterName": "demo", "karpenterNamespace": namespace})
    assert Settings.from_context({"clusterName": "demo", "karpenterNamespace": "karpenter"}).karpenter_namespace == "karpenter"


def test_missing_cluster_name_says_how_to_pass_it() -> None:
    with pytest.raises(SettingsError, match=r"clusterName is required: cdk deploy -c clusterName="):
        Settings.from_context({})


@pytest.mark.parametrize("name", ["-leading-dash", "has space", "a" * 101, "dots.not.allowed"])
def test_cluster_name_must_be_an_eks_name(name: str) -> None:
    with pytest.raises(SettingsError, match="clusterName"):
        Settings.from_context({"clusterName": name})


def test_underscores_are_valid_in_clusters_but_not_stack_names() -> None:
    settings = Settings.from_context({"clusterName": "team_a"})
    assert settings.stack_name == "carpool-team-a"
    assert settings.bus_name == "carpool-team_a"


def test_unknown_context_key_is_a_typo() -> None:
    with pytest.raises(SettingsError, match=r"unknown context key\(s\) \['clusterNmae'\]"):
        Settings.from_context({"clusterName": "demo", "clusterNmae": "demo"})


def test_cdk_own_context_keys_are_ignored() -> None:
    Settings.from_context(
        {
            "clusterName": "demo",
            "@aws-cdk/core:newStyleStackSynthesis": True,
            "aws:cdk:enable-path-metadata": True,
            "acknowledged-issue-numbers": [1],
            "vpc-provider:account=1:filter.vpc-id=vpc-1:region=x": {},
        }
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("nodeRoleArn", "KarpenterNodeRole"),
        ("nodeRoleArn", "arn:aws:iam::123:role/x"),
        ("vpcId", "subnet-0123456789abcdef0"),
        ("clusterEndpoint", "http://insecure"),
        ("nodeClassRoles", "team a"),
        ("nodeClassRoles", "arn:aws:iam::123:role/x"),
        ("logRetentionDays", "31"),
        ("logLevel", "chatty"),
        ("reservedConcurrency", "maybe"),
        ("alarmEmail", "not-an-email"),
        ("kubernetesGroup", "system:masters"),
    ],
)
def test_malformed_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(SettingsError, match=key):
        Settings.from_context({"clusterName": "demo", key: value})


def test_values_from_the_command_line_are_strings() -> None:
    settings = Settings.from_context(
        {
            "clusterName": "demo",
            "accessEntries": "false",
            "reservedConcurrency": "no",
            "retainState": False,
            "logRetentionDays": "7",
            "logLevel": "debug",
            "nodeClassRoles": "team-a-nodes, KarpenterNodeRole-*,arn:aws:iam::123456789012:role/teams/b",
            "nodeRoleArn": "arn:aws:iam::123456789012:role/path/NodeRole",
        }
    )
    assert not settings.access_entries and not settings.reserved_concurrency and not settings.retain_state
    assert settings.log_retention_days == 7 and settings.log_level == "DEBUG"
    assert settings.node_class_roles == ("team-a-nodes", "KarpenterNodeRole-*",
                                         "arn:aws:iam::123456789012:role/teams/b")


@pytest.mark.parametrize("key", ["subnetTag", "securityGroupTag"])
def test_the_default_nodeclass_keys_are_refused_saying_where_the_selectors_go(key: str) -> None:
    """They shaped the default EC2NodeClass the stack stored; the config now lives in the cluster."""
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"clusterName": "demo", key: "team=platform"})
    message = str(info.value)
    assert message.startswith(f"context {key} is no longer read") and "kubectl apply" in message
    assert ("subnetSelectorTerms" if key == "subnetTag" else "securityGroupSelectorTerms") in message


def test_config_file_is_resolved_against_the_project(tmp_path: Path) -> None:
    (tmp_path / "pools.yaml").write_text("kind: NodePool\n")
    settings = Settings.from_context({"clusterName": "demo", "configFile": "pools.yaml"}, base_dir=tmp_path)
    assert settings.config_file == tmp_path / "pools.yaml"
    with pytest.raises(SettingsError, match="configFile='missing.yaml'"):
        Settings.from_context({"clusterName": "demo", "configFile": "missing.yaml"}, base_dir=tmp_path)


def test_inconsistent_combinations_are_refused() -> None:
    with pytest.raises(SettingsError, match="clusterSecurityGroupId needs vpcId"):
        Settings.from_context({"clusterName": "demo", "clusterSecurityGroupId": "sg-0123456789abcdef0"})
    with pytest.raises(SettingsError, match="kubernetesGroup"):
        Settings.from_context({"clusterName": "demo", "kubernetesGroup": "carpool", "accessEntries": "false"})
    with pytest.raises(SettingsError, match="kubernetesGroup"):
        Settings.from_context({"clusterName": "demo", "kubernetesGroup": "carpool", "kubernetesAccess": "clusterAdmin"})
    with pytest.raises(SettingsError, match="kubernetesAccess='root'"):
        Settings.from_context({"clusterName": "demo", "kubernetesAccess": "root"})


def test_kubernetes_access_is_least_privilege_unless_cluster_admin_is_asked_for() -> None:
    def group(**context: str) -> str | None:
        return Settings.from_context({"clusterName": "demo", **context}).kubernetes_group

    assert group() == "carpool-controller" and group(kubernetesGroup="platform") == "platform"
    assert group(kubernetesAccess="clusterAdmin") is None and group(accessEntries="false") is None


def test_cluster_facts_as_context_keys() -> None:
    got = Settings.from_context({"clusterName": "c", "clusterVersion": "1.31", "serviceCidr": "fd30:1c53:5f8a::/108",
                                 "ipFamily": "IPv6"})
    assert (got.cluster_version, got.service_cidr, got.ip_family) == ("1.31", "fd30:1c53:5f8a::/108", "ipv6")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"clusterVersion": "v1.31"}, "clusterVersion='v1.31' is malformed"),
        ({"serviceCidr": "10.100.0.1/16"}, "serviceCidr='10.100.0.1/16' is not a CIDR"),
        ({"serviceCidr": "10.100.0.0/16", "ipFamily": "ipv6"}, "is not an ipv6 range"),
        ({"serviceCidr": "10.100.0.0/16", "clusterDns": "10.200.0.10"}, "outside serviceCidr"),
        ({"clusterDns": "10.100.0.10"}, "clusterDns needs serviceCidr"),
        ({"ipFamily": "dual"}, "ipFamily='dual' must be one of"),
    ],
)
def test_inconsistent_cluster_facts_are_refused(context: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(".", r"\.")):
        Settings.from_context({"clusterName": "c", **context})


def test_a_config_file_that_is_a_directory_or_missing_is_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "pools").mkdir()
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"clusterName": "demo", "configFile": "pools"}, base_dir=tmp_path)
    assert str(info.value) == (f"context configFile='pools': {tmp_path / 'pools'} is a directory; name the "
                               "NodePool/EC2NodeClass YAML file in it")
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"clusterName": "demo", "configFile": "gone.yaml"}, base_dir=tmp_path)
    assert str(info.value) == f"context configFile='gone.yaml': no such file ({tmp_path / 'gone.yaml'})"
