"""Max pods: ENI limits (against the published EKS table), prefix delegation, custom networking, caps,
overrides, and the small-instance guard (reference.md section 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from carpool import labels as L
from carpool.catalog import Catalog, InstanceType
from carpool.sizing import (
    KubeletSettings,
    NetworkSettings,
    NodeSize,
    eni_limited_pods,
    memory_guard_limit,
    network_settings,
    prefix_delegation_ips,
    prefix_delegation_pods,
    size_node,
)

ENI_TABLE = Path(__file__).resolve().parents[2] / "data" / "eni-max-pods.txt"
PD = NetworkSettings(prefix_delegation=True)

#: Types whose published value differs from the default-network-card formula, and why.
#: The table's own header says multi-card types are computed against card 0, and the VPC CNI attaches pod
#: ENIs on the default card only; for these four the table counts both cards (15 = 8 + 7 and 24 = 12 + 12
#: ENIs). Same-generation multi-card siblings (c8gn.48xlarge 590 = 12 ENIs, c6in.32xlarge 394 = 8 ENIs)
#: follow the default-card rule, so we keep it and list the exceptions here.
TABLE_COUNTS_ALL_CARDS = {
    "i7ie.48xlarge": (394, 737),
    "i7ie.metal-48xl": (394, 737),
    "i8ge.48xlarge": (590, 1178),
    "i8ge.metal-48xl": (590, 1178),
}


def published() -> dict[str, int]:
    table = {}
    for line in ENI_TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, pods = line.split()
            table[name] = int(pods)
    return table


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.snapshot()


def size(
    it: InstanceType, network: NetworkSettings | None = None, kubelet: KubeletSettings | None = None, ami: str = "al2023"
) -> NodeSize:
    return size_node(it, ami, network or NetworkSettings(), kubelet or KubeletSettings())


# -- the published table ---------------------------------------------------------------------------------
def test_eni_limited_pods_match_the_published_eks_table(catalog: Catalog) -> None:
    table = published()
    common = sorted(set(table) & set(catalog))
    assert len(common) > 900  # the comparison must cover the catalog, not a handful of types
    mismatches = {
        name: (eni_limited_pods(catalog[name]), table[name])
        for name in common
        if name not in TABLE_COUNTS_ALL_CARDS and eni_limited_pods(catalog[name]) != table[name]
    }
    assert mismatches == {}


def test_documented_exceptions_still_differ_as_documented(catalog: Catalog) -> None:
    """If moto's data or the table changes, the exception list must be revisited (not silently kept)."""
    table = published()
    for name, (ours, theirs) in TABLE_COUNTS_ALL_CARDS.items():
        assert (eni_limited_pods(catalog[name]), table[name]) == (ours, theirs)


def test_table_file_is_the_published_one() -> None:
    text = ENI_TABLE.read_text()
    assert text.startswith("# Copyright Amazon.com Inc.")
    assert "# of ENI * (# of IPv4 per ENI - 1) + 2" in text


@pytest.mark.parametrize(("name", "pods"), [("m5.large", 29), ("c6g.medium", 8), ("t3.micro", 4), ("m5.24xlarge", 737)])
def test_eni_limited_examples(catalog: Catalog, name: str, pods: int) -> None:
    assert eni_limited_pods(catalog[name]) == pods
    assert size(catalog[name]).max_pods == pods
    assert size(catalog[name]).eni_limited_pods == pods


# -- prefix delegation -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "pods"), [("m5.large", 110), ("c6g.medium", 98), ("m5.24xlarge", 250)])
def test_prefix_delegation_formula_with_eks_cap(catalog: Catalog, name: str, pods: int) -> None:
    assert prefix_delegation_pods(catalog[name]) == pods


def test_prefix_delegation_raw_ip_count(catalog: Catalog) -> None:
    assert prefix_delegation_ips(catalog["m5.large"]) == 3 * (9 * 16) + 2
    assert prefix_delegation_ips(catalog["c6g.medium"]) == 98


def test_prefix_delegation_through_size_node(catalog: Catalog) -> None:
    m5 = size(catalog["m5.large"], PD)
    assert (m5.max_pods, m5.eni_limited_pods) == (110, 29)
    assert any("capped at the EKS recommended 110" in n for n in m5.notes)
    assert size(catalog["m5.24xlarge"], PD).max_pods == 250


def test_eks_cap_can_be_below_eni_limited_and_says_so(catalog: Catalog) -> None:
    sized = size(catalog["m5.4xlarge"], PD)  # 16 vCPUs: EKS recommends 110 under prefix delegation
    assert (sized.max_pods, sized.eni_limited_pods) == (110, 234)
    assert any("below the 234 ENI-limited pods" in n for n in sized.notes)


def test_small_instance_guard_caps_prefix_delegation(catalog: Catalog) -> None:
    it = catalog["c6g.medium"]
    sized = size(it, PD)
    # 1835Mi capacity; 25% = 458.75Mi; (458.75 - 255) / 11 = 18.5 -> 18 pods
    assert sized.max_pods == 18 == memory_guard_limit(1835)
    assert sized.allocatable["pods"] == 18
    guard = [n for n in sized.notes if n.startswith("small-instance guard")]
    assert guard and "98" in guard[0] and "25%" in guard[0]


def test_guard_can_be_loosened(catalog: Catalog) -> None:
    sized = size_node(catalog["c6g.medium"], "al2023", PD, pod_overhead_share=1.0)
    assert sized.max_pods == 98
    assert not any(n.startswith("small-instance guard") for n in sized.notes)


