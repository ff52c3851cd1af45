"""A node boots with known cluster facts or not at all: `Settings.cluster_facts` refuses unknowns by name."""

from __future__ import annotations

import pytest

from carpool import observability
from carpool.app.settings import ClusterFactsUnresolved, Settings

KNOWN = Settings("demo", cluster_endpoint="https://demo.eks", cluster_ca="Q0E=", cluster_version="1.32",
                 cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4")


def test_nothing_is_assumed_from_an_empty_environment() -> None:
    settings = Settings.from_env({"CARPOOL_CLUSTER_NAME": "demo"})
    assert settings.missing_cluster_facts() == [
        "endpoint", "certificate authority", "Kubernetes version", "service CIDR", "cluster DNS", "IP family"]


def test_known_facts_are_returned_as_given() -> None:
    facts = KNOWN.cluster_facts()
    assert (facts.version, facts.service_cidr, facts.dns, facts.ip_family) == ("1.32", "10.100.0.0/16", "10.100.0.10", "ipv4")


def test_an_unknown_fact_is_a_named_error_with_its_cause_and_a_metric() -> None:
    from dataclasses import replace

    before = observability.total("ClusterFactsUnresolved")
    broken = replace(KNOWN, cluster_version="", cluster_facts_error="DescribeCluster demo failed: AccessDenied")
    with pytest.raises(ClusterFactsUnresolved, match=r"Kubernetes version unknown \(DescribeCluster demo failed"):
        broken.cluster_facts()
    assert observability.total("ClusterFactsUnresolved") == before + 1
