"""Fields an AMI family's bootstrap cannot carry are refused by name when the EC2NodeClass loads (Karpenter
drops them silently); the ones it can carry load."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from carpool.api.loader import ManifestErrors, load

TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]


def class_doc(alias: str, **spec: Any) -> dict[str, Any]:
    body = {"role": "r", "amiSelectorTerms": [{"alias": alias}], "subnetSelectorTerms": TERMS,
            "securityGroupSelectorTerms": TERMS, **spec}
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "nc"}, "spec": body}


def message(doc: dict[str, Any]) -> str:
    with pytest.raises(ManifestErrors) as info:
        load([doc])
    [error] = info.value.errors
    return error.message


@pytest.mark.parametrize(("alias", "spec", "field"), [
    ("bottlerocket@latest", {"kubelet": {"podsPerCore": 4}}, "spec.kubelet.podsPerCore"),
    ("bottlerocket@latest", {"kubelet": {"kubeReserved": {"pid": "1000"}}}, "spec.kubelet.kubeReserved.pid"),
    ("bottlerocket@latest", {"kubelet": {"systemReserved": {"pid": "1000"}}}, "spec.kubelet.systemReserved.pid"),
    ("windows2022@latest", {"kubelet": {"clusterDNS": ["10.0.0.10", "10.0.0.11"]}}, "spec.kubelet.clusterDNS"),
    ("windows2022@latest", {"instanceStorePolicy": "RAID0"}, "spec.instanceStorePolicy"),
])
def test_a_field_the_family_cannot_carry_is_refused_naming_it(alias: str, spec: dict[str, Any], field: str) -> None:
    assert message(class_doc(alias, **spec)).startswith(field + ":")


@pytest.mark.parametrize("field", [
    {"clusterDNS": ["10.0.0.10"]}, {"evictionSoft": {"memory.available": "1Gi"},
                                     "evictionSoftGracePeriod": {"memory.available": "1m"}},
    {"evictionMaxPodGracePeriod": 30}, {"imageGCHighThresholdPercent": 80}, {"cpuCFSQuota": False},
])
def test_a_custom_family_refuses_kubelet_fields_only_its_own_user_data_could_carry(field: dict[str, Any]) -> None:
    doc = class_doc("al2023@latest", amiFamily="Custom", userData="#!/bin/bash\n", kubelet=field)
    assert message(doc).startswith(f"spec.kubelet.{next(iter(field))}:")


@pytest.mark.parametrize(("alias", "spec"), [
    ("al2023@latest", {"instanceStorePolicy": "RAID0", "kubelet": {
        "clusterDNS": ["10.0.0.10", "fd00::a"], "podsPerCore": 4, "kubeReserved": {"pid": "1000"}}}),
    ("al2@latest", {"instanceStorePolicy": "RAID0", "kubelet": {"podsPerCore": 4, "systemReserved": {"pid": "1"},
                                                                "clusterDNS": ["10.0.0.10", "10.0.0.11"]}}),
    ("bottlerocket@latest", {"kubelet": {"clusterDNS": ["10.0.0.10", "10.0.0.11"]}}),
    ("bottlerocket@latest", {"instanceStorePolicy": "RAID0", "kubelet": {"clusterDNS": ["10.0.0.10"], "cpuCFSQuota": True}}),
    ("windows2022@latest", {"kubelet": {"clusterDNS": ["10.0.0.10"], "podsPerCore": 4}}),
    ("al2023@latest", {"amiFamily": "Custom", "kubelet": {"maxPods": 20}}),  # sizing only, as Karpenter
])
def test_what_the_family_carries_loads(alias: str, spec: dict[str, Any]) -> None:
    assert len(load([class_doc(alias, **spec)]).nodeclasses) == 1


def test_carpool_validate_names_the_refused_field_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from carpool.cli import app

    path = tmp_path / "nc.yaml"
    path.write_text(yaml.safe_dump(class_doc("windows2022@latest", instanceStorePolicy="RAID0")))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if "spec.instanceStorePolicy" in line]
    assert len(lines) == 1 and "Windows bootstrap does not set up the instance store" in lines[0]


@pytest.mark.parametrize("period", ["soon", "1.5m", "Never", "500ms"])
def test_a_soft_grace_period_that_is_no_duration_is_refused_at_load(period: str) -> None:
    doc = class_doc("al2023@latest", kubelet={"evictionSoft": {"memory.available": "1Gi"},
                                              "evictionSoftGracePeriod": {"memory.available": period}})
    assert "evictionSoftGracePeriod.memory.available" in message(doc)
