"""User data per family, checked against golden files (regenerate with CARPOOL_UPDATE_GOLDEN=1 and review
the diff) and structurally, so a wrong golden cannot hide a wrong value."""

from __future__ import annotations

import base64
import os
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from carpool import labels
from carpool.catalog import Catalog
from carpool.launch.userdata import NodeBootstrap, UserDataError, encode, render, toml_writer
from carpool.launch.userdata.mime import NODE_CONFIG, SHELL_SCRIPT, parse_archive
from carpool.sizing import size_node
from carpool.taints import Taint

GOLDEN = Path(__file__).parent / "golden"
MIB, GIB = 2**20, 2**30

BASE = NodeBootstrap(
    cluster_name="demo",
    endpoint="https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwKY201bGRHVnpNQjRYRFRJMU1ERXdNVEF3TURBd01Gb1hEVE0xTURFd01UQXdNREF3TUZvd0ZURVRNQkVHQTFVRQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==",
    cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10",
    max_pods=29,
    kube_reserved={"cpu": 70, "memory": 574 * MIB, "ephemeral-storage": 1 * GIB},
    system_reserved={"cpu": 100, "memory": 100 * MIB},
    eviction_hard={"nodefs.available": "10%", "memory.available": "100Mi"},
    labels={labels.NODEPOOL: "default", labels.CAPACITY_TYPE: "spot", "team": "payments"},
    taints=(Taint("dedicated", "NoSchedule", "payments"),),
    startup_taints=(Taint("node.cilium.io/agent-not-ready", "NoExecute", "true"),),
)

USER_SCRIPT = "#!/bin/bash\necho 'vm.max_map_count=262144' >> /etc/sysctl.conf\n"

USER_MIME = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 110
      shutdownGracePeriod: 30s

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo hello
--BOUNDARY--
"""

USER_TOML = """[settings.kubernetes]
cluster-name = "someone-else"
max-pods = 500
kube-api-qps = 30
allowed-unsafe-sysctls = ["net.core.somaxconn"]

[settings.kubernetes.node-labels]
team = "user-wrote-this"
"example.com/owner" = "platform"

[settings.kubernetes.node-taints]
dedicated = ["experimental:PreferNoSchedule"]

[settings.kubernetes.eviction-hard]
"memory.available" = "20%"
"imagefs.available" = "15%"

[settings.host-containers.admin]
enabled = true
"""


def test_base_is_what_sizing_gives_an_m5_large() -> None:
    """The golden files show a real node's settings: max pods and kube-reserved as `size_node` computes them."""
    sized = size_node(Catalog.snapshot()["m5.large"])
    assert (BASE.max_pods, dict(BASE.kube_reserved)) == (sized.max_pods, sized.kube_reserved)


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CARPOOL_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with CARPOOL_UPDATE_GOLDEN=1 and review"
    assert text == path.read_text(), f"{name} differs from its golden file"


