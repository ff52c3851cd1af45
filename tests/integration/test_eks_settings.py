"""Cluster facts come from DescribeCluster when the stack did not pass them."""

from __future__ import annotations

from typing import Any

from carpool.adapters.aws.eks import complete
from carpool.app.settings import Settings
from carpool.sim.localaws import LocalAws


def test_complete_fills_endpoint_ca_version_and_dns(local_aws: LocalAws) -> None:
    eks: Any = local_aws.client("eks")
    eks.create_cluster(
        name="facts", version="1.31", roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"},
    )
    got = complete(Settings(cluster_name="facts"))
    assert got.cluster_endpoint.startswith("https://")
    assert got.cluster_version == "1.31"
    assert got.cluster_cidr == "172.20.0.0/16" and got.cluster_dns == "172.20.0.10"


def test_missing_cluster_keeps_defaults(local_aws: LocalAws) -> None:
    base = Settings(cluster_name="nope")
    assert complete(base) == base
