"""Every `spec.kubelet` field and `instanceStorePolicy: RAID0` in every AMI family's user data, where Karpenter
puts it (pkg/providers/amifamily/bootstrap), read back twice: by the format's own parser (YAML, TOML, shell
words, PowerShell arguments) and by the simulated bootstrap (`carpool.sim.cluster.userdata`, modelled on nodeadm,
bootstrap.sh, Bottlerocket and Start-EKSBootstrap.ps1), so the value a node runs with is the one configured.
A field a family cannot carry is refused, naming it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from carpool.launch.userdata import NodeBootstrap, UserDataError, render
from carpool.launch.userdata.al2 import BOOTSTRAP
from carpool.launch.userdata.mime import NODE_CONFIG, parse_archive
from carpool.sim.cluster import nodeboot, userdata

MIB, GIB = 2**20, 2**30
BASE = NodeBootstrap(
    cluster_name="demo",
    endpoint="https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
    cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10",
    max_pods=29,
    kube_reserved={"cpu": 70, "memory": 574 * MIB, "ephemeral-storage": GIB, "pid": 1000},
    system_reserved={"cpu": 100, "memory": 100 * MIB, "pid": 500},
    eviction_hard={"memory.available": "100Mi"},
)
#: every field beyond sizing, with a value a node would not get by default
FIELDS = dict(
    cluster_dns="172.20.0.10",
    eviction_soft={"memory.available": "500Mi", "nodefs.available": "15%"},
    eviction_soft_grace_period={"memory.available": "1m30s", "nodefs.available": "2m"},
    eviction_max_pod_grace_period=60,
    image_gc_high_threshold_percent=80,
    image_gc_low_threshold_percent=60,
    cpu_cfs_quota=False,
)
FULL = replace(BASE, **FIELDS)  # type: ignore[arg-type]
#: what the kubelet's configuration holds for FIELDS (KubeletConfiguration names)
EXPECTED = {
    "clusterDNS": ["172.20.0.10"],
    "evictionSoft": {"memory.available": "500Mi", "nodefs.available": "15%"},
    "evictionSoftGracePeriod": {"memory.available": "1m30s", "nodefs.available": "2m"},
    "evictionMaxPodGracePeriod": 60,
    "imageGCHighThresholdPercent": 80,
    "imageGCLowThresholdPercent": 60,
    "cpuCFSQuota": False,
}


def booted(family: str, text: str) -> userdata.BootConfig:
    """What the family's bootstrap reads from `text`."""
    if family.startswith("windows"):
        return nodeboot.parse_windows(text)
    return userdata.parse(text)


# -- AL2023: the NodeConfig's kubelet.config ------------------------------------------------------------
def _node_config(text: str) -> dict[str, Any]:
    ours = [p for p in parse_archive(text) if p.content_type == NODE_CONFIG][-1]
    doc: dict[str, Any] = yaml.safe_load(ours.body)
    return doc


