"""The cluster facts a node needs, from DescribeCluster where the stack did not pass them: API endpoint,
CA, Kubernetes version (for AMI aliases), IP family, service CIDR (nodeadm's `cidr`) and cluster DNS.

Values the stack passed (context keys -> environment) win; DescribeCluster fills the others. Nothing is
guessed: when DescribeCluster fails or does not answer a fact, the settings say why
(`cluster_facts_error`, logged here as an error and counted as `ClusterFactsUnresolved`) and
`Settings.cluster_facts()` refuses every launch; the next invocation builds its dependencies, and so
asks DescribeCluster, again (`carpool.app.wiring.get`).

IPv6 clusters: EKS gives the service range as `serviceIpv6Cidr` (`serviceIpv4Cidr` is then absent) and
kube-dns sits at the range's address + 0xa, where EKS places it and its node bootstrap computes it
(`${SERVICE_IPV6_CIDR%/*}a`; Karpenter reads the same address off the kube-dns Service); IPv4 clusters
keep it at the tenth address.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from carpool import observability
from carpool.adapters.aws import session
from carpool.app.settings import Settings

log = logging.getLogger(__name__)


def cluster_dns(service_cidr: str) -> str:
    """kube-dns's address: the service range's address + 10 (IPv4 `x.y.z.10`, IPv6 `prefix::a`)."""
    net = ipaddress.ip_network(service_cidr, strict=False)
    return str(net.network_address + 10)


def complete(settings: Settings) -> Settings:
    """Settings with every cluster fact the stack did not pass filled from DescribeCluster."""
    settings = _derived(settings)
    if not settings.missing_cluster_facts():
        return settings
    try:
        cluster = session.client("eks").describe_cluster(name=settings.cluster_name)["cluster"]
    except (ClientError, BotoCoreError) as exc:
        return _unresolved(settings, f"DescribeCluster {settings.cluster_name} failed: {exc}")
    filled = _from_cluster(settings, cluster)
    missing = filled.missing_cluster_facts()
    if missing:
        return _unresolved(filled, f"DescribeCluster {settings.cluster_name} did not give {', '.join(missing)}")
    return filled


def _derived(settings: Settings) -> Settings:
    """A service CIDR passed by the stack tells its IP family and kube-dns's address."""
    if not settings.cluster_cidr:
        return settings
    net = ipaddress.ip_network(settings.cluster_cidr, strict=False)
    return dataclasses.replace(
        settings,
        cluster_ip_family=settings.cluster_ip_family or f"ipv{net.version}",
        cluster_dns=settings.cluster_dns or cluster_dns(settings.cluster_cidr),
    )


def _from_cluster(settings: Settings, cluster: dict[str, Any]) -> Settings:
    network = cluster.get("kubernetesNetworkConfig") or {}
    # `ipFamily` came with IPv6 support; an answer without it describes an IPv4-only cluster
    only_ipv4 = "ipv4" if network.get("serviceIpv4Cidr") and not network.get("serviceIpv6Cidr") else ""
    family = settings.cluster_ip_family or str(network.get("ipFamily") or only_ipv4)
    described = network.get("serviceIpv6Cidr") if family == "ipv6" else network.get("serviceIpv4Cidr")
    cidr = settings.cluster_cidr or str(described or "")
    return dataclasses.replace(
        settings,
        cluster_endpoint=settings.cluster_endpoint or str(cluster.get("endpoint") or ""),
        cluster_ca=settings.cluster_ca or str((cluster.get("certificateAuthority") or {}).get("data") or ""),
        cluster_version=settings.cluster_version or str(cluster.get("version") or ""),
        cluster_ip_family=family,
        cluster_cidr=cidr,
        cluster_dns=settings.cluster_dns or (cluster_dns(cidr) if cidr else ""),
    )


def _unresolved(settings: Settings, reason: str) -> Settings:
    log.error("cluster facts unresolved, no node will be launched until they are: %s", reason)
    observability.emit("ClusterFactsUnresolved")
    return dataclasses.replace(settings, cluster_facts_error=reason)
