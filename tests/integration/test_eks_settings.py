"""Cluster facts come from DescribeCluster (moto's EKS) or the stack's context keys, never a guess."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from carpool import observability
from carpool.adapters.aws.eks import complete
from carpool.app.settings import ClusterFactsUnresolved, Settings
from carpool.sim.localaws.server import LocalAws


def _create(local_aws: LocalAws, name: str, **network: str) -> None:
    eks: Any = local_aws.client("eks")
    eks.create_cluster(
        name=name, version="1.31", roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []}, kubernetesNetworkConfig=network,
    )


def test_complete_fills_endpoint_ca_version_and_dns(local_aws: LocalAws) -> None:
    _create(local_aws, "facts", serviceIpv4Cidr="172.20.0.0/16")
    got = complete(Settings(cluster_name="facts"))
    assert got.cluster_endpoint.startswith("https://")
    assert got.cluster_version == "1.31"
    assert got.cluster_cidr == "172.20.0.0/16" and got.cluster_dns == "172.20.0.10"
    assert got.cluster_facts().ip_family == "ipv4"


def test_endpoint_and_ca_from_the_stack_still_describe_the_cluster_for_the_rest(local_aws: LocalAws) -> None:
    _create(local_aws, "given", serviceIpv4Cidr="172.20.0.0/16")
    got = complete(Settings(cluster_name="given", cluster_endpoint="https://given.example", cluster_ca="Q0E="))
    assert (got.cluster_endpoint, got.cluster_ca) == ("https://given.example", "Q0E=")
    assert (got.cluster_version, got.cluster_cidr, got.cluster_dns) == ("1.31", "172.20.0.0/16", "172.20.0.10")


def test_missing_cluster_is_a_named_error_and_a_metric_not_a_guess(local_aws: LocalAws) -> None:
    before = observability.total("ClusterFactsUnresolved")
    got = complete(Settings(cluster_name="nope", cluster_endpoint="https://nope.example", cluster_ca="Q0E="))
    assert "DescribeCluster nope failed" in got.cluster_facts_error
    assert (got.cluster_version, got.cluster_cidr, got.cluster_dns) == ("", "", "")
    assert observability.total("ClusterFactsUnresolved") == before + 1
    with pytest.raises(ClusterFactsUnresolved, match="Kubernetes version, service CIDR, cluster DNS, IP family unknown"):
        got.cluster_facts()
    assert observability.total("ClusterFactsUnresolved") == before + 2


def test_explicit_facts_skip_describe_cluster(local_aws: LocalAws) -> None:
    given = Settings(cluster_name="absent", cluster_endpoint="https://absent.example", cluster_ca="Q0E=",
                     cluster_version="1.30", cluster_cidr="10.96.0.0/12")
    got = complete(given)  # no such cluster in this account: DescribeCluster is not asked
    assert got.cluster_facts() == dataclasses.replace(got.cluster_facts(), version="1.30", dns="10.96.0.10",
                                                      ip_family="ipv4")
    assert got.cluster_facts_error == ""


def test_ipv6_cluster_reads_the_ipv6_service_range_and_its_dns(local_aws: LocalAws) -> None:
    _create(local_aws, "six", ipFamily="ipv6")
    # EKS assigns an IPv6 cluster's service range itself (the request cannot name one); moto does not
    local_aws.update_eks_network_config("six", {"serviceIpv6Cidr": "fd30:1c53:5f8a::/108"})
    facts = complete(Settings(cluster_name="six")).cluster_facts()
    assert (facts.ip_family, facts.service_cidr, facts.dns) == ("ipv6", "fd30:1c53:5f8a::/108", "fd30:1c53:5f8a::a")


def test_provisioning_with_unresolved_facts_launches_nothing(make_deps: Any, aws: LocalAws) -> None:
    """Pending pods, a valid config, and a cluster DescribeCluster cannot find: no CreateFleet at all, the
    pods fail with the named reason (and are retried), the metric counts it."""
    from carpool_env import manifests, nodeclass, nodepool, pending_pods, running_instances

    from carpool.app.provisioning import provision

    deps = make_deps(manifests(nodepool(requirements={"karpenter.sh/capacity-type": ["on-demand"]}), nodeclass()))
    unresolved = complete(Settings(cluster_name="gone", cluster_endpoint="https://gone.example", cluster_ca="Q0E="))
    deps = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, cluster_version="", cluster_cidr="",
                                                                  cluster_dns="", cluster_ip_family="",
                                                                  cluster_facts_error=unresolved.cluster_facts_error))
    before = observability.total("ClusterFactsUnresolved")
    pods = pending_pods(2, deps=deps)
    outcome = provision.provision_pods(pods, deps, reason="test")
    assert not outcome.launched and running_instances(aws) == []
    assert sorted(outcome.failed) == sorted(p.key for p in pods)
    assert all("DescribeCluster gone failed" in why for why in outcome.failed.values()), outcome.failed
    assert observability.total("ClusterFactsUnresolved") > before
