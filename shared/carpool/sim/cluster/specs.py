"""What a scenario tells the simulated cluster: its CNI, the hidden truths of node start-up, the DaemonSet
agents that lift startup taints, misbehaving kubelets, and the Deployment controller's scale and delete steps.

Declared here, beside what plays them, so the cluster needs nothing of the run; the scenario file
(`carpool.sim.run.scenario`) is built from these sections as from its own.
"""

from __future__ import annotations

import fnmatch
from typing import Literal

from pydantic import Field, field_validator, model_validator

from carpool.sim.yaml_model import YamlModel


class KarpenterController(YamlModel):
    """A Karpenter controller running in the cluster from `from` to `until` seconds (to the end when unset):
    it leads through its leader-election Lease, renewed every 2 s (`sim/cluster/leader_election.py`).
    `stop: release` is a clean stop (its Deployment scaled to 0: the Lease released at once), `crash` a
    controller that dies (its holder stays until the Lease expires, 15 s after the last renewal)."""

    from_: float = Field(default=0.0, alias="from", ge=0)
    until: float | None = Field(default=None, ge=0)
    stop: Literal["release", "crash"] = "release"
    #: the namespace of Karpenter's Helm release (where its Lease is)
    namespace: str = "kube-system"
    #: `spec.holderIdentity`: the leader pod's name and a uuid, as client-go writes it
    holder: str = "karpenter-5d8f9c7b6d-x2x7q_6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"

    @model_validator(mode="after")
    def _window(self) -> KarpenterController:
        if self.until is not None and self.until <= self.from_:
            raise ValueError(f"until ({self.until}) must be after from ({self.from_})")
        return self


class KarpenterNodes(YamlModel):
    """Nodes Karpenter launched before the run starts (a cluster to migrate from): `count` NodeClaims of
    NodePool `nodePool`, each with its instance, tagged as Karpenter tags it, and its joined, initialized
    node (`sim/cluster/karpenter_built.py`). The pool and its EC2NodeClass carry the hash annotations
    Karpenter wrote, and so do the NodeClaims. Pair it with a `karpenter` controller that stops, so carpool
    stands still until Karpenter is scaled to zero, then adopts them."""

    node_pool: str
    instance_type: str
    count: int = Field(default=1, ge=1)
    #: the zone of every node (unset: the cluster's zones in turn)
    zone: str | None = None
    capacity_type: Literal["spot", "on-demand"] = "on-demand"


class Cni(YamlModel):
    """The cluster's VPC CNI settings, as the `aws-node` DaemonSet env would show them."""

    prefix_delegation: bool = False
    custom_networking: bool = False


#: the families a simulated node boots as (`nodeboot`: its user data, else its image's name)
OVERHEAD_FAMILIES = ("al2023", "al2", "bottlerocket", "windows", "custom")


class Truth(YamlModel):
    """What the real world does, unknown to carpool until it observes it."""

    #: memory a node really loses to the hypervisor/OS, per AMI family (carpool estimates 7.5 %)
    memory_overhead_percent: dict[str, float] = Field(
        default_factory=lambda: {"al2023": 6.0, "al2": 6.0, "bottlerocket": 9.5, "custom": 7.5}
    )
    #: from instance running to the kubelet registering the Node (NotReady)
    boot_seconds: float = Field(default=40.0, ge=0)
    #: from Node registration to Ready
    registration_seconds: float = Field(default=15.0, ge=0)
    #: from a node turning Ready to the kube-scheduler binding the pods that waited for it: they sit in its
    #: unschedulable queue with a backoff (1 s, doubling per failed attempt, at most 10 s, counted from the
    #: last attempt), so they bind up to 10 s after the Node update that lets them in. 0: at once.
    bind_seconds: float = Field(default=0.0, ge=0, le=10)

    @field_validator("memory_overhead_percent")
    @classmethod
    def _known_families(cls, v: dict[str, float]) -> dict[str, float]:
        """A family the node boot never reports (`al2-023`) would silently keep the default overhead."""
        for family, percent in v.items():
            if family not in OVERHEAD_FAMILIES:
                raise ValueError(f"{family!r} is not an AMI family a node boots as ({', '.join(OVERHEAD_FAMILIES)})")
            if not 0 <= percent < 100:
                raise ValueError(f"{family}: {percent:g} is not a percentage of memory (0 to under 100)")
        return v

    def overhead_percent(self, family: str) -> float:
        return self.memory_overhead_percent.get(family, self.memory_overhead_percent.get("custom", 7.5))


