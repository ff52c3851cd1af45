"""EC2NodeClass (karpenter.k8s.aws/v1): real YAML, Karpenter's IMDS defaults and Karpenter's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from carpool.api.loader import ManifestErrors, load
from carpool.api.nodeclass import EC2NodeClass

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "karpenter"
TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]


def class_doc(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": TERMS,
        "securityGroupSelectorTerms": TERMS,
    }
    body.update(spec)
    body = {k: v for k, v in body.items() if v is not None}
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": body,
    }


def only_class(doc: dict[str, Any]) -> EC2NodeClass:
    classes = load([doc]).nodeclasses
    assert len(classes) == 1
    return classes[0]


def errors_of(doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestErrors) as info:
        load([doc])
    return [(e.path, e.message) for e in info.value.errors]


# --- real YAML and defaults -----------------------------------------------------------------------------
def test_getting_started_example() -> None:
    nc = load([EXAMPLES / "default.yaml"]).nodeclass("default")
    assert nc is not None
    assert nc.ami_family() == "al2023"
    assert nc.alias() == ("al2023", "latest")
    assert nc.spec.role == "KarpenterNodeRole-my-cluster" and nc.spec.instance_profile is None
    assert nc.spec.subnet_selector_terms[0].tags == {"karpenter.sh/discovery": "my-cluster"}
    assert nc.prefix_delegation is None and nc.custom_networking is None


def test_karpenter_imds_defaults() -> None:
    opts = only_class(class_doc()).spec.metadata_options
    assert (opts.http_endpoint, opts.http_protocol_ipv6) == ("enabled", "disabled")
    assert opts.http_put_response_hop_limit == 1
    assert opts.http_tokens == "required"


def test_explicit_imds_values_are_kept() -> None:
    nc = load([EXAMPLES / "bottlerocket.yaml"]).nodeclass("bottlerocket")
    assert nc is not None
    assert nc.spec.metadata_options.http_put_response_hop_limit == 1
    partial = only_class(class_doc(metadataOptions={"httpTokens": "optional"})).spec.metadata_options
    assert partial.http_tokens == "optional" and partial.http_put_response_hop_limit == 1
    dumped = nc.to_json_dict()["spec"]["metadataOptions"]
    assert dumped == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }


def test_bottlerocket_example_every_field() -> None:
    nc = load([EXAMPLES / "bottlerocket.yaml"]).nodeclass("bottlerocket")
    assert nc is not None
    assert nc.ami_family() == "bottlerocket"
    assert nc.prefix_delegation is True
    k = nc.spec.kubelet
    assert k is not None
    assert k.max_pods == 110
    assert k.kube_reserved == {"cpu": "200m", "memory": "500Mi"}
    assert k.system_reserved["ephemeral-storage"] == "1Gi"
    assert k.eviction_hard == {"memory.available": "5%", "nodefs.available": "10%"}
    assert k.eviction_soft_grace_period == {"memory.available": "1m"}
    assert (k.image_gc_high_threshold_percent, k.image_gc_low_threshold_percent) == (85, 80)
    bdm = nc.spec.block_device_mappings
    assert bdm is not None and bdm[1].root_volume and bdm[1].ebs is not None
    assert bdm[1].ebs.volume_size == "100Gi" and bdm[1].ebs.iops == 3000
    assert nc.spec.subnet_selector_terms[1].id == "subnet-0a1b2c3d4e5f60718"
    assert nc.spec.detailed_monitoring is True
    assert nc.spec.tags == {"team": "data", "cost-center": "1234"}


def test_every_v1_spec_field_loads() -> None:
    doc = class_doc(
        role=None,
        instanceProfile="KarpenterNodeInstanceProfile",
        amiFamily="AL2023",
        amiSelectorTerms=[
            {"name": "my-ami-*", "owner": "123456789012"},
            {"ssmParameter": "/my/ami"},
            {"tags": {"a": "b"}},
        ],
        securityGroupSelectorTerms=[{"name": "eks-cluster-sg"}, {"id": "sg-0123abcd"}],
        associatePublicIPAddress=False,
        userData="#!/bin/bash\necho hi\n",
        instanceStorePolicy="RAID0",
        context="arn:aws:ec2:us-east-1:123456789012:launch-template/lt-0",
        kubelet={
            "clusterDNS": ["10.0.0.10"],
            "podsPerCore": 10,
            "evictionMaxPodGracePeriod": 60,
            "cpuCFSQuota": True,
            "systemReserved": {"pid": "100"},
        },
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"snapshotID": "snap-1", "kmsKeyID": "k"}}
        ],
    )
    nc = only_class(doc)
    assert nc.ami_family() == "al2023" and nc.alias() is None
    assert nc.spec.kubelet is not None and nc.spec.kubelet.cluster_dns == ["10.0.0.10"]
    assert nc.spec.kubelet.cpu_cfs_quota is True and nc.spec.kubelet.system_reserved == {"pid": "100"}
    assert nc.spec.associate_public_ip_address is False
    dumped = nc.to_json_dict()["spec"]
    assert dumped["kubelet"]["clusterDNS"] == ["10.0.0.10"] and dumped["associatePublicIPAddress"] is False
    assert EC2NodeClass.model_validate(nc.to_json_dict()) == nc


def test_status_is_accepted() -> None:
    doc = class_doc()
    doc["status"] = {"amis": [{"id": "ami-1", "name": "x"}], "instanceProfile": "p", "conditions": []}
    assert only_class(doc).status is not None


@pytest.mark.parametrize(
    ("spec", "family"),
    [
        ({"amiSelectorTerms": [{"id": "ami-0abc"}], "amiFamily": "AL2023"}, "al2023"),
        ({"amiSelectorTerms": [{"id": "ami-0abc"}], "amiFamily": "Custom"}, "custom"),
        ({"amiSelectorTerms": [{"alias": "al2@latest"}]}, "al2"),
        ({"amiSelectorTerms": [{"alias": "windows2022@latest"}]}, "windows2022"),
        ({"amiSelectorTerms": [{"alias": "windows2019@latest"}]}, "windows2019"),
        (
            {"amiSelectorTerms": [{"alias": "bottlerocket@v1.20.3"}], "amiFamily": "Bottlerocket"},
            "bottlerocket",
        ),
        ({"amiSelectorTerms": [{"alias": "al2023@latest"}], "amiFamily": "Custom"}, "custom"),
    ],
)
def test_ami_family(spec: dict[str, Any], family: str) -> None:
    assert only_class(class_doc(**spec)).ami_family() == family


def test_pinned_alias() -> None:
    assert only_class(class_doc(amiSelectorTerms=[{"alias": "al2023@v20240807"}])).alias() == (
        "al2023",
        "v20240807",
    )


# --- validation -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ({"amiSelectorTerms": [{"id": "ami-0abc"}]}, "spec", "must specify amiFamily if amiSelectorTerms does not contain an alias"),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest"}, {"id": "ami-0abc"}]},
            "spec.amiSelectorTerms",
            "other amiSelectorTerms",
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest", "name": "x"}]},
            "spec.amiSelectorTerms",
            "'alias' is mutually exclusive",
        ),
        (
            {"amiSelectorTerms": [{"id": "ami-0abc", "tags": {"a": "b"}}], "amiFamily": "AL2"},
            "spec.amiSelectorTerms",
            "'id' is mutually exclusive",
        ),
        (
            {"amiSelectorTerms": [{"owner": "self"}], "amiFamily": "AL2"},
            "spec.amiSelectorTerms",
            "expected at least one",
        ),
        ({"amiSelectorTerms": [{"alias": "al2023"}]}, "spec.amiSelectorTerms[0].alias", "'family@version'"),
        (
            {"amiSelectorTerms": [{"alias": "ubuntu@latest"}]},
            "spec.amiSelectorTerms[0].alias",
            "not supported",
        ),
        (
            {"amiSelectorTerms": [{"alias": "AL2023@latest"}]},
            "spec.amiSelectorTerms[0].alias",
            "not supported",
        ),
        (
            {"amiSelectorTerms": [{"alias": "windows2022@v1"}]},
            "spec.amiSelectorTerms[0].alias",
            "only specify version 'latest'",
        ),
        (
            {"amiSelectorTerms": [{"id": "i-123"}], "amiFamily": "AL2"},
            "spec.amiSelectorTerms[0].id",
            "should match 'ami-[0-9a-z]+'",
        ),
        (
            {"amiSelectorTerms": [{"alais": "al2023@latest"}]},
            "spec.amiSelectorTerms[0].alais",
            "unknown field",
        ),
        ({"amiSelectorTerms": []}, "spec.amiSelectorTerms", "at least 1 item"),
        (
            {"amiSelectorTerms": [{"alias": "al2@latest"}], "amiFamily": "AL2023"},
            "spec",
            "amiFamily must be 'AL2' or 'Custom'",
        ),
        ({"amiSelectorTerms": [{"id": "ami-1"}], "amiFamily": "Ubuntu"}, "spec.amiFamily", "Unsupported value: \"Ubuntu\": supported values: \"AL2\", \"AL2023\""),
        ({"instanceProfile": "p"}, "spec", "exactly one of ['role', 'instanceProfile']"),
        ({"role": None}, "spec", "exactly one of ['role', 'instanceProfile']"),
        ({"subnetSelectorTerms": [{}]}, "spec.subnetSelectorTerms", "expected at least one"),
        (
            {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
            "spec.subnetSelectorTerms",
            "'id' is mutually exclusive",
        ),
        ({"subnetSelectorTerms": [{"id": "sg-1"}]}, "spec.subnetSelectorTerms[0].id", "should match 'subnet-[0-9a-z]+'"),
        ({"subnetSelectorTerms": [{"tags": {"a": ""}}]}, "spec.subnetSelectorTerms[0].tags", "empty tag"),
        (
            {"securityGroupSelectorTerms": [{"name": "x", "tags": {"a": "b"}}]},
            "spec.securityGroupSelectorTerms",
            "'name' is mutually exclusive",
        ),
        (
            {"securityGroupSelectorTerms": [{"id": "sg-1", "name": "x"}]},
            "spec.securityGroupSelectorTerms",
            "'id' is mutually exclusive",
        ),
        (
            {"securityGroupSelectorTerms": None},
            "spec.securityGroupSelectorTerms",
            "Required value",
        ),
        (
            {"capacityReservationSelectorTerms": [{"id": "cr-1", "ownerID": "123456789012"}]},
            "spec.capacityReservationSelectorTerms",
            "'id' is mutually exclusive",
        ),
        ({"tags": {"kubernetes.io/cluster/demo": "owned"}}, "spec.tags", "restricted"),
        ({"tags": {"karpenter.sh/nodepool": "x"}}, "spec.tags", "restricted"),
        (
            {"kubelet": {"kubeReserved": {"gpu": "1"}}},
            "spec.kubelet.kubeReserved",
            "valid keys for kubeReserved",
        ),
        (
            {"kubelet": {"systemReserved": {"memory": "lots"}}},
            "spec.kubelet.systemReserved[memory]",
            "Invalid value: \"lots\": should match",
        ),
        (
            {"kubelet": {"evictionHard": {"memory.free": "1Gi"}}},
            "spec.kubelet.evictionHard",
            "valid keys for evictionHard",
        ),
        (
            {"kubelet": {"evictionHard": {"memory.available": "1,x --max-pods=9%"}}},
            "spec.kubelet.evictionHard[memory.available]",
            "Invalid value: \"1,x --max-pods=9%\": should match",
        ),
        (
            {"kubelet": {"evictionHard": {"nodefs.available": "101%"}}},
            "spec.kubelet.evictionHard[nodefs.available]",
            "Invalid value: \"101%\": should match",
        ),
        (
            {"kubelet": {"evictionSoft": {"memory.available": "1Gi"}}},
            "spec.kubelet",
            "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
        ),
        (
            {"kubelet": {"evictionSoftGracePeriod": {"memory.available": "1m"}}},
            "spec.kubelet",
            "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
        ),
        (
            {"kubelet": {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}},
            "spec.kubelet",
            "greater than imageGCLowThresholdPercent",
        ),
        (
            {"kubelet": {"imageGCHighThresholdPercent": 101}},
            "spec.kubelet.imageGCHighThresholdPercent",
            "less than or equal to 100",
        ),
        ({"kubelet": {"maxPods": -1}}, "spec.kubelet.maxPods", "greater than or equal to 0"),
        ({"kubelet": {"maxPod": 10}}, "spec.kubelet.maxPod", "did you mean 'maxPods'"),
        (
            {"metadataOptions": {"httpPutResponseHopLimit": 65}},
            "spec.metadataOptions.httpPutResponseHopLimit",
            "less than or equal to 64",
        ),
        ({"metadataOptions": {"httpTokens": "maybe"}}, "spec.metadataOptions.httpTokens", "supported values: \"required\", \"optional\""),
        (
            {
                "blockDeviceMappings": [
                    {"rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                    {"rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
                ]
            },
            "spec.blockDeviceMappings",
            "only one blockDeviceMappings with rootVolume",
        ),
        (
            {"blockDeviceMappings": [{"ebs": {"volumeType": "gp3"}}]},
            "spec.blockDeviceMappings[0].ebs",
            "snapshotID or volumeSize",
        ),
        (
            {"blockDeviceMappings": [{"ebs": {"volumeSize": "20Gi", "volumeType": "gp9"}}]},
            "spec.blockDeviceMappings[0].ebs.volumeType",
            "Unsupported value: \"gp9\"",
        ),
        ({"instanceStorePolicy": "RAID1"}, "spec.instanceStorePolicy", "Unsupported value: \"RAID1\": supported values: \"RAID0\""),
    ],
)
def test_nodeclass_rules(spec: dict[str, Any], path: str, fragment: str) -> None:
    errors = errors_of(class_doc(**spec))
    assert any(p == path and fragment in m for p, m in errors), errors


def test_carpool_annotations_must_be_booleans() -> None:
    doc = class_doc()
    doc["metadata"]["annotations"] = {"carpool.dev/custom-networking": "yes"}
    [(path, message)] = errors_of(doc)
    assert path == "metadata" and "carpool.dev/custom-networking" in message
    doc["metadata"]["annotations"] = {"carpool.dev/custom-networking": "false"}
    assert only_class(doc).custom_networking is False


def test_kind_with_wrong_api_version() -> None:
    doc = class_doc()
    doc["apiVersion"] = "karpenter.k8s.aws/v1beta1"
    [(path, message)] = errors_of(doc)
    assert path == "apiVersion" and "karpenter.k8s.aws/v1" in message
