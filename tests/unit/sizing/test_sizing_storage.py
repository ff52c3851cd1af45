"""Ephemeral-storage capacity from the node class's volumes and instance store policy (Karpenter's
`ephemeralStorage`), and the pid reservation kept for the user data."""

from __future__ import annotations

import pytest

from carpool.api.nodeclass import EC2NodeClassSpec
from carpool.catalog import Catalog
from carpool.resources import EPHEMERAL_STORAGE
from carpool.sizing import KubeletSettings, NetworkSettings, StorageSettings, Volume, size_node

GIB, GB = 2**30, 10**9
CATALOG = Catalog.snapshot()


def spec(**extra: object) -> EC2NodeClassSpec:
    return EC2NodeClassSpec.model_validate({
        "role": "NodeRole", "subnetSelectorTerms": [{"tags": {"a": "b"}}],
        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}], "amiSelectorTerms": [{"alias": "al2023@latest"}],
        **extra})


def capacity(type_name: str, family: str, storage: StorageSettings) -> int:
    return size_node(CATALOG[type_name], family, storage=storage).capacity[EPHEMERAL_STORAGE]


def test_a_100gi_root_volume_is_the_ephemeral_capacity_and_30gi_fits() -> None:
    storage = StorageSettings.from_spec(spec(blockDeviceMappings=[
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}]))
    sized = size_node(CATALOG["m5.large"], "al2023", storage=storage)
    assert sized.capacity[EPHEMERAL_STORAGE] == 100 * GIB
    # allocatable = capacity - 1Gi kube-reserved - 10% nodefs eviction
    assert sized.allocatable[EPHEMERAL_STORAGE] == 100 * GIB - GIB - 10 * GIB
    assert sized.allocatable[EPHEMERAL_STORAGE] > 30 * GIB


def test_without_mappings_each_family_has_its_default_volume() -> None:
    assert capacity("m5.large", "al2023", StorageSettings()) == 20 * GIB
    assert capacity("m5.large", "bottlerocket", StorageSettings()) == 20 * GIB
    assert capacity("m5.large", "windows2022", StorageSettings()) == 50 * GIB


def test_the_family_ephemeral_device_counts_when_no_mapping_is_the_root_volume() -> None:
    volumes = (Volume("/dev/xvda", False, 8 * GIB), Volume("/dev/xvdb", False, 200 * GIB))
    assert capacity("m5.large", "bottlerocket", StorageSettings(volumes)) == 200 * GIB  # the data volume
    assert capacity("m5.large", "al2023", StorageSettings(volumes)) == 8 * GIB
    assert capacity("m5.large", "custom", StorageSettings(volumes)) == 200 * GIB  # the last one


def test_a_size_in_other_units_counts_as_the_whole_gib_the_volume_gets() -> None:
    storage = StorageSettings.from_spec(spec(blockDeviceMappings=[
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "50G"}}]))
    assert capacity("m5.large", "al2023", storage) == 47 * GIB  # 50e9 bytes -> 47 GiB on the template


def test_raid0_uses_the_instance_store_and_falls_back_to_the_root_volume_without_one() -> None:
    storage = StorageSettings.from_spec(spec(instanceStorePolicy="RAID0", blockDeviceMappings=[
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi"}}]))
    assert capacity("m5d.large", "al2023", storage) == 75 * GB
    assert capacity("i4i.large", "al2023", storage) == 468 * GB
    assert capacity("m5.large", "al2023", storage) == 100 * GIB  # no instance store


def test_pid_reservations_are_kept_for_the_user_data_and_shrink_nothing() -> None:
    kubelet = KubeletSettings(kube_reserved={"pid": "2k"}, system_reserved={"pid": "1000"})
    sized = size_node(CATALOG["m5.large"], "al2023", NetworkSettings(), kubelet)
    assert sized.kube_reserved["pid"] == 2000 and sized.system_reserved["pid"] == 1000
    assert set(sized.allocatable) == set(sized.capacity)


def test_a_reservation_of_something_the_kubelet_cannot_reserve_is_refused() -> None:
    with pytest.raises(ValueError, match="kubelet.kubeReserved.gpu"):
        size_node(CATALOG["m5.large"], "al2023", kubelet=KubeletSettings(kube_reserved={"gpu": "1"}))
