"""Object metadata shared by every Kubernetes object carpool reads.

`ObjectMeta` is lenient (`extra="ignore"`) like every Kubernetes shape. Karpenter objects use
`CrdObjectMeta`, which declares every field the API server writes (managedFields, selfLink...) so that
`kubectl get -o yaml` output loads, yet still rejects typos such as `metadata.lables`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, field_validator

from carpool.api.base import KubeModel

__all__ = [
    "CrdObjectMeta",
    "NamedObjectMeta",
    "ObjectMeta",
    "OwnerReference",
    "dns_label_problem",
    "dns_subdomain_problem",
]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Kubernetes' bounds on object names (k8s.io/apimachinery/pkg/util/validation)
DNS_SUBDOMAIN_MAX = 253
DNS_LABEL_MAX = 63


def dns_subdomain_problem(value: str, what: str = "name") -> str | None:
    """Why `value` is not an RFC 1123 subdomain (what pod and node names must be), or None."""
    if not value or len(value) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.match(value):
        shown = value if len(value) <= 80 else f"{value[:60]}... ({len(value)} characters)"
        return (f"invalid {what} {shown!r}: must be a lowercase RFC 1123 subdomain of at most {DNS_SUBDOMAIN_MAX} "
                "characters (a-z, 0-9, '-' and '.', starting and ending alphanumeric)")
    return None


def dns_label_problem(value: str, what: str = "namespace") -> str | None:
    """Why `value` is not an RFC 1123 label (what namespaces must be), or None."""
    if not value or len(value) > DNS_LABEL_MAX or not _DNS_LABEL.match(value):
        shown = value if len(value) <= 80 else f"{value[:60]}... ({len(value)} characters)"
        return (f"invalid {what} {shown!r}: must be a lowercase RFC 1123 label of at most {DNS_LABEL_MAX} "
                "characters (a-z, 0-9 and '-', starting and ending alphanumeric)")
    return None


class OwnerReference(KubeModel):
    """Who owns an object; carpool needs it to tell DaemonSet and static (Node-owned) pods apart."""

    api_version: str = ""
    kind: str
    name: str
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """`metadata` of any object. `name` is optional here because templates and generated objects lack it."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    # Written by the API server; declared so that strict metadata (`CrdObjectMeta`) still accepts them.
    self_link: str | None = None
    deletion_grace_period_seconds: int | None = None
    managed_fields: list[dict[str, Any]] | None = Field(default=None, exclude=True)

    def owned_by_kind(self, kind: str) -> bool:
        return any(ref.kind == kind for ref in self.owner_references)


class NamedObjectMeta(ObjectMeta):
    """Metadata of a cluster-scoped custom resource (NodePool, EC2NodeClass): the name is required."""

    name: str

    @field_validator("name")
    @classmethod
    def _dns_subdomain(cls, value: str) -> str:
        if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
            raise ValueError(
                f"invalid name {value!r}: must be a lowercase RFC 1123 subdomain "
                "(a-z, 0-9, '-' and '.', starting and ending alphanumeric)"
            )
        return value


class CrdObjectMeta(NamedObjectMeta):
    """Metadata of a Karpenter object: every ObjectMeta field is known, so a typo (`lables`) is an error."""

    model_config = ConfigDict(extra="forbid")


#: where the API server puts an object sent without a namespace
DEFAULT_NAMESPACE = "default"


class Named:
    """`name` of an object with `metadata` (an object read without one is nameless, not an error)."""

    if TYPE_CHECKING:  # declared by each model (a field here would move `metadata` first in every dump)
        metadata: ObjectMeta

    @property
    def name(self) -> str:
        return self.metadata.name or ""


class Namespaced(Named):
    """`namespace` as the API server defaults it: an object sent without one lives in `default`."""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or DEFAULT_NAMESPACE

