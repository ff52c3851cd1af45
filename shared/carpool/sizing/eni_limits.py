"""ENIs the VPC CNI can use for pods, where the instance catalog's network cards disagree with the EKS tooling.

The VPC CNI (`pkg/vpc/vpc_ip_resource_limit.go`), nodeadm (`internal/kubelet/instance-info.jsonl`) and the
published eni-max-pods.txt all read one table generated from EC2, and they consult it before any live
DescribeInstanceTypes answer: that table decides how many ENIs ipamd attaches and what max pods nodeadm
writes. For the types below, the shipped catalog snapshot splits the interfaces over two network cards
(8 + 7, 12 + 12) where that table lists a single default card with all of them, so the default-card rule
alone would give 394/590 pods where every EKS node of the type runs 737/1178.
"""

from __future__ import annotations

from typing import Final

from carpool.catalog.instance_type import InstanceType

#: instance type -> ENIs on the default network card, as the VPC CNI / nodeadm tables list them.
EKS_DEFAULT_CARD_ENIS: Final = {
    "i7ie.48xlarge": 15,
    "i7ie.metal-48xl": 15,
    "i8ge.48xlarge": 24,
    "i8ge.metal-48xl": 24,
}


def default_card_enis(it: InstanceType) -> int:
    """ENIs of the default network card as the VPC CNI counts them (its table first, then EC2's answer)."""
    return EKS_DEFAULT_CARD_ENIS.get(it.name, it.max_enis)
