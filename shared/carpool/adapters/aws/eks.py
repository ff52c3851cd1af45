"""What carpool needs to know about its EKS cluster when the stack did not pass it: API endpoint, CA,
Kubernetes version (for AMI aliases) and the service CIDR (nodeadm's `cidr`, kubelet's cluster DNS)."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging

from botocore.exceptions import BotoCoreError, ClientError

from carpool.adapters.aws import session
from carpool.app.settings import Settings

log = logging.getLogger(__name__)


def cluster_dns(service_cidr: str) -> str:
    """kube-dns lives at the tenth address of the service CIDR (EKS convention)."""
    net = ipaddress.ip_network(service_cidr, strict=False)
    return str(net.network_address + 10)


def complete(settings: Settings) -> Settings:
    """Settings with endpoint/CA/version/CIDR filled from DescribeCluster where they are empty."""
    if settings.cluster_endpoint and settings.cluster_ca:
        return settings
    try:
        cluster = session.client("eks").describe_cluster(name=settings.cluster_name)["cluster"]
    except (ClientError, BotoCoreError) as exc:
        log.warning("DescribeCluster %s failed (%s); using configured defaults", settings.cluster_name, exc)
        return settings
    cidr = (cluster.get("kubernetesNetworkConfig") or {}).get("serviceIpv4Cidr") or settings.cluster_cidr
    return dataclasses.replace(
        settings,
        cluster_endpoint=settings.cluster_endpoint or cluster.get("endpoint", ""),
        cluster_ca=settings.cluster_ca or (cluster.get("certificateAuthority") or {}).get("data", ""),
        cluster_version=cluster.get("version") or settings.cluster_version,
        cluster_cidr=cidr,
        cluster_dns=cluster_dns(cidr),
    )
