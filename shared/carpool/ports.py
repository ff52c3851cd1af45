"""The outside world as the app sees it: the Kubernetes cluster, EC2 and friends, the event bus.

Adapters in `carpool.adapters` implement these for real AWS/EKS; `carpool.sim` implements `Cluster` for
the simulation. Only adapters import boto3 or lightkube.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from carpool.api.k8s import DaemonSet, Node, Pod, PodDisruptionBudget
from carpool.taints import Taint


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change seen by the watcher: `type` is ADDED, MODIFIED or DELETED; `kind` Pod or Node."""

    type: str
    kind: str
    obj: Pod | Node
    resource_version: str | None = None


class EvictionBlocked(Exception):
    """The API refused an eviction (a PodDisruptionBudget would be violated)."""


class Cluster(Protocol):
    """The Kubernetes API, reduced to what carpool reads and does."""

    def list_pods(self) -> list[Pod]: ...

    def pod_keys(self) -> set[str]:
        """"namespace/name" of every pod that exists (cheaper than `list_pods` where the cluster allows)."""
        ...

    def list_nodes(self) -> list[Node]: ...

    def list_daemonsets(self) -> list[DaemonSet]: ...

    def list_pdbs(self) -> list[PodDisruptionBudget]: ...

    def cni_env(self) -> dict[str, str]:
        """The `aws-node` DaemonSet's container env (prefix delegation / custom networking detection)."""
        ...

    def cordon(self, node_name: str) -> None: ...

    def taint(self, node_name: str, taint: Taint) -> None: ...

    def evict(self, pod_key: str) -> None:
        """Evict through the Eviction API. Raises EvictionBlocked when a PDB forbids it."""
        ...

    def delete_node(self, node_name: str) -> None: ...

    def watch(self, resource_versions: Mapping[str, str], timeout_seconds: float) -> Iterator[WatchEvent]:
        """Changes to pods and nodes since the given resource versions, for about `timeout_seconds`."""
        ...


class Compute(Protocol):
    """EC2 as carpool uses it (boto3 response shapes pass through unchanged)."""

    def create_fleet(self, request: Mapping[str, Any]) -> dict[str, Any]: ...

    def terminate_instances(self, instance_ids: Sequence[str]) -> None: ...

    def describe_instances(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    def ensure_launch_template(self, request: Mapping[str, Any]) -> str:
        """Create the launch template unless one of that name exists; returns its name."""
        ...

    def list_launch_templates(self, cluster: str) -> list[dict[str, Any]]: ...

    def delete_launch_template(self, name: str) -> None: ...

    def describe_subnets(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    def describe_security_groups(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]: ...


class EventPublisher(Protocol):
    def put_events(self, entries: Iterable[Mapping[str, Any]]) -> int:
        """Send PutEvents entries in batches of 10; returns the number that failed."""
        ...
