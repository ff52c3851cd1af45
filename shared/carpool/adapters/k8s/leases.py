"""`Cluster.get_lease` on lightkube: one GET of a `coordination.k8s.io/v1` Lease.

A module of its own, as the state adapter keeps one per thing it reads (`adapters/aws/dynamodb/`):
`LightkubeCluster.get_lease` hands its client here. The Lease is read whole each time (a few hundred
bytes; no list, no watch: carpool reads Karpenter's once per invocation, `carpool.app.standstill`).

- 404 is "no Lease": no Karpenter controller ever led in that namespace under that name.
- 403 is `LeaseForbidden`, with the server's message (`User "carpool" cannot get resource "leases" in API
  group "coordination.k8s.io" in the namespace "kube-system"`), never "no Lease": the role lacks the rule
  `infra/rbac.yaml` grants, and carpool cannot tell whether Karpenter runs.
- anything else is the API server's error, raised as lightkube raises it.
"""

from __future__ import annotations

from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease as LeaseResource

from carpool import karpenter_lease
from carpool.adapters.k8s import convert
from carpool.karpenter_lease import Lease
from carpool.ports import LeaseForbidden


def read_lease(client: Client, namespace: str, name: str) -> Lease | None:
    """The Lease, None when it does not exist. Raises `LeaseForbidden` (403) or `LeaseUnreadable`."""
    try:
        found = client.get(LeaseResource, name, namespace=namespace)
    except ApiError as e:
        code = getattr(e.status, "code", None)
        if code == 404:
            return None
        if code == 403:
            raise LeaseForbidden(namespace, name, str(e.status.message or "Forbidden")) from e
        raise
    return karpenter_lease.from_json(convert.as_dict(found))
