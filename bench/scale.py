"""carpool's minute-by-minute reads on a large cluster: 5,000 nodes and 150,000 running pods served by the
simulated kube-apiserver (`carpool.sim.cluster.apiserver`) over HTTP, read through the real lightkube adapter.

Three processes, so each measurement is a process of its own as a Lambda is:
- the API server (`python -m bench.scale serve`): builds the cluster (pods of realistic size: managed
  fields, probes, projected token volume, container statuses) and answers; on a line on stdin it prints
  what it served since the last line (requests by kind, bytes) as JSON;
- the watcher (`measure watcher`): one `carpool.app.watch.run` resync (no watch period), timed;
- the disruption pass (`measure disruption`): `carpool.app.disruption_executor.run` with one live claim per
  node in an in-memory ledger (steady state: every node's pods recorded long ago, so every node is a
  consolidation candidate), timed twice (a cold run, then a second run).
Each measuring process reports wall seconds and its peak resident memory (`VmHWM`: interpreter and
imports included, what counts against a Lambda's memory size; not `ru_maxrss`, which Linux carries over
from the parent that spawned the process: under `make bench` it read 92 MB for a watcher that
peaks at 68). Targets: the disruption pass within its timeout on the deployed core (`DISRUPTION_TARGET`) and
<= 1,769 MB; watcher resync within its minute. Also Karpenter's mixed workload at 100,000 pods through the
scheduler (solve time only).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from carpool import delivery
from carpool.sim.run import durations

ROOT = Path(__file__).resolve().parents[1]
NODES = int(os.environ.get("CARPOOL_SCALE_NODES", "5000"))  # smaller for a quick look
PODS_PER_NODE = 30  # 28 workload pods + 2 DaemonSet pods
PENDING = 50
FINISHED = min(1_000, NODES)
CLUSTER = "scale"
INSTANCE_TYPE = "m5.2xlarge"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
#: the pass must finish within the function's timeout on the deployed core (1.2 times slower than this one,
#: `carpool.sim.run.durations.CORE_SLOWDOWN`), in the function's memory
DISRUPTION_TARGET = (round(delivery.TIMEOUT_SECONDS["disruption"] / durations.CORE_SLOWDOWN, 1),
                     float(delivery.MEMORY_MIB["disruption"]))
WATCHER_TARGET_SECONDS = 60.0
#: The watcher runs at `delivery.MEMORY_MIB["watcher"]` (128 MB): its resync, read a page at a time, must
#: leave the Lambda runtime its own ~25 MB above what this process measures (`VmHWM`)
WATCHER_TARGET_MB = 100.0
MIX_PODS = 100_000
CONFIG = f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5m}}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: carpool-node
  amiSelectorTerms: [{{alias: al2023@v20250101}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
"""


# -- the cluster --------------------------------------------------------------------------------------------
def node_name(i: int) -> str:
    return f"ip-10-{i // 250}-{i % 250}-10.ec2.internal"


