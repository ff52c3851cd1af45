"""AMI resolution for a node class, shared by launch (which AMI each type gets), registration (which AMI a
node should be running) and drift detection (has the answer changed), so all three agree by construction.
"""

from __future__ import annotations

from carpool import amis
from carpool.amis import ResolvedAmi
from carpool.api.nodeclass import EC2NodeClass
from carpool.app.wiring import Dependencies
from carpool.catalog import InstanceType
from carpool.requirements import Requirements


def resolve(nodeclass: EC2NodeClass, deps: Dependencies) -> list[ResolvedAmi]:
    """Every AMI the node class selects (the AmiSource is TTL-cached by the wiring); an unknown cluster
    version is `ClusterFactsUnresolved`, not an AMI for a guessed one."""
    return amis.resolve(nodeclass, deps.settings.cluster_facts().version, deps.ami_source, now=deps.clock())


def expected_for_node(
    node_labels: dict[str, str], instance_type: InstanceType | None, resolved: list[ResolvedAmi]
) -> ResolvedAmi | None:
    """The AMI the strict mapping gives a node, judged from its own labels (plus, when the catalog knows
    its instance type, that type's labels: kubelet does not set gpu-count itself)."""
    reqs = Requirements.from_labels(node_labels)
    if instance_type is not None:
        reqs = instance_type.requirements.merge(Requirements.from_labels(
            {k: v for k, v in node_labels.items() if k not in instance_type.requirements}))
    probe = _Probe(node_labels.get("node.kubernetes.io/instance-type", "node"), reqs)
    return amis.map_instance_types(resolved, [probe]).get(probe.name)


class _Probe:
    __slots__ = ("name", "requirements")

    def __init__(self, name: str, requirements: Requirements) -> None:
        self.name = name
        self.requirements = requirements
