"""Instance profiles for `spec.role`: names, path, tags and garbage collection (Karpenter's
`pkg/providers/instanceprofile` and its garbage collector, with a derived name)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from carpool import labels
from carpool.launch.profiles import (
    GRACE,
    ExistingProfile,
    profile_name,
    profile_path,
    profiles_to_delete,
    request_for,
    unnamed_since,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_name_is_stable_per_region_nodeclass_and_role() -> None:
    name = profile_name("demo", "us-east-1", "gpu", "team-a")
    assert name == profile_name("demo", "us-east-1", "gpu", "team-a")
    assert name.startswith("demo_") and len(name) == len("demo_") + 16
    others = {profile_name("demo", "us-east-1", "gpu", "team-b"), profile_name("demo", "us-east-1", "cpu", "team-a"),
              profile_name("demo", "eu-west-1", "gpu", "team-a")}
    assert name not in others and len(others) == 3


def test_name_fits_iam_for_the_longest_cluster_name() -> None:
    assert len(profile_name("c" * 100, "us-east-1", "gpu", "r")) <= 128


def test_request_carries_karpenters_tags_carpools_ownership_and_the_bare_role() -> None:
    request = request_for("demo", "us-east-1", "gpu", "teams/team-a", {"team": "a"})
    assert request.path == profile_path("demo", "us-east-1") == "/carpool/us-east-1/demo/"
    assert request.role == "team-a"  # AddRoleToInstanceProfile takes no path
    assert request.tags == {
        "team": "a",
        "kubernetes.io/cluster/demo": "owned",
        labels.TAG_MANAGED_BY: "demo",
        "eks:eks-cluster-name": "demo",
        labels.TAG_NODECLASS: "gpu",
        labels.REGION: "us-east-1",
    }


def test_user_tags_cannot_overwrite_the_ownership_tags() -> None:
    request = request_for("demo", "us-east-1", "gpu", "r", {labels.TAG_MANAGED_BY: "other"})
    assert request.tags[labels.TAG_MANAGED_BY] == "demo"


def test_a_profile_is_deleted_once_unnamed_and_unused_for_the_grace_period() -> None:
    old = NOW - GRACE - timedelta(days=1)
    existing = [
        ExistingProfile("current", ("r",), old),
        ExistingProfile("in-use", ("r",), old),
        ExistingProfile("young", ("r",), NOW - timedelta(minutes=1)),
        ExistingProfile("stale-b", (), old),
        ExistingProfile("stale-a", ("r",), old),
    ]
    first = unnamed_since(existing, {"current"}, {"in-use"}, NOW, {})
    assert first == {"young": NOW, "stale-a": NOW, "stale-b": NOW}
    assert profiles_to_delete(existing, first, NOW) == []  # only just unnamed: a function may still launch with it
    later = NOW + GRACE
    second = unnamed_since(existing, {"current"}, {"in-use", "stale-b"}, later, first)
    assert second == {"young": NOW, "stale-a": NOW}  # stale-b is used again: its clock restarts
    assert profiles_to_delete(existing, second, later) == ["stale-a", "young"]
    assert profiles_to_delete(existing, second, later - timedelta(seconds=1)) == []
