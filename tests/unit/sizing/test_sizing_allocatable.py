"""Capacity, kube-reserved, system-reserved, eviction and allocatable (reference.md section 3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carpool.catalog import Catalog, InstanceType
from carpool.quantity import MIB
from carpool.resources import CPU, EPHEMERAL_STORAGE, GPU_NVIDIA, MEMORY, NEURON, PODS
from carpool.sizing import (
    KubeletSettings,
    LearnedCapacity,
    NetworkSettings,
    NodeSize,
    kube_reserved,
    kube_reserved_cpu_millis,
    kube_reserved_memory_mib,
    memory_capacity_mib,
    prefix_delegation_cap,
    size_node,
)
from carpool.sizing.reserved import BASE_RESERVED_MIB, MIB_PER_POD

GIB = 2**30
CATALOG = Catalog.snapshot()
PD = NetworkSettings(prefix_delegation=True)


def mib(value: int) -> int:
    return value // MIB


def test_m5_large_al2023_acceptance() -> None:
    sized = size_node(CATALOG["m5.large"], "al2023", NetworkSettings(), KubeletSettings())
    assert sized.allocatable[CPU] == 1930
    assert sized.allocatable[MEMORY] == 6903 * MIB
    assert sized.allocatable[PODS] == 29
    assert sized.capacity[MEMORY] == 7577 * MIB
    assert sized.kube_reserved == {CPU: 70, MEMORY: 574 * MIB, EPHEMERAL_STORAGE: GIB}
    assert sized.system_reserved == {}
    assert sized.eviction == {MEMORY: 100 * MIB, EPHEMERAL_STORAGE: 2 * GIB}
    assert sized.allocatable[EPHEMERAL_STORAGE] == 17 * GIB
    assert sized.notes == ()


def test_defaults_match_the_design_signature() -> None:
    assert size_node(CATALOG["m5.large"]) == size_node(CATALOG["m5.large"], "al2023", NetworkSettings(), KubeletSettings())


@pytest.mark.parametrize(("name", "expected"), [("m5.large", 7577), ("c6g.medium", 1835), ("t3.micro", 947)])
def test_memory_capacity_estimate(name: str, expected: int) -> None:
    # c6g.medium is arm64: (2048 - 64) - ceil(1984 * 0.075) = 1984 - 149
    assert memory_capacity_mib(CATALOG[name]) == expected


def test_vm_overhead_is_configurable() -> None:
    assert memory_capacity_mib(CATALOG["m5.large"], 0.0) == 8192
    sized = size_node(CATALOG["m5.large"], vm_memory_overhead=0.0)
    assert mib(sized.allocatable[MEMORY]) == 8192 - 574 - 100
    with pytest.raises(ValueError, match="vm_memory_overhead"):
        memory_capacity_mib(CATALOG["m5.large"], 1.5)


@pytest.mark.parametrize(("vcpus", "millis"), [(1, 60), (2, 70), (3, 75), (4, 80), (8, 90), (96, 310)])
def test_kube_reserved_cpu_bands(vcpus: int, millis: int) -> None:
    assert kube_reserved_cpu_millis(vcpus) == millis


def test_kube_reserved_memory_formula() -> None:
    assert kube_reserved_memory_mib(29) == 574
    assert kube_reserved_memory_mib(110) == 1465


@pytest.mark.parametrize("family", ["al2023", "al2", "bottlerocket"])
def test_kube_reserved_memory_follows_the_max_pods_the_user_data_sets(family: str) -> None:
    """Not the AMI's own count: nodeadm and bootstrap.sh would reserve for the 29 ENI-limited pods, but the
    user data states the reservation for the 110 it configures."""
    sized = size_node(CATALOG["m5.large"], family, PD)
    assert sized.max_pods == 110
    assert sized.kube_reserved == {CPU: 70, MEMORY: 1465 * MIB, EPHEMERAL_STORAGE: GIB}
    assert mib(sized.allocatable[MEMORY]) == 7577 - 1465 - 100
    assert any("kube-reserved memory 1465Mi = 255Mi + 11Mi x 110 max pods, as the user data states" in n
               for n in sized.notes)


def test_families_agree_on_reservations() -> None:
    sizes = [size_node(CATALOG["c6g.medium"], family, PD) for family in ("al2023", "al2", "bottlerocket")]
    assert sizes[0].kube_reserved == sizes[1].kube_reserved == sizes[2].kube_reserved
    assert sizes[0].allocatable == sizes[1].allocatable == sizes[2].allocatable


def test_no_note_when_max_pods_is_the_eni_limited_count() -> None:
    assert size_node(CATALOG["m5.large"], "al2023").notes == ()


@pytest.mark.parametrize("family", ["al2023", "bottlerocket"])
def test_custom_networking_reserves_for_its_max_pods(family: str) -> None:
    sized = size_node(CATALOG["m5.large"], family, NetworkSettings(custom_networking=True))
    assert sized.max_pods == 20
    assert mib(sized.kube_reserved[MEMORY]) == 11 * 20 + 255


def test_max_pods_override_sets_the_reservation() -> None:
    sized = size_node(CATALOG["m5.large"], "al2023", PD, KubeletSettings(max_pods=58))
    assert sized.max_pods == 58
    assert mib(sized.kube_reserved[MEMORY]) == 11 * 58 + 255


def test_pods_per_core_sets_the_reservation() -> None:
    sized = size_node(CATALOG["m5.large"], "al2023", PD, KubeletSettings(pods_per_core=10))
    assert sized.max_pods == 20
    assert mib(sized.kube_reserved[MEMORY]) == 11 * 20 + 255


def test_user_kube_reserved_wins_over_the_max_pods_formula() -> None:
    kubelet = KubeletSettings(kube_reserved={"memory": "600Mi"})
    sized = size_node(CATALOG["c6g.medium"], "al2023", PD, kubelet)
    assert sized.max_pods == 98
    assert sized.kube_reserved == {CPU: 60, MEMORY: 600 * MIB, EPHEMERAL_STORAGE: GIB}
    assert mib(sized.allocatable[MEMORY]) == 1835 - 600 - 100
    assert any("kubeReserved.memory=600Mi replaces the default 1333Mi" in n for n in sized.notes)
    assert not any(n.startswith("kube-reserved memory") for n in sized.notes)


def test_learned_pods_set_the_reservation() -> None:
    sized = size_node(CATALOG["m5.large"], learned=LearnedCapacity(memory_bytes=7450 * MIB, pods=35))
    assert sized.max_pods == 35
    assert mib(sized.kube_reserved[MEMORY]) == 11 * 35 + 255


def test_kube_reserved_is_one_function() -> None:
    notes: list[str] = []
    sized = size_node(CATALOG["m5.xlarge"], "al2023", PD, KubeletSettings(kube_reserved={"cpu": "1"}))
    assert kube_reserved(4, 110, {"cpu": "1"}, notes) == sized.kube_reserved == {
        CPU: 1000, MEMORY: 1465 * MIB, EPHEMERAL_STORAGE: GIB,
    }


def test_windows_sizing() -> None:
    sized = size_node(CATALOG["m5.large"], "windows2022")
    assert sized.max_pods == 110
    assert mib(sized.kube_reserved[MEMORY]) == 1465
    assert sized.capacity[EPHEMERAL_STORAGE] == 50 * GIB


def test_windows_on_arm64_is_flagged() -> None:
    assert any("amd64-only" in n for n in size_node(CATALOG["c6g.medium"], "windows").notes)


def test_unknown_ami_family_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown AMI family 'ubuntu'"):
        size_node(CATALOG["m5.large"], "ubuntu")


def test_user_reservations_override_per_resource() -> None:
    kubelet = KubeletSettings(
        kube_reserved={"cpu": "200m", "memory": "1Gi"},
        system_reserved={"cpu": "100m", "memory": "200Mi", "pid": "1000"},
        eviction_hard={"memory.available": "500Mi", "nodefs.available": "5%", "nodefs.inodesFree": "5%"},
    )
    sized = size_node(CATALOG["m5.large"], "al2023", NetworkSettings(), kubelet)
    assert sized.kube_reserved == {CPU: 200, MEMORY: GIB, EPHEMERAL_STORAGE: GIB}
    # pid is kept for the user data (the kubelet holds the pids back) and shrinks no schedulable resource
    assert sized.system_reserved == {CPU: 100, MEMORY: 200 * MIB, "pid": 1000}
    assert "pid" not in sized.allocatable
    assert sized.eviction[MEMORY] == 500 * MIB
    assert sized.eviction[EPHEMERAL_STORAGE] == 1073741824  # 5% of 20Gi
    assert sized.allocatable[CPU] == 2000 - 200 - 100
    assert mib(sized.allocatable[MEMORY]) == 7577 - 1024 - 200 - 500
    assert any("kubeReserved.memory=1Gi replaces the default 574Mi" in n for n in sized.notes)
    assert any("systemReserved.pid=1000 reserved" in n for n in sized.notes)


def test_eviction_percent_of_memory_and_disabling() -> None:
    kubelet = KubeletSettings(eviction_hard={"memory.available": "10%", "nodefs.available": "100%"})
    sized = size_node(CATALOG["m5.large"], "al2023", NetworkSettings(), kubelet)
    assert sized.eviction[MEMORY] == -(-7577 * MIB // 10)  # ceil(10% of capacity)
    assert sized.eviction[EPHEMERAL_STORAGE] == 0


@pytest.mark.parametrize(
    ("kubelet", "field"),
    [
        (KubeletSettings(kube_reserved={"memory": "lots"}), "kubelet.kubeReserved.memory"),
        (KubeletSettings(system_reserved={"cpu": "-1"}), "kubelet.systemReserved.cpu"),
        (KubeletSettings(eviction_hard={"memory.available": "abc%"}), "kubelet.evictionHard.memory.available"),
        (KubeletSettings(eviction_hard={"nodefs.available": "150%"}), "kubelet.evictionHard.nodefs.available"),
    ],
)
def test_bad_quantities_name_the_field(kubelet: KubeletSettings, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        size_node(CATALOG["m5.large"], "al2023", NetworkSettings(), kubelet)


def test_allocatable_never_negative() -> None:
    sized = size_node(CATALOG["t3.micro"], "al2023", NetworkSettings(), KubeletSettings(kube_reserved={"memory": "4Gi"}))
    assert sized.allocatable[MEMORY] == 0
    assert any("reservations exceed memory capacity" in n for n in sized.notes)


def test_learned_capacity_replaces_the_estimate() -> None:
    learned = LearnedCapacity(memory_bytes=7450 * MIB)
    sized = size_node(CATALOG["m5.large"], learned=learned)
    assert sized.capacity[MEMORY] == 7450 * MIB
    assert mib(sized.allocatable[MEMORY]) == 7450 - 574 - 100
    assert any("learned from a registered node" in n and "7577Mi" in n for n in sized.notes)


def test_learned_capacity_optional_fields() -> None:
    learned = LearnedCapacity(memory_bytes=7450 * MIB, cpu_millis=1990, pods=35, ephemeral_storage_bytes=19 * GIB)
    sized = size_node(CATALOG["m5.large"], learned=learned)
    assert sized.capacity[CPU] == 1990
    assert sized.capacity[PODS] == sized.max_pods == 35
    assert sized.capacity[EPHEMERAL_STORAGE] == 19 * GIB


def test_ephemeral_volume_size() -> None:
    sized = size_node(CATALOG["m5.large"], ephemeral_storage_bytes=100 * GIB)
    assert sized.capacity[EPHEMERAL_STORAGE] == 100 * GIB
    assert sized.eviction[EPHEMERAL_STORAGE] == 10 * GIB


def test_devices_are_capacity() -> None:
    assert size_node(CATALOG["g4dn.xlarge"]).allocatable[GPU_NVIDIA] == 1
    assert size_node(CATALOG["p4d.24xlarge"]).allocatable[GPU_NVIDIA] == 8
    assert size_node(CATALOG["inf2.xlarge"]).allocatable[NEURON] == 1
    assert GPU_NVIDIA not in size_node(CATALOG["m5.large"]).capacity


# -- properties over the whole catalog ------------------------------------------------------------------
TYPES = sorted(CATALOG)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(TYPES),
    family=st.sampled_from(["al2023", "al2", "bottlerocket", "windows", "custom"]),
    prefix=st.booleans(),
    custom=st.booleans(),
    reserved=st.integers(0, 2),
)
def test_allocatable_within_capacity(name: str, family: str, prefix: bool, custom: bool, reserved: int) -> None:
    it: InstanceType = CATALOG[name]
    sized: NodeSize = size_node(it, family, NetworkSettings(prefix, custom, reserved))
    assert sized.max_pods >= 0
    for resource, value in sized.allocatable.items():
        assert 0 <= value <= sized.capacity[resource]
    assert sized.capacity[PODS] == sized.allocatable[PODS] == sized.max_pods


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(TYPES), custom=st.booleans())
def test_prefix_delegation_only_loses_pods_to_the_eks_cap(name: str, custom: bool) -> None:
    it = CATALOG[name]
    eni = size_node(it, "al2023", NetworkSettings(custom_networking=custom))
    pd = size_node(it, "al2023", NetworkSettings(prefix_delegation=True, custom_networking=custom))
    assert pd.max_pods >= min(eni.max_pods, prefix_delegation_cap(it.vcpus))
    assert pd.max_pods <= max(prefix_delegation_cap(it.vcpus), 0)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(TYPES),
    family=st.sampled_from(["al2023", "al2", "bottlerocket", "custom", "windows"]),
    prefix=st.booleans(),
    max_pods=st.none() | st.integers(0, 300),
)
def test_kube_reserved_memory_is_always_the_max_pods_formula(
    name: str, family: str, prefix: bool, max_pods: int | None
) -> None:
    sized = size_node(CATALOG[name], family, NetworkSettings(prefix_delegation=prefix), KubeletSettings(max_pods=max_pods))
    assert sized.kube_reserved[MEMORY] == (MIB_PER_POD * sized.max_pods + BASE_RESERVED_MIB) * MIB
    assert sized.kube_reserved[CPU] == kube_reserved_cpu_millis(CATALOG[name].vcpus)
