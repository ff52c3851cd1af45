"""Wall time per stage of what users wait for: `carpool plan` on Karpenter's benchmark workload.

`carpool plan` is timed as a user runs it: a pods file (`kubectl get pods -o json` shape, one List) of
Karpenter's benchmark mix, one NodePool and EC2NodeClass, the shipped catalog. Stages: load (read, parse
and validate the files), catalog (catalog snapshot and scheduler inputs), solve (`schedule`), output
(the JSON plan written).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import workloads
from carpool.scheduling.inputs import AffinityTerm, LabelSelector, PodSpec, TopologySpread

MANIFESTS = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
"""


def _selector(selector: LabelSelector) -> dict[str, Any]:
    return {"matchLabels": dict(selector.match_labels)}


def _term(term: AffinityTerm) -> dict[str, Any]:
    return {"topologyKey": term.topology_key, "labelSelector": _selector(term.selector)}


def _spread(spread: TopologySpread) -> dict[str, Any]:
    return {"maxSkew": spread.max_skew, "topologyKey": spread.topology_key,
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _selector(spread.selector)}


def pod_manifest(spec: PodSpec) -> dict[str, Any]:
    """A pending pod as the API server lists it, from one scheduler input of the benchmark mix."""
    namespace, _, name = spec.key.partition("/")
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
                        "resources": {"requests": {"cpu": f"{spec.requests['cpu']}m",
                                                   "memory": f"{spec.requests['memory'] // workloads.MIB}Mi"}}}],
    }
    if spec.spread:
        pod_spec["topologySpreadConstraints"] = [_spread(s) for s in spec.spread]
    affinity: dict[str, Any] = {}
    if spec.affinity:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(t) for t in spec.affinity]}
    if spec.anti_affinity:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(t) for t in spec.anti_affinity]}
    if affinity:
        pod_spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "labels": dict(spec.labels)},
        "spec": pod_spec,
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }


def write_inputs(directory: Path, count: int, *, fmt: str = "json") -> tuple[Path, Path]:
    """(manifests, pods) files for `carpool plan -m manifests -p pods` with `count` benchmark pods."""
    directory.mkdir(parents=True, exist_ok=True)
    manifests = directory / "nodepools.yaml"
    manifests.write_text(MANIFESTS)
    items = [pod_manifest(p) for p in workloads.diverse_pods(count)]
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    pods = directory / f"pods-{count}.{fmt}"
    if fmt == "json":
        pods.write_text(json.dumps(doc))
    else:
        import yaml

        pods.write_text(yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
    return manifests, pods


def sizes(values: Sequence[int]) -> list[int]:
    return list(values)