def test_guard_never_goes_below_eni_limited(catalog: Catalog) -> None:
    sized = size(catalog["t3.micro"], PD)  # 947Mi: 25% is less than the 255Mi base
    assert sized.max_pods == 4
    assert any("never below the ENI-limited count" in n for n in sized.notes)


def test_guard_does_not_bind_on_8_gib(catalog: Catalog) -> None:
    assert size(catalog["t3.large"], PD).max_pods == 110


def test_non_nitro_ignores_prefix_delegation_with_a_note(catalog: Catalog) -> None:
    sized = size(catalog["m4.large"], PD)
    assert sized.max_pods == 20
    assert any(n.startswith("non-Nitro") and "prefix delegation ignored" in n for n in sized.notes)


def test_bare_metal_supports_prefix_delegation(catalog: Catalog) -> None:
    assert size(catalog["m5.metal"], PD).max_pods == 250


# -- custom networking, reserved ENIs ---------------------------------------------------------------------
def test_custom_networking_uses_one_eni_fewer(catalog: Catalog) -> None:
    sized = size(catalog["m5.large"], NetworkSettings(custom_networking=True))
    assert (sized.max_pods, sized.eni_limited_pods) == (20, 20)
    assert any("custom networking" in n for n in sized.notes)


def test_custom_networking_with_prefix_delegation(catalog: Catalog) -> None:
    network = NetworkSettings(prefix_delegation=True, custom_networking=True)
    assert prefix_delegation_ips(catalog["c6g.medium"], network) == 1 * (3 * 16) + 2
    assert prefix_delegation_pods(catalog["m5.large"], network) == 110


def test_reserved_enis(catalog: Catalog) -> None:
    assert size(catalog["m5.large"], NetworkSettings(reserved_enis=1)).max_pods == 20
    none_left = size(catalog["m5.large"], NetworkSettings(reserved_enis=3))
    assert none_left.max_pods == 0
    assert any("no ENI is left" in n for n in none_left.notes)


def test_negative_reserved_enis_rejected() -> None:
    with pytest.raises(ValueError, match="reserved_enis"):
        NetworkSettings(reserved_enis=-1)


# -- kubelet overrides ------------------------------------------------------------------------------------
def test_max_pods_override_wins(catalog: Catalog) -> None:
    sized = size(catalog["m5.large"], PD, KubeletSettings(max_pods=58))
    assert sized.max_pods == 58
    assert any("kubelet.maxPods=58 overrides the computed 110" in n for n in sized.notes)
    assert not any("exceeds" in n for n in sized.notes)


def test_max_pods_override_beyond_pod_ips_warns(catalog: Catalog) -> None:
    sized = size(catalog["m5.large"], kubelet=KubeletSettings(max_pods=110))
    assert sized.max_pods == 110
    assert any("exceeds the 29 pod IPs" in n for n in sized.notes)


def test_pods_per_core_caps(catalog: Catalog) -> None:
    sized = size(catalog["m5.large"], PD, KubeletSettings(pods_per_core=10))
    assert sized.max_pods == 20
    assert any("podsPerCore=10" in n for n in sized.notes)
    assert size(catalog["m5.large"], kubelet=KubeletSettings(pods_per_core=100)).max_pods == 29


def test_pods_per_core_also_caps_an_override(catalog: Catalog) -> None:
    assert size(catalog["m5.large"], kubelet=KubeletSettings(max_pods=50, pods_per_core=4)).max_pods == 8


def test_pods_per_core_not_on_bottlerocket(catalog: Catalog) -> None:
    sized = size(catalog["m5.large"], kubelet=KubeletSettings(pods_per_core=10), ami="bottlerocket")
    assert sized.max_pods == 29
    assert any("podsPerCore ignored" in n for n in sized.notes)


def test_negative_kubelet_values_rejected() -> None:
    with pytest.raises(ValueError, match="kubelet.maxPods"):
        KubeletSettings(max_pods=-1)


# -- Windows -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["windows", "windows2022", "Windows2019"])
def test_windows_is_110(catalog: Catalog, family: str) -> None:
    assert size(catalog["m5.large"], ami=family).max_pods == 110
    assert size(catalog["t3.micro"], ami=family).max_pods == 110


def test_windows_ignores_cni_settings_with_a_note(catalog: Catalog) -> None:
    sized = size(catalog["m5.large"], PD, ami="windows2022")
    assert sized.max_pods == 110
    assert any("kubelet default 110" in n for n in sized.notes)


def test_windows_pods_per_core(catalog: Catalog) -> None:
    assert size(catalog["m5.large"], kubelet=KubeletSettings(pods_per_core=5), ami="windows").max_pods == 10


# -- detection helper --------------------------------------------------------------------------------------
def test_network_settings_from_cni_env() -> None:
    env = {"ENABLE_PREFIX_DELEGATION": "true", "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "false"}
    assert network_settings(env, {}) == NetworkSettings(prefix_delegation=True, custom_networking=False)
    assert network_settings({"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "TRUE"}, {}).custom_networking
    assert network_settings({}, {}) == NetworkSettings()
    assert not network_settings({"ENABLE_PREFIX_DELEGATION": "maybe"}, {}).prefix_delegation


def test_annotation_wins_over_cni_env() -> None:
    env = {"ENABLE_PREFIX_DELEGATION": "true"}
    assert not network_settings(env, {L.PREFIX_DELEGATION: "false"}).prefix_delegation
    assert network_settings({}, {L.CUSTOM_NETWORKING: "true"}).custom_networking
    assert network_settings({}, {}, reserved_enis=2).reserved_enis == 2


def test_invalid_annotation_names_it() -> None:
    with pytest.raises(ValueError, match="carpool.dev/prefix-delegation"):
        network_settings({}, {L.PREFIX_DELEGATION: "yes please"})
