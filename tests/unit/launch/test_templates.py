from __future__ import annotations

import base64
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from carpool import labels
from carpool.amis import ResolvedAmi, ami_requirements
from carpool.launch.templates import (
    DEFAULT_METADATA_OPTIONS,
    LaunchSettings,
    LaunchTemplateError,
    create_launch_template_request,
    launch_settings,
    launch_templates_to_delete,
    plan_launch_templates,
)
from carpool.launch.userdata import NodeBootstrap


def ami(ami_id: str, arch: str = "amd64", variant: str = "standard") -> ResolvedAmi:
    return ResolvedAmi(ami_id, ami_id, arch, variant, ami_requirements(arch, variant), "2025-01-01T00:00:00Z")


STD, NV = ami("ami-std"), ami("ami-nv", variant="nvidia")
AMIS = {"m5.large": STD, "c5.large": STD, "m5.xlarge": STD, "g5.xlarge": NV}
MAX_PODS = {"m5.large": 29, "c5.large": 29, "m5.xlarge": 58, "g5.xlarge": 58, "t3.nano": 4}
BASE = NodeBootstrap("demo", "https://api.example", "Q0E=", cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10",
                     labels={labels.NODEPOOL: "default"})
SETTINGS = LaunchSettings(security_group_ids=("sg-2", "sg-1"), instance_profile="demo-node", tags={"team": "a"})


def boot(name: str) -> NodeBootstrap:
    return replace(BASE, max_pods=MAX_PODS[name])


def plan(**kw):  # type: ignore[no-untyped-def]
    args = {"cluster_name": "demo", "ami_family": "al2023", "amis": AMIS, "bootstraps": boot, "settings": SETTINGS}
    args.update(kw)
    return plan_launch_templates(**args)


def test_grouping_by_ami_and_max_pods() -> None:
    specs = plan(instance_types=["g5.xlarge", "m5.large", "t3.nano", "c5.large", "m5.xlarge"])
    groups = {(s.ami_id, s.max_pods): s.instance_types for s in specs}
    assert groups == {
        ("ami-std", 29): ("c5.large", "m5.large"),
        ("ami-std", 58): ("m5.xlarge",),
        ("ami-nv", 58): ("g5.xlarge",),  # same max pods, different AMI: its own template
    }  # t3.nano has no AMI: not offered, no template
    assert [s.name for s in specs] == sorted(s.name for s in specs)
    assert len({s.name for s in specs}) == 3


def test_user_data_inputs_split_groups() -> None:
    def by_type(name: str) -> NodeBootstrap:
        taints = () if name == "m5.large" else (__import__("carpool.taints").taints.Taint("x", "NoSchedule"),)
        return replace(BASE, max_pods=29, taints=taints)

    specs = plan(amis={"m5.large": STD, "c5.large": STD}, bootstraps=by_type)
    assert sorted(s.instance_types for s in specs) == [("c5.large",), ("m5.large",)]


def test_names_are_deterministic_and_input_sensitive() -> None:
    a = plan(instance_types=["m5.large", "c5.large"])
    b = plan(instance_types=["c5.large", "m5.large", "c5.large"])
    assert [s.name for s in a] == [s.name for s in b]
    (spec,) = a
    assert re.fullmatch(r"carpool/demo/[0-9a-f]{16}", spec.name)
    # any template input changes the name
    changed_ca = plan(instance_types=["m5.large"], bootstraps=lambda n: replace(boot(n), ca_bundle="Q0I="))
    changed_tags = plan(instance_types=["m5.large"], settings=replace(SETTINGS, tags={"team": "b"}))
    changed_ami = plan(instance_types=["m5.large"], amis={"m5.large": ami("ami-new")})
    names = {spec.name, changed_ca[0].name, changed_tags[0].name, changed_ami[0].name}
    assert len(names) == 4
    # the instance types of a group are not part of the name: the template is reused across claims
    assert plan(instance_types=["m5.large"])[0].name == spec.name


def test_user_data_is_base64_of_the_family_rendering() -> None:
    (spec,) = plan(instance_types=["m5.large"], ami_family="bottlerocket")
    text = base64.b64decode(spec.user_data_b64).decode()
    assert "max-pods = 29" in text and 'cluster-name = "demo"' in text


def test_create_launch_template_request_shape() -> None:
    (spec,) = plan(instance_types=["m5.large"])
    req = create_launch_template_request(spec)
    data = req["LaunchTemplateData"]
    assert req["LaunchTemplateName"] == spec.name
    assert data["ImageId"] == "ami-std"
    assert data["UserData"] == spec.user_data_b64
    assert data["IamInstanceProfile"] == {"Name": "demo-node"}
    assert data["SecurityGroupIds"] == ["sg-1", "sg-2"]
    assert data["MetadataOptions"] == {"HttpEndpoint": "enabled", "HttpProtocolIpv6": "disabled", "HttpTokens": "required",
                                       "HttpPutResponseHopLimit": 1, "InstanceMetadataTags": "disabled"}
    assert data["Monitoring"] == {"Enabled": False} and "NetworkInterfaces" not in data
    tags = {t["Key"]: t["Value"] for t in req["TagSpecifications"][0]["Tags"]}
    assert req["TagSpecifications"][0]["ResourceType"] == "launch-template"
    assert tags == {"team": "a", "kubernetes.io/cluster/demo": "owned", labels.TAG_MANAGED_BY: "demo"}


