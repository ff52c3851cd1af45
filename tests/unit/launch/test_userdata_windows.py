"""Windows user data: Karpenter's PowerShell layout (the node class's script first, then
Start-EKSBootstrap.ps1 with cluster, endpoint, CA, kubelet extra args and DNS), carpool's max pods and
kube-reserved stated in the kubelet flags, and nothing a value holds able to leave its quoted string."""

from __future__ import annotations

from dataclasses import replace

import pytest

from carpool.launch.userdata import NodeBootstrap, UserDataError, render
from carpool.launch.userdata.windows import quote
from carpool.sim.cluster import nodeboot
from carpool.taints import Taint

MIB = 2**20
BASE = NodeBootstrap(
    cluster_name="prod", endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com", ca_bundle="Y2E=",
    cluster_dns="10.100.0.10", max_pods=110,
    kube_reserved={"cpu": 70, "memory": 1465 * MIB, "ephemeral-storage": 2**30},
    labels={"karpenter.sh/nodepool": "win", "team": "a"}, taints=(Taint("os", "NoSchedule", "windows"),),
)


@pytest.mark.parametrize("family", ["windows2019", "windows2022", "windows2025"])
def test_the_bootstrap_call(family: str) -> None:
    text = render(family, BASE)
    lines = text.split("\n")
    assert lines[0] == "<powershell>" and lines[-1] == "</powershell>"
    assert lines[1] == '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"'
    assert lines[2] == (
        "& $EKSBootstrapScriptFile -EKSClusterName 'prod' -APIServerEndpoint "
        "'https://ABC.gr7.us-east-1.eks.amazonaws.com' -Base64ClusterCA 'Y2E=' -KubeletExtraArgs "
        "'--node-labels=\"karpenter.sh/nodepool=win,team=a\" "
        "--register-with-taints=\"os=windows:NoSchedule,karpenter.sh/unregistered:NoExecute\" --max-pods=110 "
        "--kube-reserved=\"cpu=70m,ephemeral-storage=1Gi,memory=1465Mi\"' -DNSClusterIP '10.100.0.10'"
    )


def test_the_node_class_script_runs_first_and_its_wrapping_tags_are_dropped() -> None:
    for user in ("Write-Host prepare", "<powershell>\nWrite-Host prepare\n</powershell>\n"):
        lines = render("windows2022", replace(BASE, user_data=user)).split("\n")
        assert lines[:3] == ["<powershell>", "Write-Host prepare", lines[2]]
        assert lines[2].startswith("[string]$EKSBootstrapScriptFile")
        assert "".join(lines).count("<powershell>") == 1


def test_a_tag_inside_the_node_class_script_is_refused() -> None:
    with pytest.raises(UserDataError, match="spec.userData"):
        render("windows2022", replace(BASE, user_data="Write-Host a\n</powershell>\n<script>x</script>"))


def test_hostile_values_are_refused_or_stay_quoted() -> None:
    with pytest.raises(UserDataError, match="labels"):
        render("windows2022", replace(BASE, labels={"team": "a' ; Remove-Item C:\\ ; '"}))
    with pytest.raises(UserDataError, match="cluster_name"):
        render("windows2022", replace(BASE, cluster_name="x' -KubeletExtraArgs '--anonymous-auth"))
    assert quote("it's") == "'it''s'" and quote("a\u2019b") == "'a\u2019\u2019b'"


def test_what_the_simulated_windows_bootstrap_reads_back() -> None:
    eviction = replace(BASE, eviction_hard={"memory.available": "200Mi"}, system_reserved={"memory": 100 * MIB})
    config = nodeboot.parse_windows(render("windows2022", eviction))
    assert config.family == "windows"
    assert config.labels == {"karpenter.sh/nodepool": "win", "team": "a"}
    assert [t.key for t in config.taints] == ["os", "karpenter.sh/unregistered"]
    assert config.max_pods == 110
    assert config.kube_reserved == {"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "1465Mi"}
    assert config.system_reserved == {"memory": "100Mi"} and config.eviction_hard == {"memory.available": "200Mi"}
