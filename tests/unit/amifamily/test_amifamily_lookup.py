"""`carpool.amifamily`: every family the EC2NodeClass API names has one home, found by either spelling,
and each fact it holds is the value the modules that ask for it used to keep themselves."""

from __future__ import annotations

from typing import get_args

import pytest

from carpool import amifamily
from carpool.amifamily import (
    AL2,
    AL2023,
    BOTTLEROCKET,
    CUSTOM,
    FAMILIES,
    WINDOWS2019,
    WINDOWS2022,
    WINDOWS2025,
    AmiFamily,
    UnknownAmiFamily,
    family_named,
    family_of_kind,
    find_family,
)
from carpool.amifamily.family import (
    BOOTSTRAP_SH,
    BOTTLEROCKET_TOML,
    NODEADM,
    POWERSHELL,
    VERBATIM,
)
from carpool.api.nodeclass import ALIAS_FAMILIES, AmiFamilyName
from carpool.launch.templates import default_block_device_mappings
from carpool.sizing import sizing_family

WINDOWS = (WINDOWS2019, WINDOWS2022, WINDOWS2025)


def test_every_family_the_api_names_has_a_home() -> None:
    names = get_args(AmiFamilyName)
    assert {family_named(name).api_name for name in names} == set(names)
    assert {f.api_name for f in FAMILIES} == set(names)
    assert ALIAS_FAMILIES == {"al2023": "AL2023", "al2": "AL2", "bottlerocket": "Bottlerocket",
                              "windows2019": "Windows2019", "windows2022": "Windows2022", "windows2025": "Windows2025"}
    assert list(ALIAS_FAMILIES) == [f.name for f in amifamily.ALIAS_FAMILIES]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_a_family_is_found_by_either_spelling(family: AmiFamily) -> None:
    assert family_named(family.name) is family
    assert family_named(family.api_name) is family
    assert find_family(family.api_name.upper()) is family
    assert family.name == family.api_name.lower()


def test_an_unknown_name_is_no_family() -> None:
    assert find_family("ubuntu") is None
    assert find_family("windows") is None  # sizing's kind, not a family
    with pytest.raises(UnknownAmiFamily, match="unknown AMI family 'ubuntu'"):
        family_named("ubuntu")
    assert issubclass(UnknownAmiFamily, ValueError)


def test_user_data_formats() -> None:
    assert [AL2023.user_data, AL2.user_data, BOTTLEROCKET.user_data, CUSTOM.user_data] == [
        NODEADM, BOOTSTRAP_SH, BOTTLEROCKET_TOML, VERBATIM]
    assert all(w.user_data == POWERSHELL for w in WINDOWS)
    assert [f.name for f in FAMILIES if not f.carpool_user_data] == ["custom"]


def test_sizing_flags_are_karpenters() -> None:
    assert [f.name for f in FAMILIES if not f.pods_per_core] == ["bottlerocket"]
    assert [f.name for f in FAMILIES if not f.eni_pod_density] == ["windows2019", "windows2022", "windows2025"]
    assert [f.name for f in FAMILIES if not f.reserves_pids] == ["bottlerocket"]
    assert [f.name for f in FAMILIES if not f.many_cluster_dns] == ["windows2019", "windows2022", "windows2025"]
    assert [f.name for f in FAMILIES if not f.instance_store_raid0] == ["windows2019", "windows2022", "windows2025"]


def test_volumes_and_pod_storage() -> None:
    """20Gi root volumes, Bottlerocket's 4Gi OS volume beside a 20Gi data volume, Windows' 50Gi."""
    assert default_block_device_mappings("al2023") == default_block_device_mappings("al2") == (
        {"DeviceName": "/dev/xvda",
         "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}},)
    assert default_block_device_mappings("custom") == default_block_device_mappings("al2023")
    assert [(m["DeviceName"], m["Ebs"]["VolumeSize"]) for m in default_block_device_mappings("bottlerocket")] == [
        ("/dev/xvda", 4), ("/dev/xvdb", 20)]
    for w in WINDOWS:
        assert [(m["DeviceName"], m["Ebs"]["VolumeSize"]) for m in default_block_device_mappings(w.name)] == [
            ("/dev/sda1", 50)]
    assert {f.name: (f.ephemeral_device, f.default_ephemeral_gib) for f in FAMILIES} == {
        "al2023": ("/dev/xvda", 20), "al2": ("/dev/xvda", 20), "bottlerocket": ("/dev/xvdb", 20),
        "windows2019": ("/dev/sda1", 50), "windows2022": ("/dev/sda1", 50), "windows2025": ("/dev/sda1", 50),
        "custom": (None, 20)}


def test_os_builds_and_types() -> None:
    assert {f.name: f.windows_build for f in WINDOWS} == {
        "windows2019": "10.0.17763", "windows2022": "10.0.20348", "windows2025": "10.0.26100"}
    assert all(f.node_os == "windows" and f.windows and f.latest_only for f in WINDOWS)
    assert all(f.node_os == "linux" and f.windows_build is None for f in FAMILIES if f not in WINDOWS)
    assert [f.name for f in FAMILIES if f.unsupported_types] == ["al2023"]
    assert AL2023.unsupported_types == ("a1.",)


def test_kubernetes_versions_each_family_is_published_for() -> None:
    assert AL2.version_problem("al2@latest", "1.32", 32) is None
    assert AL2.version_problem("al2@latest", "1.33", 33) == (
        "alias al2@latest: AL2 aliases are no longer supported on EKS 1.33+ (cluster version 1.33); "
        "use al2023 or bottlerocket")
    assert WINDOWS2025.version_problem("windows2025@latest", "1.35", 35) is None
    assert WINDOWS2025.version_problem("windows2025@latest", "1.34", 34) == (
        "alias windows2025@latest: Windows Server 2025 requires EKS version 1.35 or higher, current version: 1.34")
    assert all(f.version_problem(f"{f.name}@latest", "1.20", 20) is None for f in FAMILIES if f is not WINDOWS2025)


def test_alias_paths_per_family() -> None:
    assert [len(f.alias_paths("1.32", "latest")) for f in FAMILIES] == [5, 3, 4, 1, 1, 1, 0]
    assert [f.name for f in FAMILIES if not f.alias] == ["custom"]
    assert WINDOWS2022.alias_paths("1.32", "latest")[0].path == (
        "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id")
    assert {f.name: f.ssm_root for f in FAMILIES} == {
        "al2023": "/aws/service/eks/", "al2": "/aws/service/eks/", "bottlerocket": "/aws/service/bottlerocket/",
        "windows2019": "/aws/service/ami-windows-latest/", "windows2022": "/aws/service/ami-windows-latest/",
        "windows2025": "/aws/service/ami-windows-latest/", "custom": ""}
    assert all(p.path.startswith(f.ssm_root) for f in FAMILIES for p in f.alias_paths("1.32", "latest"))


def test_sizing_kinds() -> None:
    """Sizing takes a family or its kind: every Windows Server version (and the CLI's bare `windows`) sizes alike."""
    assert {f.kind for f in FAMILIES} == {"al2023", "al2", "bottlerocket", "windows", "custom"}
    for name in ("windows", "Windows2019", "windows2025", " WINDOWS "):
        assert sizing_family(name).kind == "windows"
    assert sizing_family(" AL2023 ") is AL2023
    assert sizing_family(BOTTLEROCKET) is BOTTLEROCKET
    assert family_of_kind("windows") in WINDOWS
    with pytest.raises(ValueError, match=r"unknown AMI family 'ubuntu' \(expected one of al2, al2023, bottlerocket, "
                                         r"custom, windows\)"):
        sizing_family("ubuntu")