OWNED = {"kubernetes.io/cluster/demo": "owned", labels.TAG_MANAGED_BY: "demo"}


def with_capacity_type(ct: str):  # type: ignore[no-untyped-def]
    return lambda name: replace(boot(name), labels={**BASE.labels, labels.CAPACITY_TYPE: ct})


def data_tags(spec) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    specs = create_launch_template_request(spec)["LaunchTemplateData"]["TagSpecifications"]
    return {s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]} for s in specs}


def test_template_data_tags_the_network_interface_and_the_spot_request() -> None:
    (spot,) = plan(instance_types=["m5.large"], bootstraps=with_capacity_type("spot"))
    (on_demand,) = plan(instance_types=["m5.large"], bootstraps=with_capacity_type("on-demand"))
    assert (spot.capacity_type, on_demand.capacity_type) == ("spot", "on-demand")
    assert data_tags(spot) == {"network-interface": {"team": "a", **OWNED}, "spot-instances-request": {"team": "a", **OWNED}}
    # EC2 refuses spot-request tags in a launch that creates no spot request
    assert data_tags(on_demand) == {"network-interface": {"team": "a", **OWNED}}
    assert spot.name != on_demand.name


def test_capacity_type_argument_wins_over_the_node_label() -> None:
    (spec,) = plan(instance_types=["m5.large"], bootstraps=with_capacity_type("on-demand"), capacity_type="spot")
    assert spec.capacity_type == "spot" and "spot-instances-request" in data_tags(spec)
    (unknown,) = plan(instance_types=["m5.large"])
    assert unknown.capacity_type is None and set(data_tags(unknown)) == {"network-interface"}


def _nodeclass(**spec):  # type: ignore[no-untyped-def]
    return SimpleNamespace(metadata=SimpleNamespace(name="gpu"), spec=SimpleNamespace(**spec))


def test_launch_settings_from_nodeclass() -> None:
    nc = _nodeclass(
        instance_profile="prof",
        tags={"cost-center": "42"},
        metadata_options=SimpleNamespace(http_put_response_hop_limit=1, http_tokens=None, http_endpoint=None),
        block_device_mappings=[
            SimpleNamespace(device_name="/dev/xvda", ebs=SimpleNamespace(volume_size="100Gi", volume_type="gp3",
                                                                          encrypted=True, iops=None)),
            {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "1500Mi", "throughput": 250}},
        ],
    )
    s = launch_settings(nc, "al2023", ["sg-b", "sg-a"])
    assert s.security_group_ids == ("sg-a", "sg-b")
    assert s.instance_profile == "prof"
    assert s.tags == {"cost-center": "42", labels.TAG_NODECLASS: "gpu"}
    assert s.metadata_options == {**DEFAULT_METADATA_OPTIONS, "HttpPutResponseHopLimit": 1}
    assert s.block_device_mappings == (
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 100, "VolumeType": "gp3", "Encrypted": True}},
        {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeSize": 2, "Throughput": 250}},
    )


def test_launch_settings_defaults_and_errors() -> None:
    s = launch_settings(_nodeclass(role="KarpenterNodeRole"), "bottlerocket", ["sg-1"], instance_profile="derived")
    assert [m["DeviceName"] for m in s.block_device_mappings] == ["/dev/xvda", "/dev/xvdb"]
    assert s.block_device_mappings[0]["Ebs"]["VolumeSize"] == 4
    assert s.metadata_options == DEFAULT_METADATA_OPTIONS
    with pytest.raises(LaunchTemplateError, match="instanceProfile"):
        launch_settings(_nodeclass(role="KarpenterNodeRole"), "al2023", ["sg-1"])
    with pytest.raises(LaunchTemplateError, match=r"blockDeviceMappings\[0\]"):
        launch_settings(_nodeclass(instance_profile="p", block_device_mappings=[{"ebs": {}}]), "al2023", [])


def test_garbage_collection() -> None:
    now = datetime(2025, 6, 1, tzinfo=UTC)
    grace = timedelta(hours=1)
    existing = {
        "carpool/demo/aaaa": now - timedelta(days=3),  # old, unused -> delete
        "carpool/demo/bbbb": now - timedelta(days=3),  # old but in use -> keep
        "carpool/demo/cccc": now - timedelta(minutes=30),  # recent -> keep
        "carpool/demo/dddd": now - grace,  # exactly at the grace boundary -> delete
        "carpool/demo/eeee": None,  # unknown: may be brand new -> keep
        "eks-managed-lt": now - timedelta(days=300),  # not ours -> never
    }
    assert launch_templates_to_delete(existing, {"carpool/demo/bbbb"}, now, grace) == [
        "carpool/demo/aaaa",
        "carpool/demo/dddd",
    ]
