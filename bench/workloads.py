"""Benchmark inputs: Karpenter's synthetic catalog and pod mix, and large Deployments.

The synthetic catalog and the pod mix reproduce Karpenter's scheduling benchmark
(kubernetes-sigs/karpenter `scheduling_benchmark_test.go`, `fake.InstanceTypes`): instance type i has
i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, spot offerings in two zones and on-demand in three, priced
0.1 per vCPU + 0.1 per GB. Pods are split evenly between generic, zone spread, hostname spread, zone
self-affinity and hostname anti-affinity, with cpu from {100,250,500,1000,1500}m and memory from
{100,256,512,1024,2048,4096}Mi, drawn from a seeded generator so every run schedules the same batch.
"""

from __future__ import annotations

import random

from carpool import labels as L
from carpool.requirements import Requirements
from carpool.scheduling.inputs import (
    AffinityTerm,
    InstanceOption,
    LabelSelector,
    Offering,
    PodSpec,
    PoolSpec,
    TopologySpread,
)

GIB = 2**30
MIB = 2**20
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
CPUS = (100, 250, 500, 1000, 1500)
MEMORIES = (100, 256, 512, 1024, 2048, 4096)
LABEL_VALUES = "abcdefg"


def synthetic_types(count: int = 400) -> list[InstanceOption]:
    out = []
    for i in range(count):
        cpu = i + 1
        memory = 2 * cpu * GIB
        price = 0.1 * cpu + 0.1 * memory / 1e9
        offerings = [Offering(z, L.CAPACITY_SPOT, price) for z in ZONES[:2]]
        offerings += [Offering(z, L.CAPACITY_ON_DEMAND, price) for z in ZONES]
        name = f"fake-it-{i}"
        reqs = Requirements.from_labels({L.INSTANCE_TYPE: name, L.ARCH: "amd64", L.OS: "linux"})
        out.append(InstanceOption(name, reqs, {"cpu": cpu * 1000, "memory": memory, "pods": 10 * cpu}, tuple(offerings)))
    return out


def default_pool(types: list[InstanceOption], name: str = "default") -> PoolSpec:
    return PoolSpec(name, types)


def _requests(rng: random.Random) -> dict[str, int]:
    return {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES) * MIB}


def _labels(rng: random.Random, key: str = "my-label") -> dict[str, str]:
    return {key: rng.choice(LABEL_VALUES)}


def diverse_pods(count: int, seed: int = 42) -> list[PodSpec]:
    """Karpenter's benchmark mix: five kinds in equal parts (remainder generic)."""
    rng = random.Random(seed)
    per = count // 5
    pods: list[PodSpec] = []

    def add(kind: str, n: int, make) -> None:
        for i in range(n):
            pods.append(make(f"bench/{kind}-{i}"))

    add("generic", per, lambda k: PodSpec(k, _requests(rng), labels=_labels(rng)))
    for key, kind in ((L.ZONE, "zone-spread"), (L.HOSTNAME, "host-spread")):
        add(kind, per, lambda k, key=key: PodSpec(
            k, _requests(rng), labels=_labels(rng),
            spread=(TopologySpread(key, 1, selector=LabelSelector.of(_labels(rng))),),
        ))

    def self_affinity(k: str) -> PodSpec:
        lab = _labels(rng, "my-affinity")
        return PodSpec(k, _requests(rng), labels=lab, affinity=(AffinityTerm(L.ZONE, LabelSelector.of(lab)),))

    add("zone-affinity", per, self_affinity)
    nginx = {"app": "nginx"}
    add("host-anti", per, lambda k: PodSpec(
        k, _requests(rng), labels=nginx, anti_affinity=(AffinityTerm(L.HOSTNAME, LabelSelector.of(nginx)),),
    ))
    add("generic-rest", count - len(pods), lambda k: PodSpec(k, _requests(rng), labels=_labels(rng)))
    return pods


def generic_pods(count: int, seed: int = 7) -> list[PodSpec]:
    rng = random.Random(seed)
    return [PodSpec(f"bench/g-{i}", _requests(rng), labels=_labels(rng)) for i in range(count)]


def deployments(count: int = 50, replicas: int = 1000, seed: int = 3) -> list[PodSpec]:
    """`count` Deployments of `replicas` identical pods each, with varied sizes."""
    rng = random.Random(seed)
    pods = []
    for d in range(count):
        req = {"cpu": rng.choice((100, 250, 500, 1000, 2000)), "memory": rng.choice((128, 256, 512, 1024, 2048, 4096)) * MIB}
        labels = {"app": f"deploy-{d}"}
        for r in range(replicas):
            pods.append(PodSpec(f"bench/deploy-{d}-{r}", dict(req), labels=labels, owner=f"ReplicaSet/deploy-{d}"))
    return pods
