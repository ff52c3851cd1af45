"""Runtime settings, read once from the environment the CDK stack (or the simulation) sets.

The cluster facts a node needs to join (API endpoint, CA, Kubernetes version, service CIDR, cluster DNS,
IP family) have no defaults: a node booted with a guessed version or service CIDR joins with the wrong
AMI or resolves no Service name. They come from the stack's context keys or DescribeCluster
(`carpool.adapters.aws.eks.complete`); what stays unknown is recorded in `cluster_facts_error`, and
`cluster_facts()` refuses every launch with `ClusterFactsUnresolved` (logged, and counted as the
`ClusterFactsUnresolved` metric its alarm watches) until they are known.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from carpool import environment, karpenter_lease, observability

log = logging.getLogger(__name__)

#: The IP families EKS clusters have (`kubernetesNetworkConfig.ipFamily`).
IP_FAMILIES = ("ipv4", "ipv6")


class ClusterFactsUnresolved(RuntimeError):
    """A cluster fact a node needs (endpoint, CA, version, service CIDR, DNS, IP family) is unknown."""


@dataclass(frozen=True)
class ClusterFacts:
    """What every node of the cluster is booted with; all known, none guessed."""

    endpoint: str
    ca: str
    version: str
    service_cidr: str
    dns: str
    ip_family: str


@dataclass(frozen=True)
class Settings:
    cluster_name: str
    region: str = "us-east-1"
    cluster_version: str = ""
    cluster_endpoint: str = ""
    cluster_ca: str = ""
    cluster_cidr: str = ""
    cluster_dns: str = ""
    cluster_ip_family: str = ""
    #: why the facts could not be resolved (DescribeCluster's error); "" when nothing failed
    cluster_facts_error: str = ""
    table: str = ""
    idempotency_table: str = ""
    event_bus: str = ""
    node_role: str = ""
    instance_profile: str = ""
    #: how long a claim's pod nominations hold before the pods may be provisioned again
    nomination_ttl_seconds: int = 900
    #: a claim never registered after this long is terminated (node repair / launch failure)
    registration_timeout_seconds: int = 900
    #: an instance with carpool's tags but no claim is terminated after this grace period
    orphan_grace_seconds: int = 300
    #: a claim reserved this long ago without an instance is released (its pods provisioned again), unless
    #: EC2 has an instance tagged with its name; longer than the provisioner Lambda's timeout (120 s), so
    #: no invocation that could still launch for it is running
    launch_deadline_seconds: int = 180
    #: capacity errors make an offering unavailable for this long (Karpenter: 3 minutes)
    unavailable_seconds: int = 180
    #: at most this many instance types go to one CreateFleet call (the AWS provider sends 60)
    max_fleet_types: int = 60
    #: the namespace of Karpenter's leader-election Lease, its Helm release's (`carpool.karpenter_lease`):
    #: carpool stands still while a Karpenter controller renews it (`carpool.app.standstill`)
    karpenter_namespace: str = karpenter_lease.DEFAULT_NAMESPACE
    extra: dict[str, str] = field(default_factory=dict)

    def missing_cluster_facts(self) -> list[str]:
        """The names of the facts still unknown."""
        known = {
            "endpoint": self.cluster_endpoint, "certificate authority": self.cluster_ca,
            "Kubernetes version": self.cluster_version, "service CIDR": self.cluster_cidr,
            "cluster DNS": self.cluster_dns, "IP family": self.cluster_ip_family,
        }
        return [name for name, value in known.items() if not value]

    def cluster_facts(self) -> ClusterFacts:
        """The facts a node boots with; `ClusterFactsUnresolved` (logged and counted) when one is unknown."""
        missing = self.missing_cluster_facts()
        if missing or self.cluster_ip_family not in IP_FAMILIES:
            what = ", ".join(missing) or f"IP family {self.cluster_ip_family!r}"
            cause = f" ({self.cluster_facts_error})" if self.cluster_facts_error else ""
            reason = (
                f"cluster {self.cluster_name}: {what} unknown{cause}; no node is launched with a guess. "
                "Allow eks:DescribeCluster or deploy with -c clusterVersion/serviceCidr/ipFamily"
            )
            log.error("%s", reason)
            observability.emit("ClusterFactsUnresolved")
            raise ClusterFactsUnresolved(reason)
        return ClusterFacts(self.cluster_endpoint, self.cluster_ca, self.cluster_version, self.cluster_cidr,
                            self.cluster_dns, self.cluster_ip_family)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """From `env`, else the running function's environment (`carpool.environment`)."""
        e = dict(environment.current() if env is None else env)
        return cls(
            cluster_name=e.get("CARPOOL_CLUSTER_NAME", "demo"),
            region=e.get("AWS_REGION", e.get("AWS_DEFAULT_REGION", "us-east-1")),
            cluster_version=e.get("CARPOOL_CLUSTER_VERSION", ""),
            cluster_endpoint=e.get("CARPOOL_CLUSTER_ENDPOINT", ""),
            cluster_ca=e.get("CARPOOL_CLUSTER_CA", ""),
            cluster_cidr=e.get("CARPOOL_CLUSTER_CIDR", ""),
            cluster_dns=e.get("CARPOOL_CLUSTER_DNS", ""),
            cluster_ip_family=e.get("CARPOOL_CLUSTER_IP_FAMILY", ""),
            table=e.get("CARPOOL_TABLE", ""),
            idempotency_table=e.get("CARPOOL_IDEMPOTENCY_TABLE", ""),
            event_bus=e.get("CARPOOL_EVENT_BUS", ""),
            node_role=e.get("CARPOOL_NODE_ROLE_ARN", ""),
            instance_profile=e.get("CARPOOL_INSTANCE_PROFILE", ""),
            karpenter_namespace=e.get("CARPOOL_KARPENTER_NAMESPACE") or karpenter_lease.DEFAULT_NAMESPACE,
        )
