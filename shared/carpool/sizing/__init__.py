"""Node sizing: max pods (ENI limits, prefix delegation, custom networking, caps, overrides), reserved
resources and allocatable, for an instance type before any node of it exists.

Split in three: `max_pods` (how many pods), `reserved` (capacity estimate, kube/system reserved,
eviction) and `allocatable` (`size_node`, which ties them together). `settings` holds the inputs.
kube-reserved follows the max pods carpool sets, and the user data states both, so a node's
allocatable is the one computed here whatever the AMI's own defaults would have been.
"""

from carpool.sizing.allocatable import NodeSize, size_node
from carpool.sizing.max_pods import (
    eni_limited_pods,
    prefix_delegation_cap,
    prefix_delegation_ips,
    prefix_delegation_pods,
)
from carpool.sizing.reserved import (
    VM_MEMORY_OVERHEAD,
    kube_reserved,
    kube_reserved_cpu_millis,
    kube_reserved_memory_mib,
    memory_capacity_mib,
)
from carpool.sizing.settings import (
    KubeletSettings,
    LearnedCapacity,
    NetworkSettings,
    network_settings,
    sizing_family,
)
from carpool.sizing.storage import StorageSettings, Volume, ephemeral_storage_bytes

__all__ = [
    "VM_MEMORY_OVERHEAD",
    "KubeletSettings",
    "LearnedCapacity",
    "NetworkSettings",
    "NodeSize",
    "StorageSettings",
    "Volume",
    "eni_limited_pods",
    "ephemeral_storage_bytes",
    "kube_reserved",
    "kube_reserved_cpu_millis",
    "kube_reserved_memory_mib",
    "memory_capacity_mib",
    "network_settings",
    "prefix_delegation_cap",
    "prefix_delegation_ips",
    "prefix_delegation_pods",
    "size_node",
    "sizing_family",
]
