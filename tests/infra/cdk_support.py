"""Shared test data (account, VPC lookup, a NodePool file) and readers for synthesized templates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk.assertions import Template
from infra.stack import CarpoolStack

ACCOUNT = "123456789012"
REGION = "eu-west-1"
VPC_ID = "vpc-0123456789abcdef0"
CLUSTER_SG = "sg-0123456789abcdef0"
NODE_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/KarpenterNodeRole-prod"
#: CDK context that stages no asset (`cdk ls` passes it): the layer keeps its custom hash, nothing is built.
SKIP_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}
#: What `cdk` would have cached in cdk.context.json after looking the VPC up.
VPC_LOOKUP = {
    f"vpc-provider:account={ACCOUNT}:filter.vpc-id={VPC_ID}:region={REGION}:returnAsymmetricSubnets=true": {
        "vpcId": VPC_ID,
        "vpcCidrBlock": "10.0.0.0/16",
        "ownerAccountId": ACCOUNT,
        "availabilityZones": [],
        "subnetGroups": [
            {
                "name": "Private",
                "type": "Private",
                "subnets": [
                    {
                        "subnetId": f"subnet-0{i}23456789abcdef0",
                        "cidr": f"10.0.{i}.0/24",
                        "availabilityZone": f"{REGION}{zone}",
                        "routeTableId": f"rtb-0{i}23456789abcdef0",
                    }
                    for i, zone in ((1, "a"), (2, "b"))
                ],
            }
        ],
    }
}
POOLS_YAML = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
  limits:
    cpu: "64"
    memory: 256Gi
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: Exists}
  limits:
    nvidia.com/gpu: "8"
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: unlimited
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-prod
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
"""


def flatten(value: Any) -> Any:
    """Render ``Fn::Join``/``Ref``/``Fn::GetAtt`` as ``${...}`` text so ARNs can be compared as strings."""
    if isinstance(value, dict):
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(str(flatten(p)) for p in parts)
        if "Ref" in value:
            return "${" + value["Ref"] + "}"
        if "Fn::GetAtt" in value:
            return "${" + ".".join(value["Fn::GetAtt"]) + "}"
        return {k: flatten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [flatten(v) for v in value]
    return value


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(template: dict[str, Any], role_logical_id: str | None = None) -> list[dict[str, Any]]:
    """Every IAM policy statement of the template (optionally only those attached to one role)."""
    found: list[dict[str, Any]] = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        roles = [r.get("Ref") for r in resource["Properties"].get("Roles", [])]
        if role_logical_id is not None and role_logical_id not in roles:
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            found.append(flatten(statement))
    return found


def actions_of(statement: dict[str, Any]) -> list[str]:
    return as_list(statement["Action"])


def logical_id(stack: Stack, construct: Any) -> str:
    return stack.resolve(construct.node.default_child.logical_id)  # type: ignore[no-any-return]


@dataclass
class Synth:
    """One synthesized deployment variant."""

    stack: CarpoolStack
    template: Template

    def resources(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return self.template.find_resources(cfn_type)

    def one(self, cfn_type: str, logical_id_prefix: str) -> dict[str, Any]:
        """The single resource of ``cfn_type`` whose logical id starts with ``logical_id_prefix``."""
        found = {k: v for k, v in self.resources(cfn_type).items() if k.startswith(logical_id_prefix)}
        assert len(found) == 1, f"{cfn_type} {logical_id_prefix}*: {sorted(found)}"
        return next(iter(found.values()))

    def logical_id(self, construct: Any) -> str:
        return self.stack.resolve(construct.node.default_child.logical_id)  # type: ignore[no-any-return]
