"""A scenario's `karpenterNodes`: the cluster Karpenter built before the run, put into local EC2 and the
simulated cluster as Karpenter leaves them when its controller is scaled to zero.

For each node: its NodePool and EC2NodeClass exist as objects carrying the hash annotations Karpenter's
hash controllers wrote (the NodePool's is Karpenter's real hash of its template, `carpool.karpenter_hash`) (and status conditions observed at their generation); an instance of the type in
the zone, launched from the image the node class's alias selects for its architecture (the newest), tagged
as the AWS provider tags it; a NodeClaim of the pool, as Karpenter created it and as its lifecycle
controller left its status; and the Ready, initialized Node that joined from the instance, owned by the
NodeClaim. The objects' shapes are `carpool.sim.cluster.karpenter_built`'s.

The instances ran before the run began, so the simulated kubelets know them as booted and joined
(`Kubelets.prebuilt`): they never boot again, and a termination still removes their node. They are not
carpool's launches (`SimResult.launches`), only running instances.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from carpool import karpenter_hash
from carpool.karpenter_objects import EC2NODECLASS, NODECLAIM, NODEPOOL, ObjectKind
from carpool.sim.cluster import karpenter_built as kb
from carpool.sim.cluster.kubelet import Boot, InstanceFacts, Kubelets, static_node
from carpool.sim.cluster.objects import GENERATE_NAME_ALPHABET
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import KarpenterNodes, Truth

__all__ = ["NODECLASS_HASH", "World", "seed"]

#: the EC2NodeClass hash Karpenter wrote on the classes and their NodeClaims (equal: nothing had drifted)
NODECLASS_HASH = "1234567890123456"
_ARCH = {"amd64": "x86_64", "arm64": "arm64"}


@dataclass(frozen=True)
class World:
    """Where the seed goes: local EC2, the cluster and its kubelets, and what the scenario says of it."""

    ec2: Any
    cluster: SimulatedCluster
    kubelets: Kubelets
    cluster_name: str
    region: str
    zones: Sequence[str]
    truth: Truth


def seed(world: World, nodes: Sequence[KarpenterNodes], docs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Build every `nodes` entry from the scenario's manifests `docs`; returns the instance ids."""
    if not nodes:
        return []
    pools = {d["metadata"]["name"]: d for d in docs if d.get("kind") == NODEPOOL.kind}
    classes = {d["metadata"]["name"]: d for d in docs if d.get("kind") == EC2NODECLASS.kind}
    out: list[str] = []
    for entry in nodes:
        pool = _as_karpenter_left_it(world.cluster, NODEPOOL, pools[entry.node_pool])
        ref = pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        nodeclass = _as_karpenter_left_it(world.cluster, EC2NODECLASS, classes[ref])
        stamped = {**pool["metadata"]["annotations"], **nodeclass["metadata"]["annotations"]}
        hashes = {k: stamped[k] for k in kb.hash_annotations("", "")}  # what the NodeClaims are stamped with
        facts = InstanceFacts.from_ec2(
            world.ec2.describe_instance_types(InstanceTypes=[entry.instance_type])["InstanceTypes"][0])
        image = _image(world.ec2, classes[ref], facts.arch)
        for _ in range(entry.count):
            zone = entry.zone or world.zones[len(out) % len(world.zones)]
            out.append(_node(world, entry, pool, ref, facts, image, zone, hashes))
    return out


def _node(world: World, entry: KarpenterNodes, pool: Mapping[str, Any], nodeclass: str, facts: InstanceFacts,
          image: str, zone: str, hashes: Mapping[str, str]) -> str:
    """One NodeClaim, its instance and its node."""
    name = f"{entry.node_pool}-{_suffix(world.cluster_name, entry.node_pool, len(world.kubelets.prebuilt))}"
    inst = _launch(world, entry, nodeclass, image, zone, name)
    node_name = inst["PrivateDnsName"]
    world.ec2.create_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": kb.NAME_TAG, "Value": node_name}])
    claim = world.cluster.create_object(NODECLAIM, kb.nodeclaim(name, pool, entry.instance_type, zone,
                                                                entry.capacity_type, hashes))
    raw = static_node(node_name, facts, zone, world.region, entry.capacity_type, "al2023", {}, [], world.truth,
                      inst["InstanceId"])
    raw["metadata"]["labels"].pop("eks.amazonaws.com/capacityType", None)  # a managed node group's label
    node = kb.karpenter_node(raw, claim)
    world.cluster.add_node(node)
    status = node["status"]
    world.cluster.patch_status(NODECLAIM, name, kb.nodeclaim_status(
        inst["InstanceId"], zone, image, node_name, status["capacity"], status["allocatable"], world.cluster.now()))
    world.kubelets.prebuilt.add(inst["InstanceId"])
    world.kubelets.launched[inst["InstanceId"]] = (0.0, inst)
    world.kubelets.registered[inst["InstanceId"]] = node_name
    world.kubelets.boots[inst["InstanceId"]] = Boot(inst, 0.0, capacity=dict(status["capacity"]),
                                                    allocatable=dict(status["allocatable"]), node_name=node_name,
                                                    registered_at=0.0, ready_at=0.0)
    return str(inst["InstanceId"])