def node_json(i: int) -> dict[str, Any]:
    name, zone = node_name(i), ZONES[i % len(ZONES)]
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
              "beta.kubernetes.io/os": "linux", "failure-domain.beta.kubernetes.io/region": "us-east-1",
              "failure-domain.beta.kubernetes.io/zone": zone, "k8s.io/cloud-provider-aws": "a" * 32,
              "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "node.kubernetes.io/instance-type": INSTANCE_TYPE, "topology.kubernetes.io/region": "us-east-1",
              "topology.kubernetes.io/zone": zone, "topology.k8s.aws/zone-id": f"use1-az{1 + i % 3}",
              "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
              "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
              "karpenter.k8s.aws/instance-family": "m5", "karpenter.k8s.aws/instance-size": "2xlarge",
              "carpool.dev/owned-by": CLUSTER, "carpool.dev/nodeclaim": f"default-{i:05d}",
              "carpool.dev/image-id": "ami-0aaaaaaaaaaaaaaa1"}
    images = [{"names": [f"602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/image-{k}@sha256:{'b' * 64}",
                         f"602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/image-{k}:v1.{k}.0"],
               "sizeBytes": 10_000_000 + k} for k in range(12)]
    now = "2026-05-01T11:00:00Z"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"node-uid-{i:08d}", "labels": labels,
                         "annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.0.1",
                                         "node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"providerID": f"aws:///{zone}/i-{i:017x}"},
            "status": {"capacity": {"cpu": "8", "memory": "32386544Ki", "pods": "58", "ephemeral-storage": "83873772Ki"},
                       "allocatable": {"cpu": "7910m", "memory": "31369712Ki", "pods": "58",
                                       "ephemeral-storage": "76224326324"},
                       "conditions": [{"type": t, "status": "False", "reason": f"Kubelet{t}", "message": "ok",
                                       "lastHeartbeatTime": now, "lastTransitionTime": now}
                                      for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
                       + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                           "lastHeartbeatTime": now, "lastTransitionTime": now}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
                       "nodeInfo": {"machineID": f"ec2{i:029x}", "systemUUID": f"ec2{i:05x}-0000-0000-0000-000000000000",
                                    "bootID": f"{i:08x}-1111-2222-3333-444444444444", "kubeProxyVersion": "",
                                    "kubeletVersion": "v1.32.1-eks-5d632ec", "containerRuntimeVersion": "containerd://1.7.25",
                                    "osImage": "Amazon Linux 2023.6.20250107", "architecture": "amd64",
                                    "kernelVersion": "6.1.119-129.201.amzn2023.x86_64", "operatingSystem": "linux"},
                       "images": images}}


def pod_json(name: str, node: str | None, app: str, phase: str = "Running", daemon: bool = False) -> dict[str, Any]:
    """A pod as `kubectl get -o json` shows one of a Deployment (or a DaemonSet), about 4.5 KB."""
    owner = ({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": app, "uid": f"ds-{app}", "controller": True,
              "blockOwnerDeletion": True} if daemon else
             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-7d4b9c8f6d", "uid": f"rs-{app}",
              "controller": True, "blockOwnerDeletion": True})
    t = "2026-05-01T10:00:00Z"
    container = {"name": app, "image": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{app}:1.4.2",
                 "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                 "env": [{"name": k, "value": v} for k, v in (("LOG_LEVEL", "info"), ("PORT", "8080"),
                         ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability:4317"),
                         ("AWS_REGION", "us-east-1"), ("JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=75"))],
                 "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
                 "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10,
                                   "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5,
                                    "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                 "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": True,
                                   "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                 "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True}}
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "generateName": f"{app}-7d4b9c8f6d-", "namespace": "apps",
                     "uid": f"uid-{name}", "creationTimestamp": t,
                     "labels": {"app.kubernetes.io/name": app, "pod-template-hash": "7d4b9c8f6d"},
                     "annotations": {"kubectl.kubernetes.io/restartedAt": t},
                     "ownerReferences": [owner],
                     "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                                        "time": t, "fieldsType": "FieldsV1", "fieldsV1": {
                                            "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app.kubernetes.io/name": {},
                                                                                             "f:pod-template-hash": {}},
                                                           "f:ownerReferences": {".": {}, f"k:{{\"uid\":\"rs-{app}\"}}": {}}},
                                            "f:spec": {"f:containers": {f"k:{{\"name\":\"{app}\"}}": {
                                                ".": {}, "f:env": {}, "f:image": {}, "f:imagePullPolicy": {},
                                                "f:livenessProbe": {}, "f:name": {}, "f:ports": {}, "f:readinessProbe": {},
                                                "f:resources": {}, "f:securityContext": {}}},
                                                "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                                                "f:schedulerName": {}, "f:terminationGracePeriodSeconds": {}}}},
                                       {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": t,
                                        "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {
                                            "f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {},
                                                         "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}}]},
        "spec": {"containers": [container],
                 "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                     {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                     {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                     {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                                   "fieldPath": "metadata.namespace"}}]}}]}}],
                 "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                 "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
                 "schedulerName": "default-scheduler", "enableServiceLinks": True, "priority": 0,
                 "preemptionPolicy": "PreemptLowerPriority",
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 300},
                                 {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 300}]},
        "status": {"phase": phase, "qosClass": "Burstable"},
    }
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"].update({
            "hostIP": "10.0.0.1", "podIP": "10.0.1.1", "podIPs": [{"ip": "10.0.1.1"}], "startTime": t,
            "conditions": [{"type": c, "status": "True" if phase == "Running" else "False", "lastProbeTime": None,
                            "lastTransitionTime": t} for c in ("PodReadyToStartContainers", "Initialized", "Ready",
                                                               "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": app, "ready": phase == "Running", "restartCount": 0, "started": True,
                                   "image": container["image"], "imageID": f"{container['image']}@sha256:{'c' * 64}",
                                   "containerID": f"containerd://{'d' * 64}",
                                   "state": {"running": {"startedAt": t}}}]})
    else:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": "0/5000 nodes are available: 5000 Insufficient cpu.",
                                        "lastProbeTime": None, "lastTransitionTime": t}]
    return pod


