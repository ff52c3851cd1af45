"""Windows node classes: the alias SSM paths (2019, 2022, 2025), the EKS versions each family exists for,
the os/build requirements their images carry, and the per-family view of catalog types (os=windows plus
the windows-build label on amd64, no OS on arm64), following Karpenter's AWS provider."""

from __future__ import annotations

import pytest
from stand_ins import NOW, Term, image, nodeclass

from carpool import labels as L
from carpool.amis import (
    WINDOWS_BUILDS,
    AmiSelectionError,
    InMemoryAmiSource,
    alias_paths,
    parse_alias,
    resolve,
)
from carpool.amis.mapping import map_instance_types
from carpool.amis.node_os import for_family
from carpool.amis.offline import placeholder_amis
from carpool.catalog import Catalog
from carpool.requirements import Requirements

WIN = "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}/image_id"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.snapshot()


@pytest.mark.parametrize(("family", "year", "k"), [("windows2019", "2019", "1.32"), ("windows2022", "2022", "1.32"),
                                                   ("windows2025", "2025", "1.35")])
def test_each_windows_alias_has_one_amd64_core_path(family: str, year: str, k: str) -> None:
    (path,) = alias_paths(parse_alias(f"{family}@latest"), k)
    assert path.path == WIN.format(year=year, k=k)
    assert path.arch == "amd64"


def test_windows_aliases_take_only_latest() -> None:
    with pytest.raises(AmiSelectionError, match="only @latest"):
        parse_alias("windows2025@v1")


@pytest.mark.parametrize(("alias", "k", "message"), [
    ("windows2025@latest", "1.34", "requires EKS version 1.35 or higher"),
    ("al2@latest", "1.33", "no longer supported on EKS 1.33"),
    ("al2@latest", "1.34", "no longer supported on EKS 1.33"),
])
def test_families_eks_does_not_publish_for_the_version_are_refused(alias: str, k: str, message: str) -> None:
    with pytest.raises(AmiSelectionError, match=message):
        alias_paths(parse_alias(alias), k)


@pytest.mark.parametrize(("alias", "k"), [("al2@latest", "1.32"), ("al2023@latest", "1.33"), ("windows2025@latest", "1.35")])
def test_the_supported_versions_resolve(alias: str, k: str) -> None:
    assert alias_paths(parse_alias(alias), k)


@pytest.mark.parametrize("family", sorted(WINDOWS_BUILDS))
def test_a_windows_image_requires_windows_and_its_build(family: str) -> None:
    k = "1.35"
    year = family.removeprefix("windows")
    source = InMemoryAmiSource(images=[image("ami-win", f"Windows_Server-{year}-English-Core-EKS_Optimized-{k}")],
                               parameters={WIN.format(year=year, k=k): "ami-win"})
    (ami,) = resolve(nodeclass(Term(alias=f"{family}@latest")), k, source, now=NOW)
    assert ami.requirements.satisfied_by({L.ARCH: "amd64", L.OS: "windows", L.WINDOWS_BUILD: WINDOWS_BUILDS[family]}) is None
    assert ami.requirements.satisfied_by({L.ARCH: "amd64", L.OS: "linux"}) is not None
    assert ami.requirements.satisfied_by({L.ARCH: "amd64", L.OS: "windows", L.WINDOWS_BUILD: "10.0.1"}) is not None


def test_a_linux_family_leaves_catalog_types_alone(catalog: Catalog) -> None:
    it = catalog["m5.large"]
    assert for_family(it, "al2023") is it and for_family(it, "bottlerocket") is it
    assert it.labels[L.OS] == "linux" and L.WINDOWS_BUILD not in it.labels


def test_a_windows_family_relabels_amd64_types(catalog: Catalog) -> None:
    view = for_family(catalog["m5.large"], "windows2022")
    assert view.labels[L.OS] == "windows" and view.labels[L.WINDOWS_BUILD] == "10.0.20348"
    assert view.requirements.compatible(Requirements.from_labels({L.OS: "windows"})) is None
    assert view.requirements.compatible(Requirements.from_labels({L.OS: "linux"})) is not None
    assert view.requirements.compatible(Requirements.from_labels({"beta.kubernetes.io/os": "windows"})) is None
    assert for_family(catalog["m5.large"], "windows2022") is view  # cached per catalog type
    assert catalog["m5.large"].labels[L.OS] == "linux"  # the shared catalog type is not touched


def test_arm64_types_have_no_os_under_a_windows_family(catalog: Catalog) -> None:
    view = for_family(catalog["m6g.large"], "windows2019")
    assert L.OS not in view.labels and L.WINDOWS_BUILD not in view.labels
    assert view.requirements.compatible(Requirements.from_labels({L.OS: "linux"})) is not None


def test_only_amd64_types_map_to_an_offline_windows_image(catalog: Catalog) -> None:
    amis = placeholder_amis(nodeclass(Term(alias="windows2025@latest")))  # offline: no version gate
    views = [for_family(catalog[n], "windows2025") for n in ("m5.large", "m6g.large", "c7i.xlarge")]
    assert sorted(map_instance_types(amis, views)) == ["c7i.xlarge", "m5.large"]
    linux = [catalog[n] for n in ("m5.large", "c7i.xlarge")]
    assert map_instance_types(amis, linux) == {}


def test_al2023_does_not_boot_a1_types(catalog: Catalog) -> None:
    from carpool.amis.node_os import compatible

    assert not compatible(catalog["a1.medium"], "al2023")
    assert compatible(catalog["a1.medium"], "bottlerocket") and compatible(catalog["a1.medium"], "custom")
    assert compatible(catalog["m6g.medium"], "al2023")