# -- AL2023 -----------------------------------------------------------------------------------------
def test_al2023_golden_with_user_script() -> None:
    text = render("al2023", replace(BASE, user_data=USER_SCRIPT))
    golden("al2023_user_script.mime", text)
    parts = parse_archive(text)
    assert [p.content_type for p in parts] == [SHELL_SCRIPT, NODE_CONFIG]  # user first, carpool last
    assert parts[0].body == USER_SCRIPT
    config = yaml.safe_load(parts[1].body)
    assert config["apiVersion"] == "node.eks.aws/v1alpha1" and config["kind"] == "NodeConfig"
    assert config["spec"]["cluster"] == {
        "name": "demo",
        "apiServerEndpoint": BASE.endpoint,
        "certificateAuthority": BASE.ca_bundle,
        "cidr": "10.100.0.0/16",
    }
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["maxPods"] == 29
    assert kubelet["config"]["clusterDNS"] == ["10.100.0.10"]
    assert kubelet["config"]["kubeReserved"] == {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"}
    assert kubelet["config"]["evictionHard"] == {"memory.available": "100Mi", "nodefs.available": "10%"}
    assert kubelet["config"]["registerWithTaints"] == [
        {"key": "dedicated", "value": "payments", "effect": "NoSchedule"},
        {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
    ]
    assert kubelet["flags"] == [
        "--node-labels=karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=payments"
    ]


def test_al2023_golden_with_user_mime_keeps_parts_and_puts_ours_last() -> None:
    text = render("al2023", replace(BASE, user_data=USER_MIME))
    golden("al2023_user_mime.mime", text)
    parts = parse_archive(text)
    assert [p.content_type for p in parts] == [NODE_CONFIG, SHELL_SCRIPT, NODE_CONFIG]
    assert yaml.safe_load(parts[0].body)["spec"]["kubelet"]["config"]["maxPods"] == 110
    assert yaml.safe_load(parts[2].body)["spec"]["kubelet"]["config"]["maxPods"] == 29  # later wins in nodeadm


def test_al2023_bare_yaml_user_data_is_a_nodeconfig_part() -> None:
    parts = parse_archive(render("al2023", replace(BASE, user_data="apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n")))
    assert [p.content_type for p in parts] == [NODE_CONFIG, NODE_CONFIG]


def test_al2023_needs_the_service_cidr() -> None:
    with pytest.raises(UserDataError, match="CIDR"):
        render("al2023", replace(BASE, cluster_cidr=None))


# -- Bottlerocket -----------------------------------------------------------------------------------
def test_bottlerocket_golden_merged_with_user_toml() -> None:
    text = render("bottlerocket", replace(BASE, user_data=USER_TOML))
    golden("bottlerocket_merged.toml", text)
    doc = tomllib.loads(text)
    k8s = doc["settings"]["kubernetes"]
    # carpool owns cluster identity and max pods
    assert k8s["cluster-name"] == "demo" and k8s["api-server"] == BASE.endpoint
    assert k8s["cluster-certificate"] == BASE.ca_bundle and k8s["cluster-dns-ip"] == "10.100.0.10"
    assert k8s["max-pods"] == 29
    # the user's other settings stay
    assert k8s["kube-api-qps"] == 30 and k8s["allowed-unsafe-sysctls"] == ["net.core.somaxconn"]
    assert doc["settings"]["host-containers"]["admin"]["enabled"] is True
    # maps merge, carpool wins per key
    assert k8s["node-labels"] == {
        "team": "payments",
        "example.com/owner": "platform",
        "karpenter.sh/capacity-type": "spot",
        "karpenter.sh/nodepool": "default",
    }
    assert k8s["eviction-hard"] == {"memory.available": "100Mi", "imagefs.available": "15%", "nodefs.available": "10%"}
    assert k8s["kube-reserved"] == {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"}
    assert k8s["system-reserved"] == {"cpu": "100m", "memory": "100Mi"}
    assert k8s["node-taints"] == {
        "dedicated": ["experimental:PreferNoSchedule", "payments:NoSchedule"],
        "node.cilium.io/agent-not-ready": ["true:NoExecute"],
        "karpenter.sh/unregistered": [":NoExecute"],
    }


def test_bottlerocket_without_user_data() -> None:
    doc = tomllib.loads(render("bottlerocket", BASE))
    assert set(doc) == {"settings"} and doc["settings"]["kubernetes"]["max-pods"] == 29


def test_bottlerocket_rejects_bad_toml() -> None:
    with pytest.raises(UserDataError, match="TOML"):
        render("bottlerocket", replace(BASE, user_data="[settings.kubernetes\nfoo = 1"))


# -- AL2 --------------------------------------------------------------------------------------------
def test_al2_golden_plain_script() -> None:
    text = render("al2", BASE)
    golden("al2_bootstrap.sh", text)
    assert text.startswith("#!/bin/bash -xe\n")
    assert "/etc/eks/bootstrap.sh 'demo'" in text
    assert f"--b64-cluster-ca '{BASE.ca_bundle}'" in text
    assert "--use-max-pods false" in text
    assert "--max-pods=29" in text
    assert "--node-labels=karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=payments" in text
    assert (
        "--register-with-taints=dedicated=payments:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute,"
        "karpenter.sh/unregistered:NoExecute"
    ) in text
    assert "--kube-reserved=cpu=70m,ephemeral-storage=1Gi,memory=574Mi" in text
    assert "--eviction-hard=memory.available<100Mi,nodefs.available<10%" in text


def test_al2_golden_with_user_mime() -> None:
    user = USER_MIME.replace("application/node.eks.aws", 'text/cloud-config; charset="us-ascii"')
    text = render("al2", replace(BASE, user_data=user))
    golden("al2_user_mime.mime", text)
    parts = parse_archive(text)
    assert [p.content_type for p in parts][-1] == SHELL_SCRIPT
    assert parts[-1].body.startswith("#!/bin/bash -xe") and len(parts) == 3


def test_al2_user_script_becomes_mime() -> None:
    parts = parse_archive(render("al2", replace(BASE, user_data=USER_SCRIPT)))
    assert [p.body for p in parts][0] == USER_SCRIPT


def test_al2_ipv6_cluster() -> None:
    assert "--ip-family ipv6" in render("al2", replace(BASE, cluster_dns="fd00::a"))


# -- common -----------------------------------------------------------------------------------------
def test_custom_family_is_the_users_user_data_and_an_unknown_family_is_refused() -> None:
    assert render("custom", replace(BASE, user_data="echo hi")) == "echo hi"
    with pytest.raises(UserDataError, match="windows2016"):
        render("windows2016", BASE)


def test_encode_is_base64_and_fingerprint_sees_every_input() -> None:
    assert base64.b64decode(encode("é")).decode() == "é"
    fp = BASE.fingerprint()
    assert fp == replace(BASE).fingerprint()
    assert fp != replace(BASE, labels={**BASE.labels, "team": "x"}).fingerprint()
    assert fp != replace(BASE, max_pods=30).fingerprint()
    assert fp != replace(BASE, user_data="x").fingerprint()


def test_toml_writer_round_trips() -> None:
    doc = tomllib.loads(USER_TOML + '\n[[settings.list]]\na = 1\n[[settings.list]]\nb = [[1, 2], ["x"]]\n'
                        '[settings.odd]\n"key with space" = "tab\\tquote\\"ctl\\u0001"\n')
    assert tomllib.loads(toml_writer.dumps(doc)) == doc
