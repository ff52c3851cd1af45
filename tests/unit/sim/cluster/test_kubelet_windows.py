"""A simulated Windows node joins as an EKS Windows AMI does: Start-EKSBootstrap.ps1 hands the kubelet the
user data's extra args (the kubelet's own defaults otherwise), and the kubelet registers with
`kubernetes.io/os=windows` and its OS build; the VPC resource controller advertises the pod IPs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from carpool import labels as L
from carpool.launch import userdata as render
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.sim.clock import SimClock
from carpool.sim.cluster.kubelet import Kubelets
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Truth
from carpool.sim.localaws.in_process import moto_in_process

CLUSTER = "sim"
MIB = 2**20
BOOT = NodeBootstrap(cluster_name=CLUSTER, endpoint="https://sim.eks", ca_bundle="Q0E=", max_pods=110,
                     kube_reserved={"cpu": 70, "memory": 1465 * MIB, "ephemeral-storage": 2**30},
                     labels={L.NODEPOOL: "win"})


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # only the images registered here exist, as in the simulation's local EC2 (no moto default AMIs)
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with moto_in_process(fleets_as_ec2=True):
        yield boto3.client("ec2", region_name="us-east-1")


def boot_one(ec2: Any, text: str, image_name: str, instance_type: str = "m5.large") -> tuple[Kubelets, str]:
    image = ec2.register_image(Name=image_name, Architecture="x86_64", RootDeviceName="/dev/sda1")["ImageId"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    ec2.create_launch_template(LaunchTemplateName="win", LaunchTemplateData={
        "ImageId": image, "UserData": render.encode(text),
        "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 50}}]})
    iid = ec2.create_fleet(
        Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "win", "Version": "$Latest"},
                                "Overrides": [{"InstanceType": instance_type, "SubnetId": subnet}]}],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": L.TAG_MANAGED_BY, "Value": CLUSTER}]}],
    )["Instances"][0]["InstanceIds"][0]
    clock = SimClock()
    cluster = SimulatedCluster(clock, elapsed=lambda: clock.elapsed)
    kubelets = Kubelets(ec2, cluster, CLUSTER, "us-east-1", Truth(boot_seconds=10, registration_seconds=10),
                        lambda: clock.elapsed)
    while clock.elapsed <= 30:
        kubelets.tick()
        clock.advance(5)
    return kubelets, iid


def test_a_windows_node_registers_with_its_os_build_and_the_stated_reservations(ec2: Any) -> None:
    kubelets, iid = boot_one(ec2, render.render("windows2022", BOOT), "Windows_Server-2022-English-Core-EKS_Optimized-1.32")
    node = kubelets.cluster.node_raw(kubelets.registered[iid])
    assert node is not None
    labels = node["metadata"]["labels"]
    assert labels[L.OS] == labels["beta.kubernetes.io/os"] == "windows"
    assert labels[L.WINDOWS_BUILD] == "10.0.20348" and labels[L.NODEPOOL] == "win"
    assert node["status"]["nodeInfo"]["operatingSystem"] == "windows"
    status = node["status"]
    assert status["capacity"]["pods"] == "110"
    assert status["capacity"]["vpc.amazonaws.com/PrivateIPv4Address"] == "9"
    memory = int(status["capacity"]["memory"].removesuffix("Ki")) * 1024
    allocatable = int(status["allocatable"]["memory"].removesuffix("Ki")) * 1024
    assert memory - allocatable == (1465 + 100) * MIB  # kube-reserved from the user data + kubelet's 100Mi


def test_a_windows_script_without_the_bootstrap_call_never_joins(ec2: Any) -> None:
    kubelets, iid = boot_one(ec2, "<powershell>\nWrite-Host hello\n</powershell>",
                             "Windows_Server-2019-English-Core-EKS_Optimized-1.32")
    assert not kubelets.registered and kubelets.boots[iid].no_join
