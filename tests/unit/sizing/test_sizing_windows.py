"""Windows nodes as Karpenter's provider sizes them: max pods is the kubelet default 110 (no ENI pod
density), podsPerCore applies, kube-reserved memory follows those 110 pods (1465Mi), the root volume is
50Gi, and the VPC resource controller's `vpc.amazonaws.com/PrivateIPv4Address` is part of capacity."""

from __future__ import annotations

import pytest

from carpool.catalog import Catalog
from carpool.sizing import KubeletSettings, NetworkSettings, size_node
from carpool.sizing.allocatable import PRIVATE_IPV4_ADDRESS

MIB = 2**20
GIB = 2**30


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.snapshot()


@pytest.mark.parametrize("family", ["windows2019", "windows2022", "windows2025"])
def test_windows_defaults(catalog: Catalog, family: str) -> None:
    size = size_node(catalog["m5.large"], family)
    assert size.max_pods == 110  # not the 29 ENI-limited pods
    assert size.kube_reserved["memory"] == 1465 * MIB  # 11Mi x 110 + 255Mi
    assert size.capacity["ephemeral-storage"] == 50 * GIB
    assert size.capacity[PRIVATE_IPV4_ADDRESS] == 9  # 10 IPv4 per ENI, minus the ENI's own
    assert size.allocatable["memory"] == size.capacity["memory"] - 1465 * MIB - 100 * MIB


def test_windows_ignores_the_cni_mode_but_honours_kubelet_settings(catalog: Catalog) -> None:
    it = catalog["m5.xlarge"]
    assert size_node(it, "windows2022", NetworkSettings(prefix_delegation=True)).max_pods == 110
    assert size_node(it, "windows2022", kubelet=KubeletSettings(max_pods=10)).max_pods == 10
    assert size_node(it, "windows2022", kubelet=KubeletSettings(max_pods=10)).kube_reserved["memory"] == 365 * MIB
    assert size_node(it, "windows2022", kubelet=KubeletSettings(pods_per_core=4)).max_pods == 16


def test_linux_families_offer_no_private_ipv4_resource(catalog: Catalog) -> None:
    for family in ("al2023", "bottlerocket", "al2", "custom"):
        assert PRIVATE_IPV4_ADDRESS not in size_node(catalog["m5.large"], family).capacity
