"""Instance-type labels and requirements match Karpenter's AWS provider (reference.md section 1)."""

from __future__ import annotations

import pytest

from carpool import labels as L
from carpool.catalog import Catalog
from carpool.catalog.builder import family_labels
from carpool.requirements import Requirements


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.snapshot()


def test_flex_type_labels(catalog: Catalog) -> None:
    labels = catalog["c7i-flex.large"].labels
    assert labels[L.INSTANCE_FAMILY] == "c7i-flex"
    assert labels[L.INSTANCE_CATEGORY] == "c"
    assert labels[L.INSTANCE_GENERATION] == "7"
    assert labels[L.INSTANCE_SIZE] == "large"
    assert labels[L.CAPABILITY_FLEX] == "true"
    assert labels[L.INSTANCE_CPU] == "2"
    assert labels[L.INSTANCE_MEMORY] == "4096"
    assert labels[L.INSTANCE_CPU_MANUFACTURER] == "intel"
    assert labels[L.INSTANCE_HYPERVISOR] == "nitro"
    assert labels[L.INSTANCE_TYPE] == "c7i-flex.large"
    assert labels[L.ARCH] == "amd64"
    assert labels[L.OS] == "linux"
    assert labels[L.REGION] == "us-east-1"


def test_non_flex_type_says_false(catalog: Catalog) -> None:
    assert catalog["c7i.large"].labels[L.CAPABILITY_FLEX] == "false"


def test_gpu_type_labels(catalog: Catalog) -> None:
    it = catalog["g4dn.xlarge"]
    assert it.labels[L.INSTANCE_GPU_COUNT] == "1"
    assert it.labels[L.INSTANCE_GPU_NAME] == "t4"
    assert it.labels[L.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert it.labels[L.INSTANCE_GPU_MEMORY] == "16384"
    assert it.labels[L.INSTANCE_LOCAL_NVME] == "125"
    assert (it.gpu_count, it.gpu_name, it.gpu_manufacturer) == (1, "t4", "nvidia")


def test_non_gpu_type_has_no_gpu_or_accelerator_labels(catalog: Catalog) -> None:
    labels = catalog["m5.large"].labels
    for key in (L.INSTANCE_GPU_COUNT, L.INSTANCE_GPU_NAME, L.INSTANCE_GPU_MANUFACTURER, L.INSTANCE_GPU_MEMORY,
                L.INSTANCE_ACCELERATOR_COUNT, L.INSTANCE_ACCELERATOR_NAME, L.INSTANCE_LOCAL_NVME):
        assert key not in labels


def test_arm64_type(catalog: Catalog) -> None:
    it = catalog["c6g.medium"]
    assert it.arch == "arm64"
    assert it.labels[L.ARCH] == "arm64"
    assert it.labels[L.INSTANCE_CPU_MANUFACTURER] == "aws"
    assert it.labels[L.INSTANCE_GENERATION] == "6"


def test_neuron_accelerator_labels(catalog: Catalog) -> None:
    inf2 = catalog["inf2.xlarge"]
    assert inf2.labels[L.INSTANCE_ACCELERATOR_NAME] == "inferentia2"
    assert inf2.labels[L.INSTANCE_ACCELERATOR_COUNT] == "1"
    assert catalog["trn1.2xlarge"].labels[L.INSTANCE_ACCELERATOR_NAME] == "trainium"
    assert catalog["trn1.32xlarge"].accelerator_count == 16


def test_bare_metal_has_empty_hypervisor_and_counts_as_nitro(catalog: Catalog) -> None:
    it = catalog["m5.metal"]
    assert it.labels[L.INSTANCE_HYPERVISOR] == ""
    assert it.bare_metal and it.nitro


def test_xen_type_is_not_nitro(catalog: Catalog) -> None:
    it = catalog["m4.large"]
    assert it.hypervisor == "xen" and not it.nitro


def test_network_bandwidth_label(catalog: Catalog) -> None:
    assert catalog["m5.large"].labels[L.INSTANCE_NETWORK_BANDWIDTH] == "750"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("u-6tb1.112xlarge", {"family": "u-6tb1", "category": "u", "generation": "1"}),
        ("u7i-12tb.224xlarge", {"family": "u7i-12tb", "category": "u", "generation": "7"}),
        ("mac2-m2.metal", {"family": "mac2-m2", "category": "mac", "generation": "2"}),
        ("p6-b200.48xlarge", {"family": "p6-b200", "category": "p", "generation": "6"}),
        ("m8i-flex.large", {"family": "m8i-flex", "category": "m", "generation": "8"}),
    ],
)
def test_family_category_generation(name: str, expected: dict[str, str]) -> None:
    out = family_labels(name)
    assert out[L.INSTANCE_FAMILY] == expected["family"]
    assert out[L.INSTANCE_CATEGORY] == expected["category"]
    assert out[L.INSTANCE_GENERATION] == expected["generation"]


def test_name_outside_the_scheme_gets_only_family_and_size() -> None:
    out = family_labels("bmn-sf1.metal")
    assert out[L.INSTANCE_FAMILY] == "bmn-sf1"
    assert L.INSTANCE_CATEGORY not in out and L.INSTANCE_GENERATION not in out


def test_requirements_are_labels_plus_zone_and_capacity_type(catalog: Catalog) -> None:
    it = catalog["m5.large"]
    for key, value in it.labels.items():
        req = it.requirements[key]
        assert req.operator == "In" and set(req.order) == {value}
    assert set(it.requirements[L.ZONE].order) == set(it.zones())
    assert set(it.requirements[L.CAPACITY_TYPE].order) == {"on-demand", "spot"}
    assert set(it.requirements) == set(it.labels) | {L.ZONE, L.CAPACITY_TYPE}


def test_requirements_select_like_a_nodepool(catalog: Catalog) -> None:
    wants_c_or_m_gen_6_plus = Requirements.from_specs([
        {"key": L.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m"]},
        {"key": L.INSTANCE_GENERATION, "operator": "Gt", "values": ["5"]},
        {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
    ])
    assert catalog["c7i-flex.large"].requirements.compatible(wants_c_or_m_gen_6_plus) is None
    assert catalog["m5.large"].requirements.compatible(wants_c_or_m_gen_6_plus) is not None
    assert catalog["r6i.large"].requirements.compatible(wants_c_or_m_gen_6_plus) is not None


def test_gpu_requirement_is_strictly_incompatible_with_non_gpu_type(catalog: Catalog) -> None:
    nvidia_ami = Requirements.from_specs([{"key": L.INSTANCE_GPU_COUNT, "operator": "Exists"}])
    standard_ami = Requirements.from_specs([{"key": L.INSTANCE_GPU_COUNT, "operator": "DoesNotExist"}])
    assert catalog["m5.large"].requirements.compatible(nvidia_ami) is not None
    assert catalog["g4dn.xlarge"].requirements.compatible(nvidia_ami) is None
    assert catalog["m5.large"].requirements.compatible(standard_ami) is None
