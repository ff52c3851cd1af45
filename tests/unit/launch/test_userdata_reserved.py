"""Every family's user data states the max pods and the kube-reserved the scheduler packed with.

The path is the real one: manifests -> `pools.prepare` (sizing) -> the scheduler -> `launching.bootstrap`
-> the family's renderer. The rendered user data is read back (NodeConfig YAML, Bottlerocket TOML,
bootstrap.sh flags) and the node's allocatable memory is computed from what it says, as the kubelet
would (capacity - kube-reserved - system-reserved - eviction), then compared with the scheduler's option.
"""

from __future__ import annotations

import re
import tomllib
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from carpool import quantity
from carpool.amis.offline import placeholder_amis
from carpool.api.loader import load
from carpool.app import launching, pools
from carpool.app.settings import Settings
from carpool.catalog import Catalog
from carpool.launch.userdata import render
from carpool.launch.userdata.mime import parse_archive
from carpool.resources import MEMORY
from carpool.scheduling import convert
from carpool.scheduling.scheduler import schedule
from carpool.sizing import kube_reserved_cpu_millis

CATALOG = Catalog.snapshot()
MIB = quantity.MIB
ALIASES = {"al2023": "al2023@latest", "bottlerocket": "bottlerocket@latest", "al2": "al2@latest"}

MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: nc}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [{type}]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: nc
  annotations: {{carpool.dev/prefix-delegation: "{prefix}"}}
spec:
  role: node
  amiSelectorTerms: [{{alias: {alias}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
{kubelet}
---
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: shop}}
spec:
  containers: [{{name: c, image: c, resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}}}]
"""


def user_data_for(family: str, type_name: str, prefix: bool = True, kubelet: str = "") -> tuple[str, Any, Any]:
    """(rendered user data, the node size, the scheduler's option) for one claim of `type_name`."""
    manifests = load(MANIFESTS.format(type=type_name, prefix=str(prefix).lower(), alias=ALIASES[family],
                                      kubelet=kubelet))
    prepared = pools.prepare(manifests, CATALOG, placeholder_amis, {}, {}, set(), {})
    ctx = prepared.contexts["p"]
    result = schedule([convert.pod_spec(p) for p in manifests.pods], prepared.specs)
    [claim] = result.claims
    [choice] = claim.instance_types
    deps = SimpleNamespace(settings=Settings("demo", cluster_endpoint="https://demo.eks", cluster_ca="Q0E=", cluster_version="1.32", cluster_cidr="10.100.0.0/16", cluster_dns="10.100.0.10", cluster_ip_family="ipv4"))
    boot = launching.bootstrap(claim, ctx, choice.name, "on-demand", deps)  # type: ignore[arg-type]
    [option] = [o for o in prepared.specs[0].instance_types if o.name == choice.name]
    return render(family, boot), ctx.sizes[choice.name], option


def read_back(family: str, text: str) -> tuple[int, dict[str, str]]:
    """(max pods, kube-reserved) as the node's bootstrap would read them from the user data."""
    if family == "al2023":
        config = yaml.safe_load(parse_archive(text)[-1].body)["spec"]["kubelet"]["config"]
        return config["maxPods"], config["kubeReserved"]
    if family == "bottlerocket":
        k8s = tomllib.loads(text)["settings"]["kubernetes"]
        return k8s["max-pods"], k8s["kube-reserved"]
    max_pods = re.search(r"--max-pods=(\d+)", text)
    reserved = re.search(r"--kube-reserved=(\S+?)[' ]", text)
    assert max_pods and reserved and "--use-max-pods false" in text
    return int(max_pods.group(1)), dict(kv.split("=", 1) for kv in reserved.group(1).split(","))


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2"])
@pytest.mark.parametrize(("type_name", "prefix", "pods"), [
    ("c6g.medium", True, 98), ("m5.large", True, 110), ("m5.large", False, 29), ("m5.24xlarge", True, 250),
])
def test_user_data_states_kube_reserved_for_its_max_pods(family: str, type_name: str, prefix: bool, pods: int) -> None:
    text, size, option = user_data_for(family, type_name, prefix)
    max_pods, reserved = read_back(family, text)
    assert max_pods == size.max_pods == pods
    assert reserved == {
        "cpu": f"{kube_reserved_cpu_millis(CATALOG[type_name].vcpus)}m",
        "memory": f"{255 + 11 * pods}Mi",
        "ephemeral-storage": "1Gi",
    }
    # what the node will report = what the scheduler packed against
    node_allocatable = size.capacity[MEMORY] - quantity.resource_value("memory", reserved["memory"]) - 100 * MIB
    assert node_allocatable == option.allocatable[MEMORY] == size.allocatable[MEMORY]


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2"])
def test_max_pods_override_drives_the_stated_reservation(family: str) -> None:
    text, size, _ = user_data_for(family, "m5.large", kubelet="  kubelet: {maxPods: 40}")
    assert read_back(family, text) == (40, {"cpu": "70m", "memory": f"{255 + 11 * 40}Mi", "ephemeral-storage": "1Gi"})
    assert size.max_pods == 40


@pytest.mark.parametrize("family", ["al2023", "al2"])
def test_pods_per_core_drives_the_stated_reservation(family: str) -> None:
    text, _, _ = user_data_for(family, "m5.large", kubelet="  kubelet: {podsPerCore: 10}")
    assert read_back(family, text) == (20, {"cpu": "70m", "memory": f"{255 + 11 * 20}Mi", "ephemeral-storage": "1Gi"})


@pytest.mark.parametrize("family", ["al2023", "bottlerocket", "al2"])
def test_user_kube_reserved_wins_per_resource(family: str) -> None:
    text, size, option = user_data_for(family, "c6g.medium", kubelet="  kubelet: {kubeReserved: {memory: 600Mi}}")
    assert read_back(family, text) == (98, {"cpu": "60m", "memory": "600Mi", "ephemeral-storage": "1Gi"})
    assert option.allocatable[MEMORY] == size.capacity[MEMORY] - 600 * MIB - 100 * MIB
