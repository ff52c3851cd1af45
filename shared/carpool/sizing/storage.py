"""How much ephemeral storage a node will have: its root (or data) volume, or its RAID0 instance store.

Karpenter's `ephemeralStorage` (pkg/providers/instancetype/types.go), in its order:
1. `instanceStorePolicy: RAID0` on a type with instance store: the store's total size (DescribeInstanceTypes
   `TotalSizeInGB`, decimal gigabytes): nodeadm, bootstrap.sh and Bottlerocket put the kubelet's and
   containerd's directories on the array;
2. the `blockDeviceMappings` entry marked `rootVolume`;
3. a custom image: the last mapping (carpool cannot know which volume it uses);
4. the mapping on the family's ephemeral device (`AmiFamily.ephemeral_device`: the root volume, but
   Bottlerocket's data volume);
5. the family's default mapping (`AmiFamily.default_ephemeral_gib`).

A volume size is whole GiB on the launch template (rounded up), so it is counted the same way here.
One difference from Karpenter: only an NVMe instance store counts (the catalog's `instance-local-nvme`).
nodeadm's and bootstrap.sh's RAID0 and Bottlerocket's `apiclient ephemeral-storage init` assemble the NVMe
instance-store disks only, so on an older type with a SATA/HDD store the kubelet stays on the root volume.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from carpool import labels as L
from carpool import quantity
from carpool.amifamily import AmiFamily
from carpool.catalog.instance_type import InstanceType

GIB = 2**30
GB = 10**9
RAID0 = "RAID0"


@dataclass(frozen=True, slots=True)
class Volume:
    """One `blockDeviceMappings` entry as sizing sees it (size in bytes, whole GiB; None: a snapshot's)."""

    device_name: str | None
    root_volume: bool
    size_bytes: int | None


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """The EC2NodeClass fields that decide a node's ephemeral storage (hashable: sizes are cached by it)."""

    volumes: tuple[Volume, ...] = ()
    instance_store_policy: str | None = None

    @classmethod
    def from_spec(cls, spec: Any | None) -> StorageSettings:
        """From an `EC2NodeClass.spec` (or anything with `block_device_mappings`/`instance_store_policy`)."""
        if spec is None:
            return cls()
        volumes = tuple(Volume(getattr(m, "device_name", None), bool(getattr(m, "root_volume", False)), _size(m))
                        for m in getattr(spec, "block_device_mappings", None) or ())
        return cls(volumes, getattr(spec, "instance_store_policy", None))


def instance_store_bytes(it: InstanceType) -> int | None:
    """The NVMe instance store of `it` in bytes (the catalog's `instance-local-nvme`, in GB), or None."""
    raw = it.labels.get(L.INSTANCE_LOCAL_NVME)
    return int(raw) * GB if raw and raw.isdigit() and int(raw) > 0 else None


def ephemeral_storage_bytes(it: InstanceType, family: AmiFamily, storage: StorageSettings) -> int:
    """The ephemeral-storage capacity a node of `it` will report (see the module docstring)."""
    if storage.instance_store_policy == RAID0:
        store = instance_store_bytes(it)
        if store is not None:
            return store
    default_bytes = family.default_ephemeral_gib * GIB
    volumes = storage.volumes
    if volumes:
        root = next((v for v in volumes if v.root_volume), None)
        if root is not None and root.size_bytes is not None:
            return root.size_bytes
        if family.ephemeral_device is None:  # a custom image: its volume layout is unknown
            last = volumes[-1].size_bytes
            return last if last is not None else default_bytes
        on_device = next((v for v in volumes if v.device_name == family.ephemeral_device), None)
        if on_device is not None and on_device.size_bytes is not None:
            return on_device.size_bytes
    return default_bytes


def _size(mapping: Any) -> int | None:
    ebs = getattr(mapping, "ebs", None) if mapping is not None else None
    raw = getattr(ebs, "volume_size", None) if ebs is not None else None
    if raw is None:
        return None
    return math.ceil(quantity.to_int(raw) / GIB) * GIB
