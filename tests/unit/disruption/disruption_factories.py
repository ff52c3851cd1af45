"""Builders for disruption tests: a small cluster (nodes, pods, claims, PDBs, NodePools) turned into the
planner's inputs exactly as the executor does (`candidates.build` + `convert.pool_spec`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from carpool import labels as L
from carpool.api.k8s import Node, Pod, PodDisruptionBudget
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.disruption import candidates, planner
from carpool.requirements import Requirements
from carpool.scheduling import convert
from carpool.scheduling import inputs as si
from carpool.state.models import Claim, ClaimStatus, DisruptionProgress

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
CLUSTER = "test"
ZONE = "us-east-1a"
GIB = 2**30
#: name -> (vcpus, GiB, on-demand $/h); spot is 40% off
TYPES = {
    "m5.large": (2, 8, 0.096),
    "m5.xlarge": (4, 16, 0.192),
    "m5.2xlarge": (8, 32, 0.384),
    "m5.4xlarge": (16, 64, 0.768),
}


def option(name: str) -> si.InstanceOption:
    cpu, mem, price = TYPES[name]
    family = name.split(".")[0]
    lab = {L.INSTANCE_TYPE: name, L.INSTANCE_FAMILY: family, L.INSTANCE_CATEGORY: family[0], L.ARCH: "amd64",
           L.OS: "linux", L.INSTANCE_CPU: str(cpu)}
    offerings = (si.Offering(ZONE, L.CAPACITY_ON_DEMAND, price), si.Offering(ZONE, L.CAPACITY_SPOT, round(price * 0.6, 6)))
    return si.InstanceOption(name, Requirements.from_labels(lab), {"cpu": cpu * 1000, "memory": mem * GIB, "pods": 110},
                             offerings)


def nodepool(name: str = "default", *, policy: str = "WhenEmptyOrUnderutilized", consolidate_after: str = "0s",
             budgets: list[dict[str, Any]] | None = None, expire_after: str = "720h", capacity_types: tuple[str, ...] = (
                 L.CAPACITY_ON_DEMAND,), annotations: dict[str, str] | None = None,
             labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
             nodeclass: str = "default") -> NodePool:
    disruption: dict[str, Any] = {"consolidationPolicy": policy, "consolidateAfter": consolidate_after}
    if budgets is not None:
        disruption["budgets"] = budgets
    return NodePool.model_validate({
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "template": {
                "metadata": {"labels": labels or {}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                    "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)},
                                     {"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]}],
                    "expireAfter": expire_after,
                    "taints": taints or [],
                },
            },
            "disruption": disruption,
        },
    })


def nodeclass(name: str = "default", alias: str = "al2023@v20250101") -> EC2NodeClass:
    return EC2NodeClass.model_validate({
        "metadata": {"name": name},
        "spec": {"role": "node", "amiSelectorTerms": [{"alias": alias}],
                 "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
    })


@dataclass
class World:
    """A cluster snapshot. Nodes are carpool's unless `owned=False`; every pod is Running."""

    nodepools: dict[str, NodePool] = field(default_factory=lambda: {"default": nodepool()})
    nodeclasses: dict[str, EC2NodeClass] = field(default_factory=lambda: {"default": nodeclass()})
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    quiet: dict[str, timedelta] = field(default_factory=dict)
    now: datetime = NOW

    def node(self, name: str, itype: str = "m5.xlarge", *, pool: str = "default", capacity_type: str = L.CAPACITY_ON_DEMAND,
             age: timedelta = timedelta(days=1), ready: bool = True, owned: bool = True, image: str = "ami-old",
             annotations: dict[str, str] | None = None, extra_labels: dict[str, str] | None = None,
             quiet_for: timedelta | None = timedelta(hours=1), disruption: DisruptionProgress | None = None,
             spec_hash: str | None = None,
             status: ClaimStatus = ClaimStatus.REGISTERED, not_ready_for: timedelta | None = None,
             price: float | None = -1.0, initialized: bool = True) -> Node:
        cpu, mem, od = TYPES[itype]
        lab = {L.INSTANCE_TYPE: itype, L.ZONE: ZONE, L.ARCH: "amd64", L.OS: "linux", L.HOSTNAME: name,
               **(extra_labels or {})}
        if owned:
            lab.update({L.NODEPOOL: pool, L.CAPACITY_TYPE: capacity_type, L.OWNED_BY: CLUSTER, L.CLAIM: f"claim-{name}",
                        L.IMAGE_ID: image, L.INSTANCE_FAMILY: "m5", L.REGISTERED: "true"})
            if initialized:
                lab[L.NODE_INITIALIZED] = "true"
        cond: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
        if not ready and not_ready_for is not None:
            cond["lastTransitionTime"] = (self.now - not_ready_for).isoformat()
        node = Node.model_validate({
            "metadata": {"name": name, "labels": lab, "annotations": annotations or {}},
            "spec": {"providerID": f"aws:///{ZONE}/i-{name}"},
            "status": {"allocatable": {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110"},
                       "conditions": [cond]},
        })
        self.nodes.append(node)
        if owned:
            if price == -1.0:
                price = od if capacity_type == L.CAPACITY_ON_DEMAND else round(od * 0.6, 6)
            self.claims.append(Claim(
                name=f"claim-{name}", nodepool=pool, nodeclass="default", status=status, created_at=self.now - age,
                launched_at=self.now - age, registered_at=self.now - age, node_name=name, instance_id=f"i-{name}",
                instance_type=itype, zone=ZONE, capacity_type=capacity_type, image_id=image, price=price,
                disruption=disruption, spec_hash=spec_hash,
                allocatable={"cpu": cpu * 1000, "memory": mem * GIB, "pods": 110},
            ))
            if quiet_for is not None:
                self.quiet[name] = quiet_for
        return node

    def pod(self, name: str, node: str | None = None, *, cpu: str = "500m", mem: str = "512Mi",
            labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, daemonset: bool = False,
            namespace: str = "default", spec: dict[str, Any] | None = None, phase: str = "Running") -> Pod:
        owner = [{"kind": "DaemonSet", "name": "ds", "controller": True}] if daemonset else \
            [{"kind": "ReplicaSet", "name": name.rsplit("-", 1)[0], "controller": True}]
        body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
                                **(spec or {})}
        if node:
            body["nodeName"] = node
        status: dict[str, Any] = {"phase": phase if node else "Pending"}
        if not node:
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        pod = Pod.model_validate({"metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                                               "annotations": annotations or {}, "ownerReferences": owner},
                                  "spec": body, "status": status})
        self.pods.append(pod)
        return pod

    def pdb(self, name: str, match: dict[str, str], *, min_available: int | str | None = None,
            max_unavailable: int | str | None = None, allowed: int | None = None) -> PodDisruptionBudget:
        spec: dict[str, Any] = {"selector": {"matchLabels": match}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        body: dict[str, Any] = {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
        if allowed is not None:
            body["status"] = {"disruptionsAllowed": allowed}
        pdb = PodDisruptionBudget.model_validate(body)
        self.pdbs.append(pdb)
        return pdb

    # -- planner inputs ----------------------------------------------------------------------------
    def _stamp_quiet(self) -> None:
        on: dict[str, list[str]] = {}
        for p in self.pods:
            if p.spec.node_name and candidates.reschedulable(p):
                on.setdefault(p.spec.node_name, []).append(p.key)
        for c in self.claims:
            if c.node_name in self.quiet:
                c.pods_digest = candidates.pods_digest(on.get(c.node_name, []))
                c.pods_changed_at = self.now - self.quiet[c.node_name]

    def view(self, nominated: dict[str, str] | None = None) -> candidates.ClusterView:
        self._stamp_quiet()
        return candidates.build(self.nodes, self.pods, self.claims, self.pdbs, CLUSTER, self.now, nominated)

    def inputs(self, expected_amis: dict[str, str | None] | None = None, types: tuple[str, ...] = tuple(TYPES),
               nominated: dict[str, str] | None = None, state: str = "") -> planner.Inputs:
        specs = [convert.pool_spec(np, [option(t) for t in types]) for np in self.nodepools.values()]
        ds = [convert.pod_spec(p) for p in self.pods if p.is_daemonset_pod() and p.spec.node_name == self.nodes[0].name] \
            if self.nodes else []
        return planner.Inputs(self.view(nominated), self.nodepools, self.nodeclasses, specs, ds, expected_amis or {},
                              state=state)

    def plan(self, options: planner.Options | None = None, **kw: Any) -> planner.Plan:
        return planner.plan(self.inputs(**kw), self.now, options)
