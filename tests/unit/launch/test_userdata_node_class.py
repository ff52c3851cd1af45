"""A realistic NodePool and EC2NodeClass through the real path (manifests -> `pools.prepare` -> the scheduler
-> `launching.bootstrap` -> user data), read back by the simulated bootstrap and kubelet: the kubelet fields,
the 100Gi root volume and the labels reach the node as Karpenter would put them there."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from carpool.amis.offline import placeholder_amis
from carpool.api.loader import load
from carpool.app import launching, pools
from carpool.app.settings import Settings
from carpool.catalog import Catalog
from carpool.launch.userdata import render
from carpool.resources import EPHEMERAL_STORAGE
from carpool.scheduling import convert
from carpool.scheduling.scheduler import schedule
from carpool.sim.cluster import kubelet as sim_kubelet
from carpool.sim.cluster import nodeboot, userdata

CATALOG = Catalog.snapshot()
GIB = 2**30
ALIASES = {"al2023": "al2023@latest", "bottlerocket": "bottlerocket@latest", "al2": "al2@latest",
           "windows2022": "windows2022@latest"}
MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    metadata:
      labels:
        team: payments
        node-restriction.kubernetes.io/isolation: pci
        kops.k8s.io/instancegroup: nodes
        example.node.kubernetes.io/tier: web
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: nc}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: nc}}
spec:
  role: node
  amiSelectorTerms: [{{alias: {alias}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  blockDeviceMappings:
    - {{deviceName: {device}, rootVolume: true, ebs: {{volumeSize: 100Gi, volumeType: gp3}}}}
  kubelet:
    clusterDNS: [172.20.0.10]
    evictionSoft: {{memory.available: 500Mi}}
    evictionSoftGracePeriod: {{memory.available: 1m30s}}
{pid}
---
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: shop}}
spec:
  containers: [{{name: c, image: c, resources: {{requests: {{cpu: 10m, memory: 16Mi, ephemeral-storage: 30Gi}}}}}}]
"""
DEVICE = {"bottlerocket": "/dev/xvdb", "windows2022": "/dev/sda1"}


def launched(family: str) -> tuple[str, Any]:
    """(user data, node size) of the one claim the pod asking 30Gi of ephemeral storage gets."""
    pid = "" if family == "bottlerocket" else '    kubeReserved: {pid: "1000"}'  # Bottlerocket reserves no pids
    manifests = load(MANIFESTS.format(alias=ALIASES[family], device=DEVICE.get(family, "/dev/xvda"), pid=pid))
    prepared = pools.prepare(manifests, CATALOG, placeholder_amis, {}, {}, set(), {})
    result = schedule([convert.pod_spec(p) for p in manifests.pods], prepared.specs)
    [claim] = result.claims  # the 30Gi pod fits a node of the 100Gi root volume
    [choice] = claim.instance_types
    deps = SimpleNamespace(settings=Settings("demo", cluster_endpoint="https://demo.eks", cluster_ca="Q0E=",
                                             cluster_version="1.32", cluster_cidr="10.100.0.0/16",
                                             cluster_dns="10.100.0.10", cluster_ip_family="ipv4"))
    ctx = prepared.contexts["p"]
    boot = launching.bootstrap(claim, ctx, choice.name, "on-demand", deps)  # type: ignore[arg-type]
    return render(family, boot), ctx.sizes[choice.name]


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2", "windows2022"])
def test_the_node_runs_the_node_class_kubelet_settings_and_sizes_from_the_root_volume(family: str) -> None:
    text, size = launched(family)
    assert size.capacity[EPHEMERAL_STORAGE] == 100 * GIB
    config = nodeboot.parse_windows(text) if family.startswith("windows") else userdata.parse(text)
    facts = sim_kubelet.InstanceFacts("m5.large", 2, 8192, "amd64", 3, 10)
    kubelet = nodeboot.resolve(config, nodeboot.WINDOWS if family.startswith("windows") else config.family,
                               facts.vcpus, facts.max_enis, facts.ipv4_per_eni)
    assert sim_kubelet.startup_refusal(kubelet) == ""  # the kubelet starts
    assert kubelet.settings["clusterDNS"] == ["172.20.0.10"]
    assert kubelet.settings["evictionSoft"] == {"memory.available": "500Mi"}
    if family != "bottlerocket":
        assert kubelet.kube_reserved["pid"] == "1000"
    capacity, allocatable = sim_kubelet.node_resources(facts, kubelet, 7577, volume_gib=100)
    assert int(allocatable["ephemeral-storage"].removesuffix("Ki")) * 1024 > 30 * GIB


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2", "windows2022"])
def test_labels_the_kubelet_may_not_set_stay_out_of_the_user_data(family: str) -> None:
    text, _ = launched(family)
    config = nodeboot.parse_windows(text) if family.startswith("windows") else userdata.parse(text)
    assert config.labels["team"] == "payments"
    assert config.labels["example.node.kubernetes.io/tier"] == "web"  # in the kubelet's own namespace
    assert "node-restriction.kubernetes.io/isolation" not in config.labels
    assert "kops.k8s.io/instancegroup" not in config.labels