def build_cluster() -> Any:
    from carpool.sim.cluster.simulated import SimulatedCluster

    cluster = SimulatedCluster(lambda: NOW)
    for i in range(NODES):
        name = node_name(i)
        cluster.add_node(node_json(i))
        for ds in ("kube-proxy", "aws-node"):
            cluster.add_pod(pod_json(f"{ds}-{i:05d}", name, ds, daemon=True))
        for j in range(PODS_PER_NODE - 2):
            cluster.add_pod(pod_json(f"app-{i:05d}-{j:02d}", name, f"svc-{(i * 7 + j) % 400}"))
    for i in range(FINISHED):
        cluster.add_pod(pod_json(f"job-{i:05d}", node_name(i), "batch", phase="Succeeded"))
    for i in range(PENDING):  # created, then marked Unschedulable as kube-scheduler would
        key = cluster.add_pod(pod_json(f"big-{i:03d}", None, "big", phase="Pending"))
        cluster._mark_unschedulable(cluster.pods[key], NODES)
    for store in (cluster.pods, cluster.nodes):  # serialized up front, as the watch cache keeps objects
        for rec in store.values():
            cluster.encoded(rec)
    return cluster


def serve() -> None:
    """The API server process: prints its URL, then a stats line for each line read on stdin."""
    from carpool.sim.cluster.apiserver import SimApiServer

    started = time.perf_counter()
    cluster = build_cluster()
    with SimApiServer(cluster) as server:
        print(json.dumps({"url": server.url, "buildSeconds": round(time.perf_counter() - started, 1),
                          "pods": len(cluster.pods), "nodes": len(cluster.nodes)}), flush=True)
        for _ in sys.stdin:
            with server.lock:
                log, sent = list(server.log), server.bytes_sent
                server.log.clear()
                server.bytes_sent = 0
            kinds = Counter(_request_kind(r) for r in log)
            print(json.dumps({"requests": dict(sorted(kinds.items())), "bytes": sent}), flush=True)


def _request_kind(r: Any) -> str:
    """e.g. "list pods [status.phase!=Succeeded,...]", "patch nodes", "post eviction" (names collapsed)."""
    parts = [p for p in r.path.split("/") if p]
    lists = ("pods", "nodes", "poddisruptionbudgets", "daemonsets")
    if parts[-1] in lists:
        verb, resource = ("watch" if "watch" in r.query else "list"), parts[-1]
    else:
        verb, resource = r.method.lower(), parts[-1] if parts[-1] == "eviction" else parts[-2]
    selector = r.query.get("fieldSelector", "")
    if selector.startswith("spec.nodeName=") and "," not in selector and selector != "spec.nodeName=":
        selector = "spec.nodeName=<node>"
    meta = " metadata-only" if r.metadata_only else ""
    return f"{verb} {resource}" + (f" [{selector}]" if selector else "") + meta