def test_al2023_nodeconfig_carries_every_kubelet_field() -> None:
    config = _node_config(render("al2023", replace(FULL, pods_per_core=4)))["spec"]["kubelet"]["config"]
    assert {k: config[k] for k in EXPECTED} == EXPECTED
    assert config["podsPerCore"] == 4
    assert config["maxPods"] == 29
    assert config["kubeReserved"] == {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi", "pid": "1000"}
    assert config["systemReserved"] == {"cpu": "100m", "memory": "100Mi", "pid": "500"}
    assert config["evictionHard"] == {"memory.available": "100Mi"}


def test_al2023_carries_every_cluster_dns_address() -> None:
    config = _node_config(render("al2023", replace(FULL, more_cluster_dns=("fd00::a",))))["spec"]["kubelet"]["config"]
    assert config["clusterDNS"] == ["172.20.0.10", "fd00::a"]


def test_al2023_raid0_is_nodeadm_local_storage() -> None:
    assert _node_config(render("al2023", replace(BASE, raid0=True)))["spec"]["instance"] == {
        "localStorage": {"strategy": "RAID0"}}
    assert "instance" not in _node_config(render("al2023", BASE))["spec"]


# -- AL2: bootstrap.sh flags ----------------------------------------------------------------------------
def _extra_args(text: str) -> list[str]:
    call = " ".join(line.rstrip("\\") for line in text.splitlines() if line.startswith(BOOTSTRAP) or line.startswith("--"))
    words = shlex.split(call)
    return shlex.split(words[words.index("--kubelet-extra-args") + 1])


def test_al2_kubelet_extra_args_carry_every_kubelet_field() -> None:
    text = render("al2", replace(FULL, pods_per_core=4))
    args = _extra_args(text)
    assert {"--eviction-soft=memory.available<500Mi,nodefs.available<15%",
            "--eviction-soft-grace-period=memory.available=1m30s,nodefs.available=2m",
            "--eviction-max-pod-grace-period=60", "--image-gc-high-threshold=80", "--image-gc-low-threshold=60",
            "--cpu-cfs-quota=false", "--pods-per-core=4", "--max-pods=29",
            "--kube-reserved=cpu=70m,ephemeral-storage=1Gi,memory=574Mi,pid=1000",
            "--system-reserved=cpu=100m,memory=100Mi,pid=500"} <= set(args)
    assert "--dns-cluster-ip '172.20.0.10'" in text


def test_al2_raid0_is_local_disks() -> None:
    assert "--local-disks raid0" in render("al2", replace(BASE, raid0=True))
    assert "--local-disks" not in render("al2", BASE)


# -- Bottlerocket: settings.kubernetes ------------------------------------------------------------------
def without_pid(b: NodeBootstrap) -> NodeBootstrap:
    return replace(b, kube_reserved={k: v for k, v in b.kube_reserved.items() if k != "pid"},
                   system_reserved={k: v for k, v in b.system_reserved.items() if k != "pid"})


def test_bottlerocket_settings_carry_every_kubelet_field() -> None:
    k8s = tomllib.loads(render("bottlerocket", without_pid(FULL)))["settings"]["kubernetes"]
    assert k8s["cluster-dns-ip"] == "172.20.0.10"
    assert k8s["eviction-soft"] == EXPECTED["evictionSoft"]
    assert k8s["eviction-soft-grace-period"] == EXPECTED["evictionSoftGracePeriod"]
    assert k8s["eviction-max-pod-grace-period"] == 60
    assert (k8s["image-gc-high-threshold-percent"], k8s["image-gc-low-threshold-percent"]) == ("80", "60")
    assert k8s["cpu-cfs-quota-enforced"] is False


def test_bottlerocket_refuses_a_pid_reservation_its_settings_model_refuses() -> None:
    with pytest.raises(UserDataError, match="spec.kubelet.kubeReserved.pid"):
        render("bottlerocket", FULL)
    toml = render("bottlerocket", without_pid(FULL)).replace('[settings.kubernetes.kube-reserved]',
                                                             '[settings.kubernetes.kube-reserved]\npid = "1000"')
    assert "Reserved sources key 'pid'" in userdata.parse(toml).refusal  # and the node would never join


def test_bottlerocket_raid0_is_karpenters_bootstrap_command() -> None:
    settings = tomllib.loads(render("bottlerocket", without_pid(replace(BASE, raid0=True))))["settings"]
    command = settings["bootstrap-commands"]["000-mount-instance-storage"]
    assert command["commands"][0] == ["apiclient", "ephemeral-storage", "init"]
    assert command["commands"][1][:3] == ["apiclient", "ephemeral-storage", "bind"]
    assert (command["essential"], command["mode"]) == (True, "always")


def test_bottlerocket_refuses_pods_per_core() -> None:
    with pytest.raises(UserDataError, match="spec.kubelet.podsPerCore"):
        render("bottlerocket", without_pid(replace(BASE, pods_per_core=4)))


# -- Windows: -KubeletExtraArgs -------------------------------------------------------------------------
def test_windows_kubelet_extra_args_carry_every_kubelet_field() -> None:
    text = render("windows2022", replace(FULL, pods_per_core=4))
    assert "-DNSClusterIP '172.20.0.10'" in text
    for flag in ('--eviction-soft="memory.available<500Mi,nodefs.available<15%"',
                 '--eviction-soft-grace-period="memory.available=1m30s,nodefs.available=2m"',
                 "--eviction-max-pod-grace-period=60", "--image-gc-high-threshold=80",
                 "--image-gc-low-threshold=60", "--cpu-cfs-quota=false", "--pods-per-core=4",
                 '--kube-reserved="cpu=70m,ephemeral-storage=1Gi,memory=574Mi,pid=1000"'):
        assert flag in text


def test_windows_refuses_raid0() -> None:
    with pytest.raises(UserDataError, match="spec.instanceStorePolicy"):
        render("windows2022", replace(BASE, raid0=True))


# -- every cluster DNS address where the bootstrap takes a list; refused where it takes one ---------------
def test_a_second_cluster_dns_address_is_refused_on_windows() -> None:
    with pytest.raises(UserDataError, match="spec.kubelet.clusterDNS"):
        render("windows2022", replace(BASE, more_cluster_dns=("172.20.0.11",)))


@pytest.mark.parametrize("family", ["al2023", "al2", "bottlerocket"])
def test_every_cluster_dns_address_reaches_the_kubelet(family: str) -> None:
    text = render(family, without_pid(replace(FULL, more_cluster_dns=("172.20.0.11",))))
    assert booted(family, text).settings["clusterDNS"] == ["172.20.0.10", "172.20.0.11"]


# -- every family: the simulated bootstrap reads back what was configured -------------------------------
@pytest.mark.parametrize("family", ["al2023", "al2", "bottlerocket", "windows2022"])
def test_the_bootstrap_reads_back_every_kubelet_field(family: str) -> None:
    cfg = booted(family, render(family, without_pid(FULL) if family == "bottlerocket" else FULL))
    assert cfg.settings == EXPECTED
    assert not cfg.refusal
    if family != "bottlerocket":
        assert cfg.kube_reserved is not None and cfg.kube_reserved["pid"] == "1000"
        assert cfg.system_reserved is not None and cfg.system_reserved["pid"] == "500"


@pytest.mark.parametrize("family", ["al2023", "al2", "bottlerocket"])
def test_the_bootstrap_reads_back_raid0(family: str) -> None:
    base = without_pid(BASE)
    assert booted(family, render(family, replace(base, raid0=True))).raid0 is True
    assert booted(family, render(family, base)).raid0 is False


@pytest.mark.parametrize("bad", [
    dict(eviction_soft={"memory.avail": "1Gi"}, eviction_soft_grace_period={}),
    dict(eviction_soft_grace_period={"memory.available": "soon"}),
    dict(image_gc_high_threshold_percent=101),
    dict(more_cluster_dns=("not-an-ip",)),
    dict(cpu_cfs_quota="yes"),
])
def test_values_no_reader_could_take_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(UserDataError):
        render("al2023", replace(BASE, **bad))


# -- a bare NodeConfig as the user's spec.userData ------------------------------------------------------
TWO_NODECONFIGS = """---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      shutdownGracePeriod: 30s
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
      - --v=4
"""


def test_a_bare_multi_document_nodeconfig_is_not_a_script_and_every_document_reaches_nodeadm() -> None:
    """nodeadm reads the first YAML document of a part: each document gets its own part, in order."""
    parts = parse_archive(render("al2023", replace(BASE, user_data=TWO_NODECONFIGS)))
    assert [p.content_type for p in parts] == [NODE_CONFIG, NODE_CONFIG, NODE_CONFIG]
    first, second = (yaml.safe_load(p.body) for p in parts[:2])
    assert first["spec"]["kubelet"]["config"] == {"shutdownGracePeriod": "30s"}
    assert second["spec"]["kubelet"]["flags"] == ["--v=4"]
    cfg = userdata.parse(render("al2023", replace(BASE, user_data=TWO_NODECONFIGS)))
    assert not cfg.refusal and cfg.max_pods == 29


def test_a_script_stays_a_script_and_broken_yaml_in_a_nodeconfig_part_is_refused() -> None:
    parts = parse_archive(render("al2023", replace(BASE, user_data="#!/bin/bash\necho ok: yes\n")))
    assert parts[0].content_type.startswith("text/x-shellscript")
    with pytest.raises(UserDataError, match="spec.userData"):
        render("al2023", replace(BASE, user_data="apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n---\n: [\n"))


def test_a_nodeconfig_part_nodeadm_could_not_decode_is_refused() -> None:
    with pytest.raises(UserDataError, match="spec.userData.*document 2"):
        render("al2023", replace(BASE, user_data=TWO_NODECONFIGS.replace("kind: NodeConfig\nspec:\n  kubelet:\n    flags",
                                                                         "kind: Other\nspec:\n  kubelet:\n    flags")))


# -- the real nodeadm, when built (see /work/shared/nodeadm/README.md) ------------------------------------
NODEADM = Path(os.environ.get("NODEADM_HOME", Path.home() / ".cache" / "carpool-nodeadm")) / "bin" / "nodeadm"
needs_nodeadm = pytest.mark.skipif(not NODEADM.exists(), reason="the real nodeadm is not built")


def nodeadm_dump(text: str, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "userdata.mime"
    path.write_text(text)
    done = subprocess.run([str(NODEADM), "config", "dump", "-c", f"file://{path}"], capture_output=True, text=True,
                          timeout=60, check=True)
    dumped: dict[str, Any] = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    return dumped


@needs_nodeadm
def test_the_real_nodeadm_reads_every_field_and_both_user_documents(tmp_path: Path) -> None:
    b = replace(FULL, raid0=True, pods_per_core=4, more_cluster_dns=("fd00::a",), user_data=TWO_NODECONFIGS)
    spec = nodeadm_dump(render("al2023", b), tmp_path)["spec"]
    config = spec["kubelet"]["config"]
    assert {k: config[k] for k in EXPECTED if k != "clusterDNS"} == {k: v for k, v in EXPECTED.items() if k != "clusterDNS"}
    assert config["clusterDNS"] == ["172.20.0.10", "fd00::a"] and config["podsPerCore"] == 4
    assert config["kubeReserved"]["pid"] == "1000" and config["shutdownGracePeriod"] == "30s"
    assert spec["kubelet"]["flags"][0] == "--v=4"
    assert spec["instance"]["localStorage"] == {"strategy": "RAID0"}


@needs_nodeadm
def test_the_simulated_nodeadm_reads_a_part_as_the_real_one_does(tmp_path: Path) -> None:
    head = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"
    cluster = "  cluster: {name: a, apiServerEndpoint: 'https://x', certificateAuthority: Q0E=, cidr: 10.100.0.0/16}\n"
    part = head + cluster + "  kubelet:\n    config: {maxPods: 10}\n---\n" + head + "  kubelet:\n    config: {maxPods: 20}\n"
    archive = f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\nContent-Type: {NODE_CONFIG}\n\n{part}--B--\n'
    real = nodeadm_dump(archive, tmp_path)["spec"]["kubelet"]["config"]["maxPods"]
    assert real == userdata.parse(archive).max_pods == 10


def test_bottlerocket_user_toml_with_a_label_the_kubelet_refuses_is_refused() -> None:
    toml = '[settings.kubernetes.node-labels]\n"node-restriction.kubernetes.io/isolation" = "pci"\n'
    with pytest.raises(UserDataError, match="spec.userData.*node-restriction.kubernetes.io/isolation"):
        render("bottlerocket", without_pid(replace(BASE, user_data=toml)))


@pytest.mark.parametrize(("flag", "says"), [
    ("--node-labels=team=a,kops.k8s.io/instancegroup=nodes", "kops.k8s.io/instancegroup"),
    ("--register-with-taints=dedicated=x:NoSchedule", "karpenter.sh/unregistered"),
])
def test_a_user_kubelet_flag_the_kubelet_refuses_or_that_undoes_registration_is_refused(flag: str, says: str) -> None:
    user = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n      - " + flag + "\n"
    with pytest.raises(UserDataError, match=f"spec.userData.*{says}"):
        render("al2023", replace(BASE, user_data=user))
