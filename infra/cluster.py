"""The cluster side of the deployment: the role nodes run as, and the functions' Kubernetes identity.

Node role: created unless ``-c nodeRoleArn=...`` names an existing one (for instance Karpenter's, when
migrating). A created role gets the EKS worker policies and an ``EC2_LINUX`` access entry so that nodes
can join a cluster using access entries. Either way the stack creates an instance profile for it: EC2
launches need a profile, not a role, and a node class naming this role launches with it, so the functions
need no IAM write for the common case. Other roles named in ``spec.role`` get profiles made at runtime,
as Karpenter makes them (``carpool.app.profiles``; the grants are in ``infra/functions.py``).

Kubernetes access for the functions: one EKS access entry per function role. By default (least
privilege) each maps its role to the Kubernetes group ``carpool-controller`` (``-c kubernetesGroup`` names
another) with no AWS access policy; ``infra/rbac.yaml`` is the ClusterRole that group needs, and the output
``KubernetesAccessSetup`` is the one command that applies and binds it. ``-c kubernetesAccess=clusterAdmin``
uses AWS managed access policies instead, for clusters without RBAC of their own; AWS offers none between
"view" and "cluster admin" that includes nodes, so:

* watcher and provisioner only read (pods, nodes, daemonsets): ``AmazonEKSAdminViewPolicy``
  (``AmazonEKSViewPolicy`` cannot see nodes, which are cluster-scoped);
* registrar, interruption and disruption cordon, evict, untaint and delete nodes:
  ``AmazonEKSClusterAdminPolicy`` (``AmazonEKSEditPolicy``/``AmazonEKSAdminPolicy`` cannot touch nodes).

``-c accessEntries=false`` creates no access entries at all (clusters in CONFIG_MAP authentication
mode); the README lists the ``aws eks create-access-entry`` / aws-auth equivalents.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.settings import Settings

READ_ONLY_ACCESS_POLICY = "AmazonEKSAdminViewPolicy"
ADMIN_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"
#: Worker node policies of an EKS managed node group; PullOnly is the narrow successor of ReadOnly.
NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)


class ClusterAccess(Construct):
    """Node role + instance profile, and the access entries that let the functions call the API server."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings) -> None:
        super().__init__(scope, construct_id)
        self._settings = settings
        self.node_role_created = settings.node_role_arn is None
        if settings.node_role_arn is not None:
            self.node_role: iam.IRole = iam.Role.from_role_arn(
                self, "NodeRole", settings.node_role_arn, mutable=False
            )
        else:
            self.node_role = iam.Role(
                self,
                "NodeRole",
                description=f"carpool nodes of EKS cluster {settings.cluster_name}",
                assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in NODE_MANAGED_POLICIES],
            )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.node_role)
        self.node_access_entry: eks.CfnAccessEntry | None = None
        if self.node_role_created and settings.access_entries:
            # Without it a node of an API-mode cluster is refused at registration ("Unauthorized").
            self.node_access_entry = eks.CfnAccessEntry(
                self,
                "NodeAccessEntry",
                cluster_name=settings.cluster_name,
                principal_arn=self.node_role.role_arn,
                type="EC2_LINUX",
            )
        self.function_access_entries: dict[str, eks.CfnAccessEntry] = {}

    @property
    def cluster_arn(self) -> str:
        stack = Stack.of(self)
        return stack.format_arn(service="eks", resource="cluster", resource_name=self._settings.cluster_name)

    def grant_kubernetes_access(self, name: str, role: iam.IRole, *, write: bool) -> eks.CfnAccessEntry | None:
        """Give ``role`` a Kubernetes identity (see the module docstring for the policy choice)."""
        if not self._settings.access_entries:
            return None
        group = self._settings.kubernetes_group
        policy = ADMIN_ACCESS_POLICY if write else READ_ONLY_ACCESS_POLICY
        entry = eks.CfnAccessEntry(
            self,
            f"{name.title()}AccessEntry",
            cluster_name=self._settings.cluster_name,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=[group] if group else None,
            access_policies=None
            if group
            else [
                eks.CfnAccessEntry.AccessPolicyProperty(
                    policy_arn=f"arn:{Stack.of(self).partition}:eks::aws:cluster-access-policy/{policy}",
                    access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="cluster"),
                )
            ],
        )
        self.function_access_entries[name] = entry
        return entry