# -- the measured processes ----------------------------------------------------------------------------------
def _adapter(url: str) -> Any:
    from carpool.adapters.k8s.cluster import ClusterAccess, LightkubeCluster

    class FixedToken:
        stale = False

        def token(self) -> str:
            return "k8s-aws-v1.bench"

    return LightkubeCluster(CLUSTER, "us-east-1", access=ClusterAccess(url, ""), tokens=FixedToken())


class _Compute:
    """EC2 for the disruption pass: subnets and security groups to discover, launches that succeed."""

    def __init__(self) -> None:
        self.launched = 0
        self.terminated: list[str] = []

    def describe_subnets(self, filters: Any) -> list[dict[str, Any]]:
        return [{"SubnetId": f"subnet-{z}", "AvailabilityZone": z, "AvailableIpAddressCount": 8000, "State": "available"}
                for z in ZONES]

    def describe_security_groups(self, filters: Any) -> list[dict[str, Any]]:
        return [{"GroupId": "sg-1"}]

    def ensure_launch_template(self, request: Any) -> str:
        return str(request["LaunchTemplateName"])

    def list_launch_templates(self, cluster: str) -> list[dict[str, Any]]:
        return []

    def delete_launch_template(self, name: str) -> None:
        return None

    def describe_instances(self, filters: Any) -> list[dict[str, Any]]:
        return []

    def terminate_instances(self, instance_ids: Any) -> None:
        self.terminated.extend(instance_ids)

    def create_fleet(self, request: Any) -> dict[str, Any]:
        override = request["LaunchTemplateConfigs"][0]["Overrides"][0]
        self.launched += 1
        return {"Instances": [{"InstanceIds": [f"i-new{self.launched:013d}"], "InstanceType": override["InstanceType"],
                               "LaunchTemplateAndOverrides": {"Overrides": override}}], "Errors": []}


def _ami_source() -> Any:
    from carpool.amis import InMemoryAmiSource, alias_paths, parse_alias

    params = {ap.path: "ami-0aaaaaaaaaaaaaaa1" for ap in alias_paths(parse_alias("al2023@v20250101"), "1.32")
              if ap.arch == "amd64" and ap.variants[0] == "standard"}
    images = [{"ImageId": "ami-0aaaaaaaaaaaaaaa1", "Name": "amazon-eks-node-al2023-x86_64-standard-1.32-v20250101",
               "Architecture": "x86_64", "CreationDate": "2025-01-01T00:00:00.000Z", "State": "available",
               "OwnerId": "137112412989", "ImageOwnerAlias": "amazon"}]
    return InMemoryAmiSource(images=images, parameters=params)


def _deps(url: str, ledger: Any, compute: Any) -> Any:
    from carpool.app.settings import Settings
    from carpool.app.sources import StaticCatalogSource, TextConfigSource
    from carpool.app.wiring import Dependencies
    from carpool.state.memory import MemoryCapacityCache, MemoryOfferings

    class Publisher:
        def put_events(self, entries: Any) -> int:
            return 0

    return Dependencies(
        settings=Settings(cluster_name=CLUSTER, event_bus="bus", cluster_version="1.32", instance_profile="carpool-node",
                          cluster_endpoint=f"https://{CLUSTER}.eks.local", cluster_ca="Q0E=", cluster_cidr="10.100.0.0/16",
                          cluster_dns="10.100.0.10", cluster_ip_family="ipv4"),
        cluster=_adapter(url), compute=compute, ledger=ledger, offerings=MemoryOfferings(),
        capacity=MemoryCapacityCache(), publisher=Publisher(), ami_source=_ami_source(),
        config=TextConfigSource(lambda: CONFIG), catalog=StaticCatalogSource("us-east-1"), clock=lambda: NOW)


