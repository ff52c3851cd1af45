"""The simulated kubelet reads carpool's own user data renderers' output back."""

import base64

import pytest

from carpool.launch import userdata as render
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.sim import userdata
from carpool.taints import Taint

BOOT = NodeBootstrap(
    cluster_name="demo", endpoint="https://demo.eks", ca_bundle="Q0E=", cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10", max_pods=58,
    kube_reserved={"cpu": 70, "memory": 893 * 1024 * 1024},
    labels={"karpenter.sh/nodepool": "flex", "team": "web"},
    taints=(Taint("dedicated", "NoSchedule", "web"),), startup_taints=(Taint("cilium/agent", "NoExecute"),),
)


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2"])
def test_reads_labels_taints_and_max_pods(family):
    cfg = userdata.parse(userdata.decode(render.encode(render.render(family, BOOT))))
    assert cfg.family == family
    assert cfg.max_pods == 58
    assert cfg.labels["karpenter.sh/nodepool"] == "flex" and cfg.labels["team"] == "web"
    keys = {(t.key, t.value, t.effect) for t in cfg.taints}
    assert ("dedicated", "web", "NoSchedule") in keys
    assert ("cilium/agent", "", "NoExecute") in keys
    assert ("karpenter.sh/unregistered", "", "NoExecute") in keys


@pytest.mark.parametrize("family", ["al2023", "bottlerocket"])
def test_reads_kube_reserved(family):
    cfg = userdata.parse(render.render(family, BOOT))
    assert cfg.kube_reserved["memory"] == "893Mi"


def test_decode_handles_plain_single_and_double_base64():
    text = "#!/bin/bash\necho hi\n"
    once = base64.b64encode(text.encode()).decode()
    twice = base64.b64encode(once.encode()).decode()
    assert userdata.decode(once) == text == userdata.decode(twice)
    assert userdata.decode(None) == ""


def test_unknown_user_data_is_custom():
    assert userdata.parse("#!/bin/bash\necho hi\n").family == "custom"
