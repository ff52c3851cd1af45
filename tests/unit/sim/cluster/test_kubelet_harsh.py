"""The simulated node boot refuses what the real one refuses: labels the kubelet may not set itself, a
NodeConfig part nodeadm cannot decode, soft thresholds without a grace period; and reads what the real one
reads: the first YAML document of a NodeConfig part, the last `--register-with-taints`, the RAID0 array."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.unit.sim.cluster.test_kubelet import BOOT, CLUSTER, World, world  # noqa: F401 - `world` is the fixture

from carpool import labels as L
from carpool.launch import userdata as render
from carpool.sim.cluster import nodeboot, userdata
from carpool.sim.cluster.kubelet import InstanceFacts, node_resources, startup_refusal
from carpool.taints import Taint

M5 = dict(vcpus=2, default_card_enis=3, ipv4_per_eni=10)
GIB = 2**30
NODECONFIG = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: {}\n"


def test_a_label_the_kubelet_may_not_set_means_the_node_never_joins(world: World) -> None:  # noqa: F811
    # carpool never writes one (see below): the user data is edited by hand, as another tool could write it
    text = render.render("al2023", BOOT).replace("--node-labels=", "--node-labels=node-restriction.kubernetes.io/isolation=pci,")
    assert "node-restriction.kubernetes.io/isolation=pci" in text
    world.ec2.create_launch_template(LaunchTemplateName="carpool-sim-restricted", LaunchTemplateData={
        "ImageId": world.image, "UserData": render.encode(text)})
    iid = world.ec2.create_fleet(
        Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "carpool-sim-restricted"},
                                "Overrides": [{"InstanceType": "m5.large", "SubnetId": world.subnet}]}],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": L.TAG_MANAGED_BY, "Value": CLUSTER}]}],
    )["Instances"][0]["InstanceIds"][0]
    kubelets = world.kubelets()
    world.run(kubelets, 100)
    assert iid in kubelets.launched and not kubelets.registered
    assert "unknown 'kubernetes.io' or 'k8s.io' labels" in kubelets.boots[iid].no_join


def test_labels_in_the_kubelets_own_namespaces_join(world: World) -> None:  # noqa: F811
    iid = world.launch(replace(BOOT, labels={**BOOT.labels, "x.node.kubernetes.io/tier": "web"}))
    kubelets = world.kubelets()
    world.run(kubelets, 100)
    assert iid in kubelets.registered


def test_carpool_never_writes_such_a_label_into_the_user_data() -> None:
    with pytest.raises(render.UserDataError, match="may not set this label"):
        render.render("al2023", replace(BOOT, labels={"kops.k8s.io/instancegroup": "nodes"}))


def test_a_repeated_register_with_taints_keeps_only_the_last() -> None:
    cfg = userdata.BootConfig()
    userdata.read_flags(cfg, ["--register-with-taints=a=1:NoSchedule", "--register-with-taints=b:NoExecute"])
    assert cfg.taints == [Taint("b", "NoExecute")]


def test_nodeadm_reads_the_first_document_of_a_nodeconfig_part() -> None:
    bare = NODECONFIG.format(10) + "---\n" + NODECONFIG.format(20)
    assert userdata.parse(bare).max_pods == 10
    archive = render.render("al2023", replace(BOOT, user_data=None))
    assert userdata.parse(archive).max_pods == 58


def test_a_nodeconfig_part_whose_first_document_is_no_nodeconfig_fails_nodeadm() -> None:
    archive = ("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\n"
               "Content-Type: application/node.eks.aws\n\nkind: Other\n---\n" + NODECONFIG.format(10) + "--B--\n")
    assert "failed to decode node config" in userdata.parse(archive).refusal


def test_a_soft_threshold_without_a_grace_period_stops_the_kubelet() -> None:
    cfg = userdata.BootConfig(family="al2023", settings={"evictionSoft": {"memory.available": "1Gi"}})
    assert "grace period must be specified" in startup_refusal(nodeboot.resolve(cfg, "al2023", **M5))
    cfg.settings["evictionSoftGracePeriod"] = {"memory.available": "1m"}
    assert startup_refusal(nodeboot.resolve(cfg, "al2023", **M5)) == ""


def test_image_gc_thresholds_out_of_order_stop_the_kubelet() -> None:
    cfg = userdata.BootConfig(family="al2023", settings={"imageGCHighThresholdPercent": 60,
                                                         "imageGCLowThresholdPercent": 60})
    assert "imageGCLowThresholdPercent" in startup_refusal(nodeboot.resolve(cfg, "al2023", **M5))


def test_raid0_puts_the_kubelet_on_the_instance_store_and_without_one_on_the_volume() -> None:
    cfg = userdata.BootConfig(family="al2023", raid0=True)
    kubelet = nodeboot.resolve(cfg, "al2023", **M5)
    with_store = InstanceFacts("m5d.large", 2, 8192, "amd64", 3, 10, instance_store_gb=75)
    capacity, _ = node_resources(with_store, kubelet, 7577, volume_gib=20)
    assert 74 * 10**9 < int(capacity["ephemeral-storage"].removesuffix("Ki")) * 1024 <= 75 * 10**9
    without = InstanceFacts("m5.large", 2, 8192, "amd64", 3, 10)
    capacity, _ = node_resources(without, kubelet, 7577, volume_gib=100)
    assert 99 * GIB < int(capacity["ephemeral-storage"].removesuffix("Ki")) * 1024 <= 100 * GIB


def test_nodeadm_derives_the_cluster_dns_from_the_service_cidr_when_none_is_given() -> None:
    cfg = userdata.parse(render.render("al2023", BOOT))
    assert nodeboot.resolve(cfg, "al2023", **M5).settings["clusterDNS"] == ["10.100.0.10"]
    cfg = userdata.parse(render.render("al2023", replace(BOOT, cluster_dns="172.20.0.10")))
    assert nodeboot.resolve(cfg, "al2023", **M5).settings["clusterDNS"] == ["172.20.0.10"]
