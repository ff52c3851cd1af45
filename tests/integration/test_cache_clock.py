"""The production wiring on local AWS, its clock swapped as the simulation swaps it: a NodePool edited in
the cluster (`kubectl apply`) is read `CONFIG_RECHECK_SECONDS` of that clock later, and a new AMI release
300 s later (the config and AMI caches keep time by `deps.clock`, not by the wall clock)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from carpool_env import AL2023_X86, MakeDeps, apply_config, manifests, nodeclass, nodepool

from carpool.app import images
from carpool.app.cluster_config_source import CONFIG_RECHECK_SECONDS
from carpool.sim.localaws.server import LocalAws

REQUIREMENTS = {"node.kubernetes.io/instance-type": ["m5.large"], "karpenter.sh/capacity-type": ["on-demand"]}
CONFIG = manifests(nodepool(requirements=REQUIREMENTS), nodeclass())
EDITED = manifests(nodepool(requirements={**REQUIREMENTS, "node.kubernetes.io/instance-type": ["c5.large"]}),
                   nodeclass())


def _advance(deps: Any, seconds: float) -> None:
    deps.clock.now += timedelta(seconds=seconds)


def _types(deps: Any) -> list[str]:
    pool = deps.config.load().nodepools[0]
    return sorted(pool.requirements()["node.kubernetes.io/instance-type"].values)


def _image(deps: Any) -> str:
    [ami] = [a for a in images.resolve(deps.config.load().nodeclasses[0], deps) if a.arch == "amd64" and a.variant == "standard"]
    return ami.id


def test_an_edited_nodepool_is_read_seconds_of_the_clock_later(make_deps: MakeDeps) -> None:
    deps = make_deps(CONFIG)
    assert _types(deps) == ["m5.large"]
    apply_config(deps.cluster, EDITED)
    _advance(deps, CONFIG_RECHECK_SECONDS - 1)
    assert _types(deps) == ["m5.large"]
    _advance(deps, 1)
    assert _types(deps) == ["c5.large"]


def test_a_new_ami_release_is_resolved_five_minutes_of_the_clock_later(make_deps: MakeDeps, aws: LocalAws) -> None:
    deps = make_deps(CONFIG)
    before = _image(deps)
    [after] = aws.seed_amis([{**AL2023_X86, "name": "al2023-x86-next", "creationDate": "2026-02-01T00:00:00Z"}])
    assert after != before
    _advance(deps, 299)
    assert _image(deps) == before
    _advance(deps, 1)
    assert _image(deps) == after
