"""Every instance local EC2 runs becomes a kubelet a boot time after its launch, as an EC2 instance becomes a
node: `InstanceBridge` polls DescribeInstances once a second, and for each running instance whose boot time
has passed reads what the instance itself would read (its user data as IMDS serves it: the launch template
version CreateFleet launched it from, else the instance's userData attribute; its instance type; its
volumes), turns it into a `NodeSpec` (`carpool_boot.node_spec`) and starts a kubelet from it. An instance
that is stopping, stopped, shutting down or terminated has its kubelet stopped, so its Node stops
heartbeating and the node lifecycle controller sees it go, as on EC2.

A boot that fails (nodeadm refuses the NodeConfig, Bottlerocket refuses the settings) starts no kubelet: the
instance runs and never becomes a node, and `failures` says why.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlparse

from tests.realcluster import carpool_boot
from tests.realcluster.node_spec import NodeSpec

log = logging.getLogger(__name__)

#: the tags EC2 puts on an instance launched from a launch template
LT_ID_TAG, LT_VERSION_TAG = "aws:ec2launchtemplate:id", "aws:ec2launchtemplate:version"
#: states in which an instance's kubelet runs no longer (the machine is going or gone)
GONE_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
POLL_SECONDS = 1.0


class Kubelets(Protocol):
    """The kubelet side: starts a kubelet from a spec, stops one by node name."""

    def start(self, spec: NodeSpec) -> None: ...

    def stop(self, name: str) -> None: ...


class InstanceBridge:
    """Instances of local EC2 -> kubelets. `start()` runs `poll_once` every `poll_seconds` on a thread until
    `stop()`; tests may call `poll_once` themselves instead."""

    def __init__(self, ec2: Any, kubelets: Kubelets, boot_seconds: float, *, poll_seconds: float = POLL_SECONDS,
                 clock: Callable[[], float] = time.time,
                 node_spec: Callable[..., NodeSpec] = carpool_boot.node_spec) -> None:
        self.ec2 = ec2
        self.kubelets = kubelets
        self.boot_seconds = boot_seconds
        self.poll_seconds = poll_seconds
        self.clock = clock
        self._node_spec = node_spec
        #: instance id -> the node name of its running kubelet
        self.running: dict[str, str] = {}
        #: instance id -> why its boot failed (it never becomes a node)
        self.failures: dict[str, str] = {}
        #: errors of whole polls (local AWS unreachable...), the latest last
        self.errors: list[str] = []
        self._types: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- the thread -------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="instance-bridge", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops polling; running kubelets are left to their owner (stopping them is not this thread's
        business once the tier tears down)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as err:  # a poll that fails is retried on the next tick, as the kubelets wait
                log.warning("instance bridge poll failed: %s", err)
                self.errors.append(f"{type(err).__name__}: {err}")
            self._stop.wait(self.poll_seconds)

    # -- one poll ---------------------------------------------------------------------------------------
    def poll_once(self) -> None:
        with self._lock:
            now = self.clock()
            for inst in self._instances():
                self._step(inst, now)

    def _instances(self) -> list[dict[str, Any]]:
        pages = self.ec2.get_paginator("describe_instances").paginate()
        return [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]

    def _step(self, inst: Mapping[str, Any], now: float) -> None:
        iid, state = str(inst["InstanceId"]), str(inst["State"]["Name"])
        if state in GONE_STATES:
            name = self.running.pop(iid, None)
            if name is not None:
                log.info("instance %s is %s: stopping kubelet %s", iid, state, name)
                self.kubelets.stop(name)
            return
        if state != "running" or iid in self.running or iid in self.failures:
            return
        if now < launched_at(inst) + self.boot_seconds:
            return
        try:
            spec = self.spec_of(inst)
        except carpool_boot.BootError as err:
            log.info("instance %s never becomes a node: %s", iid, err)
            self.failures[iid] = str(err)
            return
        self.kubelets.start(spec)
        self.running[iid] = spec.name

    # -- what the instance reads ------------------------------------------------------------------------
    def spec_of(self, inst: Mapping[str, Any]) -> NodeSpec:
        user_data, volumes = self.launch_data(inst)
        return self._node_spec(inst, user_data, self.instance_type(str(inst["InstanceType"])),
                               volume_gib=volumes, ec2_endpoint=self._loopback_endpoint())

    def launch_data(self, inst: Mapping[str, Any]) -> tuple[bytes, dict[str, int]]:
        """(user data as IMDS serves it, device -> GiB). A fleet's instance gets its template version's user
        data and block devices; without a template (RunInstances with UserData), the instance's own."""
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
        data: Mapping[str, Any] = {}
        if tags.get(LT_ID_TAG):
            versions = self.ec2.describe_launch_template_versions(
                LaunchTemplateId=tags[LT_ID_TAG], Versions=[tags.get(LT_VERSION_TAG) or "$Default"])
            data = (versions.get("LaunchTemplateVersions") or [{}])[0].get("LaunchTemplateData") or {}
        encoded = data.get("UserData")
        if not encoded:
            attr = self.ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
            encoded = (attr.get("UserData") or {}).get("Value")
        volumes = {str(m["DeviceName"]): int(m["Ebs"]["VolumeSize"]) for m in data.get("BlockDeviceMappings") or []
                   if (m.get("Ebs") or {}).get("VolumeSize")}
        return imds_user_data(encoded), volumes or self._attached_volumes(inst)

    def _attached_volumes(self, inst: Mapping[str, Any]) -> dict[str, int]:
        by_id = {str(m["Ebs"]["VolumeId"]): str(m["DeviceName"]) for m in inst.get("BlockDeviceMappings") or []
                 if (m.get("Ebs") or {}).get("VolumeId")}
        if not by_id:
            return {}
        found = self.ec2.describe_volumes(VolumeIds=list(by_id)).get("Volumes") or []
        return {by_id[v["VolumeId"]]: int(v["Size"]) for v in found if v["VolumeId"] in by_id}

    def _loopback_endpoint(self) -> str | None:
        """Local EC2's URL when it is a server on this machine (nodeadm may call it); None in process."""
        url = str(getattr(getattr(self.ec2, "meta", None), "endpoint_url", "") or "")
        host = urlparse(url).hostname or ""
        return url if host in ("localhost", "::1") or host.startswith("127.") else None

    def instance_type(self, name: str) -> dict[str, Any]:
        if name not in self._types:
            self._types[name] = self.ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"][0]
        return self._types[name]


def launched_at(inst: Mapping[str, Any]) -> float:
    value = inst.get("LaunchTime")
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() if value else 0.0


def imds_user_data(encoded: str | bytes | None) -> bytes:
    """EC2 APIs return user data base64-encoded; IMDS serves the bytes it was given."""
    if not encoded:
        return b""
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return encoded.encode() if isinstance(encoded, str) else encoded
