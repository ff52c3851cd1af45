"""What each AMI's bootstrap makes of the user data (nodeadm, Bottlerocket, bootstrap.sh defaults)."""

import pytest

from carpool.launch import userdata as render
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.sim.cluster import nodeboot, userdata
from carpool.sim.cluster.nodeboot import EKS_EVICTION, KUBELET_DEFAULT_EVICTION

# m5.large: 2 vCPUs, 3 ENIs x 10 IPv4 -> eni-max-pods 29
M5 = {"vcpus": 2, "default_card_enis": 3, "ipv4_per_eni": 10}
BARE = NodeBootstrap(cluster_name="demo", endpoint="https://demo.eks", ca_bundle="Q0E=", cluster_cidr="10.100.0.0/16")


def resolve(family, boot=BARE):
    return nodeboot.resolve(userdata.parse(render.render(family, boot)), family, **M5)


def test_eni_max_pods_and_reservation_formulas_match_the_published_values():
    assert nodeboot.eni_max_pods(3, 10) == 29 and nodeboot.eni_max_pods(15, 50) == 737
    assert [nodeboot.kube_reserved_cpu_millis(n) for n in (1, 2, 4, 8, 96)] == [60, 70, 80, 90, 310]
    assert nodeboot.kube_reserved_memory_mib(29) == 574


@pytest.mark.parametrize("family", ["al2023", "al2"])
def test_eks_amis_without_settings_use_their_eni_max_pods_and_reserve_for_it(family):
    k = resolve(family)
    assert k.max_pods == 29
    assert k.kube_reserved == {"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "574Mi"}
    assert k.eviction_hard == EKS_EVICTION and k.system_reserved == {}


def test_bottlerocket_without_settings_uses_kubelet_eviction_defaults():
    k = resolve("bottlerocket")
    assert k.max_pods == 29
    assert k.kube_reserved == {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"}
    assert k.eviction_hard == KUBELET_DEFAULT_EVICTION


def test_nodeadm_reserves_memory_for_its_own_max_pods_not_the_configured_one():
    """nodeadm computes kubeReserved memory from its ENI value; a maxPods drop-in does not change it."""
    k = resolve("al2023", NodeBootstrap(**{**BARE.__dict__, "max_pods": 110}))
    assert k.max_pods == 110 and k.kube_reserved["memory"] == "574Mi"


def test_bottlerocket_reserves_memory_for_the_configured_max_pods():
    k = resolve("bottlerocket", NodeBootstrap(**{**BARE.__dict__, "max_pods": 110}))
    assert k.max_pods == 110 and k.kube_reserved["memory"] == f"{11 * 110 + 255}Mi"


def test_nodeadm_drop_in_merges_per_key_over_its_defaults():
    boot = NodeBootstrap(**{**BARE.__dict__, "kube_reserved": {"memory": 1465 * 2**20},
                            "eviction_hard": {"memory.available": "5%"}})
    k = resolve("al2023", boot)
    assert k.kube_reserved == {"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "1465Mi"}
    assert k.eviction_hard == {**EKS_EVICTION, "memory.available": "5%"}


def test_al2_flags_replace_the_bootstrap_maps():
    boot = NodeBootstrap(**{**BARE.__dict__, "kube_reserved": {"memory": 600 * 2**20},
                            "eviction_hard": {"memory.available": "300Mi"}})
    k = resolve("al2", boot)
    assert k.kube_reserved == {"memory": "600Mi"}
    assert k.eviction_hard == {"memory.available": "300Mi"}


def test_bottlerocket_partial_eviction_hard_leaves_other_signals_off():
    k = resolve("bottlerocket", NodeBootstrap(**{**BARE.__dict__, "eviction_hard": {"memory.available": "5%"}}))
    assert k.eviction_hard == {"memory.available": "5%"}


def test_al2_without_use_max_pods_gets_the_kubelet_default():
    cfg = userdata.parse("/etc/eks/bootstrap.sh demo --use-max-pods false --kubelet-extra-args '--node-labels=a=b'")
    k = nodeboot.resolve(cfg, "al2", **M5)
    assert k.max_pods == nodeboot.KUBELET_DEFAULT_MAX_PODS and k.kube_reserved["memory"] == "574Mi"


def test_max_pods_expression_is_evaluated_and_bad_ones_fall_back():
    assert nodeboot.evaluate_max_pods_expression("(default_enis - 1) * (ips_per_eni - 1) + 2", 3, 10, 29) == 20
    assert nodeboot.evaluate_max_pods_expression("max_pods * 2", 3, 10, 29) == 58
    assert nodeboot.evaluate_max_pods_expression("__import__('os')", 3, 10, 29) is None
    assert nodeboot.evaluate_max_pods_expression("0 - max_pods", 3, 10, 29) is None
    cfg = userdata.BootConfig(family="al2023", max_pods_expression="(default_enis - 1) * (ips_per_eni - 1) + 2")
    k = nodeboot.resolve(cfg, "al2023", **M5)
    assert k.max_pods == 20 and k.kube_reserved["memory"] == f"{11 * 20 + 255}Mi"


def test_custom_images_get_the_kubelet_defaults():
    k = nodeboot.resolve(userdata.BootConfig(), "custom", **M5)
    assert k.max_pods == 110 and k.kube_reserved == {} and k.eviction_hard == KUBELET_DEFAULT_EVICTION
