"""EC2NodeClass fields that reach the launch template or the CreateFleet request, from real YAML through
the loader, as Karpenter's `pkg/providers/launchtemplate` puts them."""

from __future__ import annotations

from typing import Any

from carpool import labels
from carpool.amis import ResolvedAmi, ami_requirements
from carpool.api.loader import load
from carpool.api.nodeclass import EC2NodeClass
from carpool.launch.fleet import FleetOverride, build_fleet_request
from carpool.launch.templates import create_launch_template_request, launch_settings, plan_launch_templates
from carpool.launch.userdata import NodeBootstrap

AMI = ResolvedAmi("ami-std", "ami-std", "amd64", "standard", ami_requirements("amd64", "standard"), "2025-01-01T00:00:00Z")
BOOT = NodeBootstrap("demo", "https://api.example", "Q0E=", cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10",
                     labels={labels.NODEPOOL: "default"}, max_pods=29)
TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]


def nodeclass(**spec: Any) -> EC2NodeClass:
    body: dict[str, Any] = {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                            "subnetSelectorTerms": TERMS, "securityGroupSelectorTerms": TERMS, **spec}
    body = {k: v for k, v in body.items() if v is not None}
    doc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "nc"}, "spec": body}
    (nc,) = load([doc]).nodeclasses
    return nc


def template_data(nc: EC2NodeClass, profile: str | None = "stack-profile") -> dict[str, Any]:
    return request_of(nc, profile)["LaunchTemplateData"]  # type: ignore[no-any-return]


def request_of(nc: EC2NodeClass, profile: str | None = "stack-profile") -> dict[str, Any]:
    settings = launch_settings(nc, "al2023", ["sg-2", "sg-1"], instance_profile=profile)
    (spec,) = plan_launch_templates("demo", "al2023", {"m5.large": AMI}, lambda _: BOOT, settings, ["m5.large"])
    return create_launch_template_request(spec)


# -- metadataOptions ---------------------------------------------------------------------------------------
def test_without_metadata_options_the_template_has_karpenters_v1_imds_defaults() -> None:
    assert template_data(nodeclass())["MetadataOptions"] == {
        "HttpEndpoint": "enabled", "HttpProtocolIpv6": "disabled", "HttpPutResponseHopLimit": 1,
        "HttpTokens": "required", "InstanceMetadataTags": "disabled",
    }


def test_metadata_options_as_written_reach_the_template() -> None:
    nc = nodeclass(metadataOptions={"httpPutResponseHopLimit": 2, "httpTokens": "optional",
                                    "httpProtocolIPv6": "enabled", "httpEndpoint": "enabled"})
    opts = template_data(nc)["MetadataOptions"]
    assert (opts["HttpPutResponseHopLimit"], opts["HttpTokens"], opts["HttpProtocolIpv6"]) == (2, "optional", "enabled")


# -- associatePublicIPAddress ------------------------------------------------------------------------------
def test_associate_public_ip_address_goes_on_a_network_interface_with_the_security_groups() -> None:
    for value in (True, False):
        data = template_data(nodeclass(associatePublicIPAddress=value))
        assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "AssociatePublicIpAddress": value,
                                              "Groups": ["sg-1", "sg-2"]}]
        assert "SecurityGroupIds" not in data  # EC2 refuses both


def test_without_associate_public_ip_address_the_subnet_decides() -> None:
    data = template_data(nodeclass())
    assert "NetworkInterfaces" not in data and data["SecurityGroupIds"] == ["sg-1", "sg-2"]


def test_public_ip_choice_is_part_of_the_template_name() -> None:
    names = {request_of(nodeclass(associatePublicIPAddress=v))["LaunchTemplateName"] for v in (None, True, False)}
    assert len(names) == 3


# -- detailedMonitoring ------------------------------------------------------------------------------------
def test_detailed_monitoring_sets_monitoring_enabled() -> None:
    assert template_data(nodeclass(detailedMonitoring=True))["Monitoring"] == {"Enabled": True}
    assert template_data(nodeclass(detailedMonitoring=False))["Monitoring"] == {"Enabled": False}
    assert template_data(nodeclass())["Monitoring"] == {"Enabled": False}  # Karpenter's default, stated
    on, off = (request_of(nodeclass(detailedMonitoring=v))["LaunchTemplateName"] for v in (True, False))
    assert on != off


# -- instanceProfile / role --------------------------------------------------------------------------------
def test_instance_profile_is_used_as_given() -> None:
    nc = nodeclass(role=None, instanceProfile="team-a-nodes")
    assert template_data(nc, profile=None)["IamInstanceProfile"] == {"Name": "team-a-nodes"}


def test_the_resolved_profile_of_a_role_reaches_the_template() -> None:
    assert template_data(nodeclass(), profile="demo_0123456789abcdef")["IamInstanceProfile"] == {
        "Name": "demo_0123456789abcdef"}


# -- blockDeviceMappings[].ebs.kmsKeyID ------------------------------------------------------------------
def test_the_kms_key_of_a_volume_reaches_the_template() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    nc = nodeclass(blockDeviceMappings=[{"deviceName": "/dev/xvda", "rootVolume": True,
                                         "ebs": {"volumeSize": "100Gi", "encrypted": True, "kmsKeyID": key}}])
    (mapping,) = template_data(nc)["BlockDeviceMappings"]
    assert mapping["Ebs"]["KmsKeyId"] == key and mapping["Ebs"]["Encrypted"] is True


# -- context -----------------------------------------------------------------------------------------------
OVERRIDES = [FleetOverride("carpool/demo/a", "m5.large", "subnet-1", "us-east-1a", 0.1)]


def test_context_is_the_create_fleet_context() -> None:
    nc = nodeclass(context="arn:aws:ec2:us-east-1:123456789012:context/ctx-1")
    request = build_fleet_request("c1", "on-demand", OVERRIDES, {}, context=nc.spec.context)
    assert request["Context"] == "arn:aws:ec2:us-east-1:123456789012:context/ctx-1"
    assert "Context" not in build_fleet_request("c1", "on-demand", OVERRIDES, {}, context=nodeclass().spec.context)
