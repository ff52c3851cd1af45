"""`publishAmi` steps: what a release registers and which parameters it moves, and how a bad one is
reported (at load time, naming the step and the field)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from carpool.sim.run.scenario import ScenarioError, parse_scenario

K = "1.32"
AL2023_X86 = f"/aws/service/eks/optimized-ami/{K}/amazon-linux-2023/x86_64/standard/recommended/image_id"
AL2023_ARM = f"/aws/service/eks/optimized-ami/{K}/amazon-linux-2023/arm64/standard/recommended/image_id"
BR_X86 = f"/aws/service/bottlerocket/aws-k8s-{K}/x86_64/latest/image_id"
AT = datetime(2025, 1, 6, 9, 5, tzinfo=UTC)


def _scenario(publish: dict[str, Any], amis: list[dict[str, Any]] | None = None) -> Any:
    amis = amis if amis is not None else [
        {"parameter": AL2023_X86, "name": f"amazon-eks-node-al2023-x86_64-standard-{K}-v20241215", "id": "ami-0old"},
        {"parameter": AL2023_ARM, "name": f"amazon-eks-node-al2023-arm64-standard-{K}-v20241215",
         "architecture": "arm64", "tags": {"team": "x"}},
    ]
    return parse_scenario({"cluster": {"version": K}, "amis": amis,
                           "workload": [{"at": 300, "publishAmi": publish}]}, "s.yaml")


def test_a_release_replaces_each_image_the_alias_resolves_through() -> None:
    sc = _scenario({"alias": "al2023", "version": "v20250301"})
    step = sc.workload[0]
    assert step.action == "publish_ami"
    releases = step.publish_ami.releases(sc.amis, K, AT)
    assert [r.image["name"] for r in releases] == [
        f"amazon-eks-node-al2023-x86_64-standard-{K}-v20250301", f"amazon-eks-node-al2023-arm64-standard-{K}-v20250301"]
    # a new image (its id comes from its name), made now, otherwise like the one it follows
    assert "id" not in releases[0].image and "parameter" not in releases[0].image
    assert releases[0].image["creationDate"] == AT.isoformat()
    assert releases[1].image["architecture"] == "arm64" and releases[1].image["tags"] == {"team": "x"}
    # `@latest` moves to it, and the release's own parameter (al2023@v20250301) is created
    assert releases[0].parameters == (
        AL2023_X86,
        f"/aws/service/eks/optimized-ami/{K}/amazon-linux-2023/x86_64/standard/"
        f"amazon-eks-node-al2023-x86_64-standard-{K}-v20250301/image_id")


def test_bottlerocket_releases_and_a_given_creation_date() -> None:
    sc = _scenario({"alias": "bottlerocket@latest", "version": "v1.33.0", "creationDate": "2025-03-01T00:00:00Z"},
                   [{"parameter": BR_X86, "name": f"bottlerocket-aws-k8s-{K}-x86_64-v1.31.0-aa1b2c3d"}])
    [release] = sc.workload[0].publish_ami.releases(sc.amis, K, AT)
    assert release.image["name"] == f"bottlerocket-aws-k8s-{K}-x86_64-v1.33.0-aa1b2c3d"
    assert release.image["creationDate"] == "2025-03-01T00:00:00Z"
    assert release.parameters == (BR_X86, f"/aws/service/bottlerocket/aws-k8s-{K}/x86_64/1.33.0/image_id")


@pytest.mark.parametrize(("publish", "message"), [
    ({"alias": "windows2022", "version": "v20250301"}, r"publishAmi\.alias: 'windows2022': publishAmi "
                                                      r"publishes a release of al2023, al2, bottlerocket"),
    ({"alias": "al2023@v20240101", "version": "v20250301"}, r"publishAmi\.alias: .*published under @latest"),
    ({"alias": "al2023", "version": "1.33.0"}, r"publishAmi: .*version '1\.33\.0': al2023 releases are written "
                                              r"like v20250301"),
    ({"alias": "al2023"}, r"publishAmi\.version: Field required"),
    ({"alias": "al2023", "version": "v20250301", "date": "x"}, r"publishAmi\.date: Extra inputs"),
])
def test_a_bad_release_names_its_field(publish: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        _scenario(publish)


def test_a_release_of_a_family_the_scenario_has_no_image_of_is_refused_at_load() -> None:
    with pytest.raises(ScenarioError, match=r"workload step at 300s: publishAmi bottlerocket: no AMI of the "
                                            r"scenario's `amis` is published under bottlerocket@latest"):
        _scenario({"alias": "bottlerocket", "version": "v1.33.0"})


def test_an_image_name_without_a_release_is_refused_at_load() -> None:
    with pytest.raises(ScenarioError, match=r"AMI name 'al2023-x86' shows no release to replace"):
        _scenario({"alias": "al2023", "version": "v20250301"}, [{"parameter": AL2023_X86, "name": "al2023-x86"}])


def test_the_step_error_lists_every_action() -> None:
    with pytest.raises(ScenarioError, match="exactly one of apply, scale, delete, spotInterruption, healthEvent, "
                                            "publishAmi"):
        parse_scenario({"workload": [{"at": 0}]})
