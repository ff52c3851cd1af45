"""The simulated node's bootstrap reads user data: carpool's own renderers' output and hand-written ones."""

import base64

import pytest

from carpool.launch import userdata as render
from carpool.launch.userdata.bootstrap import NodeBootstrap
from carpool.sim.cluster import userdata
from carpool.taints import Taint

BOOT = NodeBootstrap(
    cluster_name="demo", endpoint="https://demo.eks", ca_bundle="Q0E=", cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10", max_pods=58,
    kube_reserved={"cpu": 70, "memory": 893 * 1024 * 1024},
    system_reserved={"memory": 100 * 1024 * 1024},
    eviction_hard={"memory.available": "200Mi"},
    labels={"karpenter.sh/nodepool": "flex", "team": "web"},
    taints=(Taint("dedicated", "NoSchedule", "web"),), startup_taints=(Taint("cilium/agent", "NoExecute"),),
)


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2"])
def test_reads_labels_taints_and_max_pods(family):
    cfg = userdata.parse(userdata.decode(render.encode(render.render(family, BOOT))))
    assert cfg.family == family
    assert cfg.max_pods == 58
    assert cfg.labels == {"karpenter.sh/nodepool": "flex", "team": "web"}
    keys = {(t.key, t.value, t.effect) for t in cfg.taints}
    assert keys == {("dedicated", "web", "NoSchedule"), ("cilium/agent", "", "NoExecute"),
                    ("karpenter.sh/unregistered", "", "NoExecute")}


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2"])
def test_reads_reserved_resources_and_eviction(family):
    cfg = userdata.parse(render.render(family, BOOT))
    assert cfg.kube_reserved == {"cpu": "70m", "memory": "893Mi"}
    assert cfg.system_reserved == {"memory": "100Mi"}
    assert cfg.eviction_hard == {"memory.available": "200Mi"}


def test_al2_flags_replace_the_config_file_maps_and_al2023_config_merges():
    al2 = userdata.parse(render.render("al2", BOOT))
    al2023 = userdata.parse(render.render("al2023", BOOT))
    assert {"kube_reserved", "system_reserved", "eviction_hard"} <= al2.flag_maps
    assert al2023.flag_maps == set()


def test_unset_settings_stay_none():
    bare = NodeBootstrap(cluster_name="demo", endpoint="https://demo.eks", ca_bundle="Q0E=",
                         cluster_cidr="10.100.0.0/16")
    for family in ("al2023", "bottlerocket", "al2"):
        cfg = userdata.parse(render.render(family, bare))
        assert cfg.max_pods is None and cfg.kube_reserved is None and cfg.eviction_hard is None, family


def test_nodeadm_merges_node_configs_in_order_and_appends_flags():
    text = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config: {maxPods: 20, kubeReserved: {cpu: 100m, memory: 300Mi}}
    flags: ["--node-labels=a=1"]
--//
Content-Type: text/x-shellscript

#!/bin/bash
echo 'kind: NodeConfig' > /dev/null
--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config: {maxPods: 30, kubeReserved: {memory: 400Mi}}
    flags: ["--node-labels=b=2"]
--//--
"""
    cfg = userdata.parse(text)
    assert cfg.family == "al2023" and cfg.max_pods == 30
    assert cfg.kube_reserved == {"cpu": "100m", "memory": "400Mi"}
    assert cfg.labels == {"a": "1", "b": "2"}


def test_nodeadm_ignores_node_configs_outside_its_content_type():
    text = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec: {kubelet: {config: {maxPods: 7}}}
--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec: {kubelet: {config: {podsPerCore: 4}}}
--//--
"""
    cfg = userdata.parse(text)
    assert cfg.max_pods is None and cfg.pods_per_core == 4


def test_al2_use_max_pods_false_and_flags_in_a_mime_part():
    script = ("#!/bin/bash\n/etc/eks/bootstrap.sh 'demo' \\\n--use-max-pods false \\\n"
              "--kubelet-extra-args '--node-labels=x=y --max-pods=17 --eviction-hard=memory.available<300Mi'\n")
    cfg = userdata.parse(script)
    assert cfg.family == "al2" and cfg.use_max_pods is False and cfg.max_pods == 17
    assert cfg.labels == {"x": "y"} and cfg.eviction_hard == {"memory.available": "300Mi"}


def test_decode_handles_plain_single_and_double_base64():
    text = "#!/bin/bash\necho hi\n"
    once = base64.b64encode(text.encode()).decode()
    twice = base64.b64encode(once.encode()).decode()
    assert userdata.decode(once) == text == userdata.decode(twice)
    assert userdata.decode(None) == ""


def test_unknown_user_data_is_custom():
    assert userdata.parse("#!/bin/bash\necho hi\n").family == "custom"
    assert userdata.parse("").family == "custom"