def _launch(world: World, entry: KarpenterNodes, nodeclass: str, image: str, zone: str, claim: str) -> dict[str, Any]:
    """RunInstances as Karpenter's CreateFleet would have left the instance: in a subnet of the zone, with
    its tags (Name comes once the node's name is known, as the tagging controller adds it)."""
    subnets = world.ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": [zone]}])["Subnets"]
    tags = kb.instance_tags(world.cluster_name, entry.node_pool, nodeclass, claim, "")
    tags.pop(kb.NAME_TAG)
    request: dict[str, Any] = {
        "ImageId": image, "InstanceType": entry.instance_type, "MinCount": 1, "MaxCount": 1,
        "SubnetId": subnets[0]["SubnetId"],
        "TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    }
    if entry.capacity_type == "spot":
        request["InstanceMarketOptions"] = {"MarketType": "spot"}
    (inst,) = world.ec2.run_instances(**request)["Instances"]
    return dict(world.ec2.describe_instances(InstanceIds=[inst["InstanceId"]])["Reservations"][0]["Instances"][0])


def _as_karpenter_left_it(cluster: SimulatedCluster, kind: ObjectKind, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The object in the cluster, with the hash annotations of its kind and a Ready condition observed at
    its generation (what Karpenter's hash and status controllers last wrote). A NodePool's hash is Karpenter's
    of its template as the server holds it, defaults applied (`carpool.karpenter_hash`); an EC2NodeClass's
    a fixed figure (carpool does not compute that one)."""
    name = doc["metadata"]["name"]
    current = cluster.get_object(kind, name) or cluster.create_object(kind, doc)
    if kind is NODEPOOL:
        figure = karpenter_hash.nodepool_hash(current)
        if figure is None:
            raise ValueError(f"karpenterNodes: NodePool {name}'s template has no Karpenter hash carpool computes")
        mine = {k: v for k, v in kb.hash_annotations(figure, NODECLASS_HASH).items() if k.startswith("karpenter.sh/")}
    else:
        mine = {k: v for k, v in kb.hash_annotations("", NODECLASS_HASH).items() if k.startswith("karpenter.k8s.aws/")}
    stored = cluster.patch_object(kind, name, {"metadata": {"annotations": mine}})
    at = cluster.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    generation = stored["metadata"]["generation"]
    return cluster.patch_status(kind, name, {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": at,
         "observedGeneration": generation}]})


def _image(ec2: Any, nodeclass: Mapping[str, Any], arch: str) -> str:
    """The newest standard image (no GPU or Neuron variant) of the node class's alias family for `arch`
    (what `@latest` selects for a type without accelerators)."""
    terms = (nodeclass.get("spec") or {}).get("amiSelectorTerms") or []
    family = next((str(t["alias"]).split("@")[0] for t in terms if t.get("alias")), "al2023")
    images = [i for i in ec2.describe_images(Filters=[{"Name": "architecture", "Values": [_ARCH[arch]]}])["Images"]
              if family in i.get("Name", "") and "-nvidia-" not in i["Name"] and "-neuron-" not in i["Name"]]
    if not images:
        raise ValueError(f"karpenterNodes: no {family} image for {arch} in the scenario's amis")
    return str(max(images, key=lambda i: i.get("CreationDate", ""))["ImageId"])


def _suffix(cluster: str, pool: str, index: int) -> str:
    """Five of `generateName`'s characters, the same for the same scenario (a reproducible run)."""
    digest = uuid.uuid5(uuid.NAMESPACE_DNS, f"{cluster}/{pool}/{index}").int
    return "".join(GENERATE_NAME_ALPHABET[(digest >> (5 * i)) % len(GENERATE_NAME_ALPHABET)] for i in range(5))