def _claims(ledger: Any) -> None:
    """One registered claim per node, its pods recorded an hour ago (consolidateAfter has passed)."""
    from carpool.disruption import candidates
    from carpool.state.models import Claim, ClaimStatus

    for i in range(NODES):
        name = node_name(i)
        pods = [f"apps/app-{i:05d}-{j:02d}" for j in range(PODS_PER_NODE - 2)]
        claim = Claim(name=f"default-{i:05d}", nodepool="default", nodeclass="default", status=ClaimStatus.REGISTERED,
                      created_at=NOW - timedelta(days=1), instance_types=[INSTANCE_TYPE], capacity_type="on-demand",
                      zone=ZONES[i % len(ZONES)], instance_id=f"i-{i:017x}", instance_type=INSTANCE_TYPE,
                      image_id="ami-0aaaaaaaaaaaaaaa1", launched_at=NOW - timedelta(days=1),
                      registered_at=NOW - timedelta(days=1), node_name=name, price=0.384,
                      reserved={"cpu": 8000, "memory": 32 * 2**30, "nodes": 1},
                      allocatable={"cpu": 7910, "memory": 31369712 * 1024, "pods": 58},
                      pods_digest=candidates.pods_digest(pods), pods_changed_at=NOW - timedelta(hours=1))
        ledger.reserve(claim, None, NOW - timedelta(days=1), 60)


def _peak_mb() -> float:
    """This process's own peak resident memory (the high-water mark of its address space, which a new
    program starts afresh; `ru_maxrss` would include the spawning parent's), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # not Linux: a ceiling


def measure(what: str, url: str) -> dict[str, Any]:
    """Runs in its own process: the watcher's resync, or the disruption pass (twice)."""
    from carpool import observability

    observability.emit = lambda *a, **k: None  # type: ignore[assignment] - metrics lines are not the subject
    from carpool.state.memory import MemoryLedger

    if what == "watcher":
        from carpool.app import watch

        deps = _deps(url, MemoryLedger(), _Compute())
        start, cpu = time.perf_counter(), time.process_time()
        summary = watch.run(deps, watch_seconds=0.0)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        stats = deps.cluster.read_stats
        # CPU seconds are carpool's own work: the wall time also waits on the simulated API server's pages
        return {"seconds": round(seconds, 2), "cpuSeconds": round(cpu_seconds, 2), "peakMB": _peak_mb(),
                "pendingPods": summary.pending_pods, "pages": stats.pages, "bytesRead": stats.bytes}
    from carpool.app import disruption_executor
    from carpool.app.disruption_summary import DisruptSummary

    ledger, compute = MemoryLedger(), _Compute()
    _claims(ledger)
    deps = _deps(url, ledger, compute)
    runs = []
    for i in range(2):
        summary = DisruptSummary()
        start = time.perf_counter()
        disruption_executor.run(deps, NOW, summary)
        runs.append({"seconds": round(time.perf_counter() - start, 2), "decisions": len(summary.decisions),
                     "stages": summary.stages, "peakMB": _peak_mb()})
        if i == 0:  # the parent reads what the API server served for this run before the next one
            print(json.dumps({"run": 1}), flush=True)
            sys.stdin.readline()
    stats = deps.cluster.read_stats
    return {"runs": runs, "seconds": max(r["seconds"] for r in runs), "peakMB": _peak_mb(),
            "launched": compute.launched, "pages": stats.pages, "bytesRead": stats.bytes}


def karpenter_mix(pods: int = MIX_PODS) -> dict[str, Any]:
    """Karpenter's mixed workload through the scheduler (solve only, in its own process)."""
    from bench import workloads
    from carpool.scheduling.scheduler import schedule

    types = workloads.synthetic_types(400)
    batch = workloads.diverse_pods(pods)
    start = time.perf_counter()
    result = schedule(batch, [workloads.default_pool(types)])
    return {"pods": pods, "seconds": round(time.perf_counter() - start, 2), "nodeClaims": len(result.claims),
            "unschedulable": len(result.unschedulable), "peakMB": _peak_mb()}


