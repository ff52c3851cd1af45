"""Deprecated label keys mean their well-known successors (Karpenter's NormalizedLabels): a pod or NodePool
written against `beta.kubernetes.io/arch` or `failure-domain.beta.kubernetes.io/zone` selects the same
instance types and nodes as one using the stable key."""

from __future__ import annotations

import pytest

from carpool import labels as L
from carpool.catalog import Catalog
from carpool.requirements import Requirement, Requirements

DEPRECATED = [
    ("beta.kubernetes.io/arch", L.ARCH, "arm64"),
    ("beta.kubernetes.io/os", L.OS, "linux"),
    ("beta.kubernetes.io/instance-type", L.INSTANCE_TYPE, "m6g.large"),
    ("failure-domain.beta.kubernetes.io/zone", L.ZONE, "us-east-1a"),
    ("failure-domain.beta.kubernetes.io/region", L.REGION, "us-east-1"),
    ("topology.ebs.csi.aws.com/zone", L.ZONE, "us-east-1a"),
]


@pytest.mark.parametrize(("old", "new", "value"), DEPRECATED)
def test_a_deprecated_key_becomes_the_well_known_key(old: str, new: str, value: str) -> None:
    assert Requirement.of(old, "In", [value]).key == new
    assert Requirements.from_labels({old: value}) == Requirements.from_labels({new: value})
    assert list(Requirements.from_specs([{"key": old, "operator": "NotIn", "values": [value]}])) == [new]


def test_both_spellings_in_one_selector_intersect() -> None:
    reqs = Requirements.from_labels({"beta.kubernetes.io/arch": "arm64", L.ARCH: "arm64"})
    assert list(reqs) == [L.ARCH] and reqs[L.ARCH].has("arm64")
    clash = Requirements.from_labels({"beta.kubernetes.io/arch": "arm64", L.ARCH: "amd64"})
    assert clash[L.ARCH].is_empty()


def test_unrelated_keys_are_left_alone() -> None:
    for key in ("kubernetes.io/instance-type", "example.com/arch", L.HOSTNAME):
        assert Requirement.of(key, "Exists").key == key


def test_a_deprecated_selector_matches_catalog_types() -> None:
    catalog = Catalog.snapshot()
    it = catalog["m6g.large"]
    pod = Requirements.from_labels({"beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/instance-type": "m6g.large"})
    assert it.requirements.compatible(pod) is None
    amd = Requirements.from_labels({"beta.kubernetes.io/arch": "amd64"})
    assert it.requirements.compatible(amd) is not None


def test_a_node_carrying_only_one_spelling_satisfies_either() -> None:
    stable_only = {L.ZONE: "us-east-1a", L.ARCH: "amd64"}
    legacy_only = {"failure-domain.beta.kubernetes.io/zone": "us-east-1a", "beta.kubernetes.io/arch": "amd64"}
    for node in (stable_only, legacy_only):
        assert Requirements.from_labels({"failure-domain.beta.kubernetes.io/zone": "us-east-1a"}).satisfied_by(node) is None
        assert Requirements.from_labels({L.ARCH: "amd64"}).satisfied_by(node) is None
        assert Requirements.from_labels({L.ARCH: "arm64"}).satisfied_by(node) is not None


def test_every_alias_points_at_a_well_known_key() -> None:
    assert set(L.NORMALIZED.values()) <= L.WELL_KNOWN
