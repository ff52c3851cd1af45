"""Max pods: ENI limits (against the published EKS table), prefix delegation (against AWS's
max-pods-calculator.sh), custom networking, caps and overrides (reference.md section 3).

tests/data/max-pods-calculator.sh is awslabs/amazon-eks-ami's templates/al2023/runtime/max-pods-calculator.sh
(commit a92d9fdeadcc26a22e8ab719bb486dea7d66ccc7), byte for byte. tests/data/max-pods-prefix-delegation.txt is
its output with `--cni-prefix-delegation-enabled --cni-version 1.19.0` for every type of the shipped
catalog, the DescribeInstanceTypes answer coming from the catalog (regenerate with
CARPOOL_UPDATE_CALCULATOR_TABLE=1, which runs the script once per type and takes minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from carpool import labels as L
from carpool.catalog import Catalog, InstanceType
from carpool.sizing import (
    KubeletSettings,
    NetworkSettings,
    NodeSize,
    eni_limited_pods,
    network_settings,
    prefix_delegation_ips,
    prefix_delegation_pods,
    size_node,
)
from carpool.sizing.eni_limits import default_card_enis

DATA = Path(__file__).resolve().parents[2] / "data"
ENI_TABLE = DATA / "eni-max-pods.txt"
CALCULATOR = DATA / "max-pods-calculator.sh"
CALCULATOR_TABLE = DATA / "max-pods-prefix-delegation.txt"
CALCULATOR_ARGS = ("--cni-version", "1.19.0", "--cni-prefix-delegation-enabled")
PD = NetworkSettings(prefix_delegation=True)
MIB = 2**20

#: Multi-card types whose catalog snapshot splits the interfaces over two cards (8 + 7, 12 + 12) while the
#: EKS tooling (VPC CNI table, nodeadm's instance-info, this table) lists one default card with all of them.
CATALOG_SPLITS_ONE_CARD = {
    "i7ie.48xlarge": (15, 737),
    "i7ie.metal-48xl": (15, 737),
    "i8ge.48xlarge": (24, 1178),
    "i8ge.metal-48xl": (24, 1178),
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
        if eni_limited_pods(catalog[name]) != table[name]
    }
    assert mismatches == {}


@pytest.mark.parametrize(("name", "enis_and_pods"), sorted(CATALOG_SPLITS_ONE_CARD.items()))
def test_split_card_types_use_every_interface_the_eks_tooling_lists(
    catalog: Catalog, name: str, enis_and_pods: tuple[int, int]
) -> None:
    enis, pods = enis_and_pods
    it = catalog[name]
    assert it.max_enis < enis  # the snapshot's default card holds only part of them
    assert default_card_enis(it) == enis
    assert size(it).max_pods == published()[name] == pods
    # custom networking and reserved ENIs count from the full default card too
    assert eni_limited_pods(it, NetworkSettings(custom_networking=True)) == (enis - 1) * 49 + 2
    assert eni_limited_pods(it, NetworkSettings(reserved_enis=2)) == (enis - 2) * 49 + 2


def test_every_override_is_needed(catalog: Catalog) -> None:
    """An override the catalog already agrees with (or a type it lacks) is stale and must go."""
    from carpool.sizing.eni_limits import EKS_DEFAULT_CARD_ENIS

    for name, enis in EKS_DEFAULT_CARD_ENIS.items():
        assert name in catalog and catalog[name].max_enis != enis


def test_table_file_is_the_published_one() -> None:
    text = ENI_TABLE.read_text()
    assert text.startswith("# Copyright Amazon.com Inc.")
    assert "# of ENI * (# of IPv4 per ENI - 1) + 2" in text


@pytest.mark.parametrize(("name", "pods"), [("m5.large", 29), ("c6g.medium", 8), ("t3.micro", 4), ("m5.24xlarge", 737)])
def test_eni_limited_examples(catalog: Catalog, name: str, pods: int) -> None:
    assert eni_limited_pods(catalog[name]) == pods
    assert size(catalog[name]).max_pods == pods
    assert size(catalog[name]).eni_limited_pods == pods


# -- prefix delegation: AWS's max-pods-calculator.sh ------------------------------------------------------
def describe_instance_type(it: InstanceType) -> dict[str, object]:
    """The fields of `aws ec2 describe-instance-types --query ...` that the calculator reads."""
    return {
        "Hypervisor": it.hypervisor or None,  # bare metal has none: EC2 omits the field
        "CpuCount": it.vcpus,
        "NetworkInfo": {
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [{"MaximumNetworkInterfaces": it.max_enis}],
            "Ipv4AddressesPerInterface": it.ipv4_per_eni,
        },
    }


def run_calculator(types: Iterable[InstanceType], workdir: Path) -> dict[str, int]:
    """Run the real script per type, with an `aws` on PATH that answers from the catalog."""
    answers = workdir / "answers"
    answers.mkdir(exist_ok=True)
    aws = workdir / "aws"
    aws.write_text('#!/bin/bash\nexec cat "$FAKE_EC2_ANSWERS/$4.json"\n')  # aws ec2 describe-instance-types --instance-type NAME
    aws.chmod(0o755)
    env = {**os.environ, "PATH": f"{workdir}:{os.environ['PATH']}", "FAKE_EC2_ANSWERS": str(answers)}
    out = {}
    for it in types:
        (answers / f"{it.name}.json").write_text(json.dumps(describe_instance_type(it)))
        done = subprocess.run(
            ["bash", str(CALCULATOR), "--instance-type", it.name, *CALCULATOR_ARGS],
            capture_output=True, text=True, env=env, check=True, timeout=60,
        )
        out[it.name] = int(done.stdout.strip())
    return out


def calculator_table(catalog: Catalog, tmp_path: Path) -> dict[str, int]:
    if os.environ.get("CARPOOL_UPDATE_CALCULATOR_TABLE"):
        values = run_calculator((catalog[n] for n in sorted(catalog)), tmp_path)
        header = (
            "# max-pods-calculator.sh --cni-version 1.19.0 --cni-prefix-delegation-enabled, per instance type of\n"
            "# carpool's catalog snapshot (DescribeInstanceTypes answered from it). Generated by\n"
            "# tests/unit/sizing/test_sizing_max_pods.py with CARPOOL_UPDATE_CALCULATOR_TABLE=1.\n"
        )
        CALCULATOR_TABLE.write_text(header + "".join(f"{n} {v}\n" for n, v in values.items()))
    table = {}
    for line in CALCULATOR_TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, pods = line.split()
            table[name] = int(pods)
    return table


@pytest.mark.parametrize(("name", "pods"), [("t3.nano", 34), ("t3.medium", 110), ("c6g.medium", 98), ("m5.24xlarge", 250)])
def test_prefix_delegation_equals_the_calculator(catalog: Catalog, name: str, pods: int) -> None:
    assert prefix_delegation_pods(catalog[name]) == pods
    assert size(catalog[name], PD).max_pods == pods


@pytest.mark.parametrize(
    ("name", "pods", "why"),
    [
        ("t3.micro", 34, "2 ENIs x (2 - 1) x 16 + 2, under the 110 cap"),
        ("t4g.nano", 34, "arm64 like amd64"),
        ("t3.small", 110, "146 prefix IPs capped at 110 (2 vCPUs)"),
        ("m5.large", 110, "434 prefix IPs capped at 110"),
        ("m5.4xlarge", 110, "16 vCPUs: capped at 110 though the ENI-limited count is 234"),
        ("c5.9xlarge", 250, "36 vCPUs: the 250 cap"),
        ("m5.metal", 250, "bare metal (no Hypervisor field): 737 secondary IPs capped at 250"),
        ("a1.metal", 110, "bare metal, 16 vCPUs: 234 secondary IPs capped at 110"),
        ("m4.large", 20, "Xen: secondary IPs, 20 is under the cap"),
        ("c4.4xlarge", 110, "Xen, 16 vCPUs: 234 secondary IPs capped at 110"),
        ("c4.8xlarge", 234, "Xen, 36 vCPUs: 234 secondary IPs under the 250 cap"),
        ("i3.16xlarge", 250, "Xen, 64 vCPUs: 737 secondary IPs capped at 250"),
    ],
)
def test_calculator_rules_table(catalog: Catalog, name: str, pods: int, why: str) -> None:
    assert size(catalog[name], PD).max_pods == pods, why


def test_every_catalog_type_matches_the_calculators_table(catalog: Catalog, tmp_path: Path) -> None:
    table = calculator_table(catalog, tmp_path)
    assert len(table) == len(catalog) > 1000
    mismatches = {n: (size(catalog[n], PD).max_pods, v) for n, v in table.items() if size(catalog[n], PD).max_pods != v}
    assert mismatches == {}


@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("bash") is None, reason="the calculator needs bash and jq")
def test_the_real_calculator_agrees_on_a_sample(catalog: Catalog, tmp_path: Path) -> None:
    names = ["t3.nano", "c6g.medium", "m5.4xlarge", "m5.24xlarge", "a1.metal", "c4.4xlarge", "i3.16xlarge"]
    expected = run_calculator((catalog[n] for n in names), tmp_path)
    assert {n: prefix_delegation_pods(catalog[n]) for n in names} == expected
    assert expected == {n: v for n, v in calculator_table(catalog, tmp_path).items() if n in names}


def test_prefix_delegation_raw_ip_count(catalog: Catalog) -> None:
    assert prefix_delegation_ips(catalog["m5.large"]) == 3 * (9 * 16) + 2
    assert prefix_delegation_ips(catalog["c6g.medium"]) == 98


def test_prefix_delegation_through_size_node(catalog: Catalog) -> None:
    m5 = size(catalog["m5.large"], PD)
    assert (m5.max_pods, m5.eni_limited_pods) == (110, 29)
    assert any("capped at the EKS recommended 110" in n for n in m5.notes)


def test_eks_cap_can_be_below_eni_limited_and_says_so(catalog: Catalog) -> None:
    sized = size(catalog["m5.4xlarge"], PD)  # 16 vCPUs: EKS recommends 110 under prefix delegation
    assert (sized.max_pods, sized.eni_limited_pods) == (110, 234)
    assert any("below the 234 ENI-limited pods" in n for n in sized.notes)


def test_no_memory_based_limit_kube_reserved_pays_instead(catalog: Catalog) -> None:
    """c6g.medium keeps the calculator's 98 pods; their reservation (255 + 11 x 98 = 1333Mi) leaves
    1835 - 1333 - 100 = 402Mi allocatable, and the notes say where the memory went."""
    sized = size(catalog["c6g.medium"], PD)
    assert sized.max_pods == sized.allocatable["pods"] == 98
    assert sized.kube_reserved["memory"] == 1333 * MIB
    assert sized.allocatable["memory"] == 402 * MIB
    [note] = [n for n in sized.notes if n.startswith("kube-reserved memory")]
    assert "1333Mi = 255Mi + 11Mi x 98 max pods" in note and "402Mi of 1835Mi" in note and "small type" in note


def test_tiny_type_can_be_left_without_memory(catalog: Catalog) -> None:
    """t3.nano: 34 pods reserve 629Mi of its 473Mi; honest allocatable is 0 (nothing with memory fits)."""
    sized = size(catalog["t3.nano"], PD)
    assert (sized.max_pods, sized.allocatable["memory"]) == (34, 0)
    assert any("reservations exceed memory capacity" in n for n in sized.notes)


def test_non_nitro_ignores_prefix_delegation_with_a_note(catalog: Catalog) -> None:
    sized = size(catalog["m4.large"], PD)
    assert sized.max_pods == 20
    assert any(n.startswith("non-Nitro") and "prefix delegation ignored" in n for n in sized.notes)
    capped = size(catalog["i3.16xlarge"], PD)
    assert capped.max_pods == 250
    assert any("the 737 ENI-limited pods capped at the EKS recommended 250" in n for n in capped.notes)


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
