"""Fixtures: the Bottlerocket 1.32 image set that triggered the seed bug, and a small instance-type fleet."""

from __future__ import annotations

import pytest
from stand_ins import InstanceType, K, image, itype

from carpool.amis import InMemoryAmiSource

BR = "/aws/service/bottlerocket"


@pytest.fixture
def bottlerocket_source() -> InMemoryAmiSource:
    """bottlerocket@latest for 1.32: four images; the nvidia ones are the newest (a "newest first" or
    "first listed" choice would hand them to every type)."""
    return InMemoryAmiSource(
        images=[
            image("ami-nv-x86", "bottlerocket-aws-k8s-1.32-nvidia-x86_64-v1.32.0", created="2025-03-02T00:00:00Z"),
            image("ami-nv-arm", "bottlerocket-aws-k8s-1.32-nvidia-aarch64-v1.32.0", "arm64", "2025-03-02T00:00:00Z"),
            image("ami-std-x86", "bottlerocket-aws-k8s-1.32-x86_64-v1.32.0", created="2025-03-01T00:00:00Z"),
            image("ami-std-arm", "bottlerocket-aws-k8s-1.32-aarch64-v1.32.0", "arm64", "2025-03-01T00:00:00Z"),
        ],
        parameters={
            f"{BR}/aws-k8s-{K}/x86_64/latest/image_id": "ami-std-x86",
            f"{BR}/aws-k8s-{K}/arm64/latest/image_id": "ami-std-arm",
            f"{BR}/aws-k8s-{K}-nvidia/x86_64/latest/image_id": "ami-nv-x86",
            f"{BR}/aws-k8s-{K}-nvidia/arm64/latest/image_id": "ami-nv-arm",
        },
    )


@pytest.fixture
def fleet_types() -> dict[str, InstanceType]:
    return {
        t.name: t
        for t in (
            itype("m5.large"),
            itype("m6g.large", "arm64"),
            itype("g5.xlarge", gpus=1),
            itype("g5g.xlarge", "arm64", gpus=1),
            itype("inf2.xlarge", accelerators=1),
            itype("trn1.2xlarge", accelerators=1),
        )
    }