# -- orchestration ---------------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT)])}


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.scale", *args], capture_output=True, text=True, env=_env(),
                         cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _disruption_child(url: str, served: Any) -> dict[str, Any]:
    """The disruption pass's process, with what the API server served during each of its runs."""
    child = subprocess.Popen([sys.executable, "-m", "bench.scale", "measure", "disruption", url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    assert child.stdin is not None and child.stdout is not None
    json.loads(child.stdout.readline())  # the first run is done
    first = served()
    child.stdin.write("\n")
    child.stdin.flush()
    result: dict[str, Any] = json.loads(child.stdout.read().strip().splitlines()[-1])
    if child.wait() != 0:
        raise RuntimeError("the disruption measurement failed")
    result["runs"][0]["api"], result["runs"][1]["api"] = first, served()
    result["api"] = result["runs"][1]["api"]  # the steady state: what every later minute costs
    return result


def rows() -> list[dict[str, Any]]:
    server = subprocess.Popen([sys.executable, "-m", "bench.scale", "serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    assert server.stdin is not None and server.stdout is not None
    try:
        info = json.loads(server.stdout.readline())

        def served() -> dict[str, Any]:
            server.stdin.write("\n")  # type: ignore[union-attr]
            server.stdin.flush()  # type: ignore[union-attr]
            return json.loads(server.stdout.readline())  # type: ignore[union-attr]

        watcher = _child("measure", "watcher", info["url"])
        watcher["api"] = served()
        disruption = _disruption_child(info["url"], served)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    mix = _child("mix")
    return [
        {"benchmark": f"watcher resync {NODES:,} nodes / {info['pods']:,} pods", **watcher,
         "targetSeconds": WATCHER_TARGET_SECONDS, "targetMB": WATCHER_TARGET_MB},
        {"benchmark": f"disruption pass {NODES:,} nodes / {info['pods']:,} pods", **disruption,
         "targetSeconds": DISRUPTION_TARGET[0], "targetMB": DISRUPTION_TARGET[1]},
        {"benchmark": f"karpenter-mix {MIX_PODS:,} pods (solve)", **mix},
    ]


def print_rows(items: list[dict[str, Any]]) -> None:
    print()
    for r in items:
        verdict = ""
        if "targetSeconds" in r:
            ok = r["seconds"] <= r["targetSeconds"] and r["peakMB"] <= r.get("targetMB", float("inf"))
            verdict = f"target <= {r['targetSeconds']:.0f} s" + (f", <= {r['targetMB']:.0f} MB" if "targetMB" in r else "")
            verdict += " ok" if ok else " MISSED"
        print(f"{r['benchmark']:48} {r['seconds']:>7.2f} s {r['peakMB']:>8.1f} MB  {verdict}")
        for i, run in enumerate(r.get("runs") or [r], 1):
            if "api" in run:
                reqs = ", ".join(f"{n} {k}" for k, n in run["api"]["requests"].items())
                stages = ", ".join(f"{k} {v:.1f} s" for k, v in (run.get("stages") or {}).items())
                label = f"run {i}: {run['seconds']:.1f} s ({stages}), " if "runs" in r else ""
                print(f"{'':48} {label}API per run (= per minute): {reqs}; {run['api']['bytes'] / 2**20:.1f} MiB sent")


def report(skip: bool = False) -> list[dict[str, Any]]:
    """What `python -m bench` calls: run, print, and write bench/scale_results.json."""
    if skip:
        return []
    items = rows()
    print_rows(items)
    Path(__file__).with_name("scale_results.json").write_text(json.dumps(items, indent=2) + "\n")
    return items


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve()
    elif argv[:1] == ["measure"]:
        print(json.dumps(measure(argv[1], argv[2])))
    elif argv[:1] == ["mix"]:
        print(json.dumps(karpenter_mix(int(argv[1]) if len(argv) > 1 else MIX_PODS)))
    else:
        report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