class NodeSelector(YamlModel):
    """Which nodes or instances something applies to (all set fields must match; none set: all)."""

    node_pool: str | None = None
    instance_type: str | None = Field(default=None, description="name or glob")
    zone: str | None = None
    capacity_type: Literal["spot", "on-demand"] | None = None

    def matches(self, node_pool: str, instance_type: str, zone: str, capacity_type: str) -> bool:
        return not ((self.node_pool is not None and self.node_pool != node_pool)
                    or (self.instance_type is not None and not fnmatch.fnmatchcase(instance_type, self.instance_type))
                    or (self.zone is not None and self.zone != zone)
                    or (self.capacity_type is not None and self.capacity_type != capacity_type))


class Agent(YamlModel):
    """A DaemonSet agent that removes one startup taint from each node it runs on (a CNI or CSI node agent
    such as Cilium's, which removes `node.cilium.io/agent-not-ready`).

    Such agents tolerate every taint, so their pod starts as soon as the node registers; `after: ready`
    models one that waits for the node to be Ready. `delaySeconds` is the pod's start-up time (image pull,
    agent initialisation) before it removes the taint.
    """

    name: str
    removes_taint: str
    delay_seconds: float = Field(default=20.0, ge=0)
    after: Literal["registered", "ready"] = "registered"
    #: the DaemonSet's node selection (by the node's pool, type, zone, capacity type)
    nodes: NodeSelector = Field(default_factory=NodeSelector)

    @field_validator("removes_taint")
    @classmethod
    def _not_karpenters(cls, v: str) -> str:
        if v.startswith("karpenter.sh/"):
            raise ValueError(f"{v}: karpenter.sh/ taints belong to the autoscaler, not to a DaemonSet agent")
        return v


class KubeletFault(NodeSelector):
    """Instances whose kubelet misbehaves: never joins, joins late, or reports less memory than the type
    should (a kernel or hypervisor reserving more). `count` limits how many instances are hit (the first
    ones launched that match); unset, every matching instance is."""

    count: int | None = Field(default=None, ge=1)
    fail_to_join: bool = False
    extra_join_seconds: float = Field(default=0.0, ge=0)
    memory_short_mib: int = Field(default=0, ge=0, alias="memoryShortMiB")


class Scale(YamlModel):
    deployment: str
    namespace: str = "default"
    replicas: int = Field(ge=0)


class NodeTarget(YamlModel):
    """Which launched nodes (or their NodeClaims) a delete step hits: the `count` oldest of a NodePool's
    (of any NodePool's when unset), not being deleted already; their names are only known at run time."""

    node_pool: str | None = None
    count: int = Field(default=1, ge=1)


class Delete(YamlModel):
    """Remove a workload (its pods go away), single pods, or a NodePool or EC2NodeClass by name
    (`kubectl delete nodepool <name>`: `{nodepool: <name>}`, `{ec2nodeclass: <name>}`), or launched
    NodeClaims or Nodes (`kubectl delete nodeclaim|node <name>`: `{nodeClaims: {nodePool: default}}`,
    `{nodes: {count: 2}}`)."""

    deployment: str | None = None
    namespace: str = "default"
    pods: list[str] = Field(default_factory=list, description="namespace/name keys")
    nodepool: str | None = None
    ec2nodeclass: str | None = Field(default=None, alias="ec2nodeclass")
    node_claims: NodeTarget | None = None
    nodes: NodeTarget | None = None

    @model_validator(mode="after")
    def _something(self) -> Delete:
        if not (self.deployment or self.pods or self.nodepool or self.ec2nodeclass or self.node_claims or self.nodes):
            raise ValueError("delete needs a deployment, pods, a nodepool, an ec2nodeclass, nodeClaims or nodes")
        return self
