"""Karpenter v1 `EC2NodeClass` (`karpenter.k8s.aws/v1`): how nodes are launched on EC2.

Schema and validation follow the AWS provider's v1 CRD so users' YAML loads unchanged. Defaults are
Karpenter's, the instance metadata service's included: endpoint enabled, IPv6 disabled, tokens required
and hop limit 1, so a pod off the host network cannot reach the node role's credentials (a user who wants
that writes `httpPutResponseHopLimit: 2`, as with Karpenter).

Refused (one line naming the field, at `carpool validate`, at synth and when a function loads the config):
`capacityReservationSelectorTerms`. Applying capacity reservations means modelling them as offerings of
their own (DescribeCapacityReservations, each reservation's remaining count, its
`karpenter.k8s.aws/capacity-reservation-*` labels, CreateFleet's reservation targeting, and interruption
when a reservation expires); carpool has none of that, and launching on-demand instead would ignore the
field silently. The NodePool side (capacity type `reserved`) is refused in `carpool.api.nodepool`.

carpool-specific switches are annotations under `carpool.dev/` (Karpenter ignores them), e.g.
`carpool.dev/prefix-delegation: "true"`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from carpool import amifamily, quantity
from carpool import labels as wk
from carpool.amifamily import family_named
from carpool.amifamily.family import LATEST
from carpool.api.base import CrdModel
from carpool.api.durations import DurationError, parse_duration
from carpool.api.fields import Quantity
from carpool.api.meta import CrdObjectMeta

__all__ = [
    "ALIAS_FAMILIES",
    "API_VERSION",
    "AmiSelectorTerm",
    "BlockDevice",
    "BlockDeviceMapping",
    "CapacityReservationSelectorTerm",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "KubeletConfiguration",
    "MetadataOptions",
    "SecurityGroupSelectorTerm",
    "SubnetSelectorTerm",
]

API_VERSION: Final = "karpenter.k8s.aws/v1"
KIND: Final = "EC2NodeClass"

#: alias family -> the `spec.amiFamily` spelling of the same family.
ALIAS_FAMILIES: dict[str, str] = {f.name: f.api_name for f in amifamily.ALIAS_FAMILIES}
#: the `spec.amiFamily` values, as the CRD spells them (a static type for pydantic and mypy; a unit test
#: holds it to `carpool.amifamily.FAMILIES`)
AmiFamilyName = Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]
_ALIAS = re.compile(r"^[a-zA-Z0-9]+@.+$")
_RESERVED_KEYS = frozenset({"cpu", "memory", "ephemeral-storage", "pid"})
#: Karpenter's EC2NodeClass percentage pattern for eviction thresholds.
_PERCENT = re.compile(r"(?:[0-9]{1,2}(?:\.[0-9]{1,2})?|100(?:\.0{1,2})?)%")
_EVICTION_SIGNALS = frozenset(
    {
        "memory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "imagefs.inodesFree",
        "pid.available",
    }
)
_RESTRICTED_TAGS = (wk.NODEPOOL, "eks:eks-cluster-name", wk.TAG_NODECLAIM, wk.EC2NODECLASS)
_RESTRICTED_TAG_PREFIX = "kubernetes.io/cluster/"
#: Karpenter v1's default `httpPutResponseHopLimit`: IMDS answers the node itself, not a pod's network
#: namespace one hop further.
KARPENTER_HOP_LIMIT = 1
CAPACITY_RESERVATIONS_REFUSED = (
    "capacity reservations are not supported by carpool (no reserved offerings, reservation targeting or "
    "expiry handling); remove capacityReservationSelectorTerms"
)


def _no_empty_tags(tags: dict[str, str]) -> dict[str, str]:
    for k, v in tags.items():
        if not k or not v:
            raise ValueError("empty tag keys or values aren't supported")
    return tags


#: Tags used to select AWS resources: neither keys nor values may be empty.
SelectorTags = Annotated[dict[str, str], AfterValidator(_no_empty_tags)]


class SubnetSelectorTerm(CrdModel):
    tags: SelectorTags | None = None
    id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-z]+$")

    @model_validator(mode="after")
    def _exclusive(self) -> SubnetSelectorTerm:
        if self.tags is None and self.id is None:
            raise ValueError("expected at least one, got none, ['tags', 'id']")
        if self.id is not None and self.tags is not None:
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"
            )
        return self


class SecurityGroupSelectorTerm(CrdModel):
    tags: SelectorTags | None = None
    id: str | None = Field(default=None, pattern=r"^sg-[0-9a-z]+$")
    name: str | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> SecurityGroupSelectorTerm:
        if self.tags is None and self.id is None and self.name is None:
            raise ValueError("expected at least one, got none, ['tags', 'id', 'name']")
        if self.id is not None and (self.tags is not None or self.name is not None):
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"
            )
        if self.name is not None and (self.tags is not None or self.id is not None):
            raise ValueError(
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"
            )
        return self


class CapacityReservationSelectorTerm(CrdModel):
    tags: SelectorTags | None = None
    id: str | None = Field(default=None, pattern=r"^cr-[0-9a-z]+$")
    owner_id: str | None = Field(default=None, alias="ownerID", pattern=r"^[0-9]{12}$")

    @model_validator(mode="after")
    def _exclusive(self) -> CapacityReservationSelectorTerm:
        if self.tags is None and self.id is None:
            raise ValueError("expected at least one, got none, ['tags', 'id']")
        if self.id is not None and (self.tags is not None or self.owner_id is not None):
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a capacity reservation selector term"
            )
        return self


class AmiSelectorTerm(CrdModel):
    """One way of choosing AMIs: an `alias` (family@version) or id / name+owner / tags / SSM parameter."""

    alias: str | None = Field(default=None, max_length=30)
    id: str | None = Field(default=None, pattern=r"^ami-[0-9a-z]+$")
    name: str | None = None
    owner: str | None = None
    tags: SelectorTags | None = None
    ssm_parameter: str | None = None

    @field_validator("alias")
    @classmethod
    def _alias_format(cls, alias: str | None) -> str | None:
        if alias is None:
            return None
        if not _ALIAS.match(alias):
            raise ValueError(
                f"'alias' {alias!r} is improperly formatted, must match the format 'family@version'"
            )
        family, version = alias.split("@", 1)
        if family not in ALIAS_FAMILIES:
            raise ValueError(
                f"family {family!r} is not supported, must be one of the following: "
                + ", ".join(f"'{f}'" for f in ALIAS_FAMILIES)
            )
        if family_named(family).latest_only and version != LATEST:
            raise ValueError(f"windows families may only specify version 'latest' (got {version!r})")
        return alias

    @model_validator(mode="after")
    def _exclusive(self) -> AmiSelectorTerm:
        if not any((self.alias, self.id, self.name, self.tags, self.ssm_parameter)):
            raise ValueError(
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"
            )
        others = [f for f in ("name", "owner", "tags", "ssm_parameter") if getattr(self, f) is not None]
        if self.alias is not None and (others or self.id is not None):
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"
            )
        if self.id is not None and others:
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"
            )
        return self


class KubeletConfiguration(CrdModel):
    """Kubelet settings carpool passes to the node and uses when sizing it (quantities kept as written)."""

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    max_pods: int | None = Field(default=None, ge=0)
    pods_per_core: int | None = Field(default=None, ge=0)
    system_reserved: dict[str, str] = Field(default_factory=dict)
    kube_reserved: dict[str, str] = Field(default_factory=dict)
    eviction_hard: dict[str, str] = Field(default_factory=dict)
    eviction_soft: dict[str, str] = Field(default_factory=dict)
    eviction_soft_grace_period: dict[str, str] = Field(default_factory=dict, validate_default=True)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = Field(
        default=None, ge=0, le=100, alias="imageGCHighThresholdPercent"
    )
    image_gc_low_threshold_percent: int | None = Field(
        default=None, ge=0, le=100, alias="imageGCLowThresholdPercent"
    )
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")

    @field_validator("system_reserved", "kube_reserved", mode="before")
    @classmethod
    def _reserved(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, dict):
            for key, amount in value.items():
                if key not in _RESERVED_KEYS:
                    raise ValueError(
                        f"valid keys for {to_camel(info.field_name or '')} are "
                        f"['cpu','memory','ephemeral-storage','pid'] (got {key!r})"
                    )
                _quantity_text(amount, key)
            return {k: str(v) for k, v in value.items()}
        return value

    @field_validator("eviction_hard", "eviction_soft", mode="before")
    @classmethod
    def _signals(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, dict):
            for key, amount in value.items():
                if key not in _EVICTION_SIGNALS:
                    raise ValueError(
                        f"valid keys for {to_camel(info.field_name or '')} are "
                        f"{sorted(_EVICTION_SIGNALS)} (got {key!r})"
                    )
                if isinstance(amount, str) and amount.endswith("%"):
                    if not _PERCENT.fullmatch(amount):
                        raise ValueError(f"{key}: {amount!r} is not a percentage between 0% and 100% "
                                         "(Karpenter's pattern, e.g. '10%' or '7.5%')")
                else:
                    _quantity_text(amount, key)
            return {k: str(v) for k, v in value.items()}
        return value

    @field_validator("eviction_soft_grace_period")
    @classmethod
    def _grace_periods(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        soft = info.data.get("eviction_soft", {})
        for key in value:
            if key not in _EVICTION_SIGNALS:
                raise ValueError(
                    f"valid keys for evictionSoftGracePeriod are {sorted(_EVICTION_SIGNALS)} (got {key!r})"
                )
            if key not in soft:
                raise ValueError(f"key {key!r} in evictionSoftGracePeriod has no matching evictionSoft entry")
            try:
                finite = parse_duration(str(value[key])) is not None
            except DurationError as exc:
                raise ValueError(f"evictionSoftGracePeriod.{key}: {exc}") from None
            if not finite:
                raise ValueError(f"evictionSoftGracePeriod.{key}: 'Never' is not a grace period")
        for key in soft:
            if key not in value:
                raise ValueError(f"key {key!r} in evictionSoft has no matching evictionSoftGracePeriod entry")
        return value

    @model_validator(mode="after")
    def _gc_thresholds(self) -> KubeletConfiguration:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise ValueError("imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent")
        return self


def _quantity_text(amount: Any, key: str) -> None:
    try:
        quantity.parse(amount)
    except quantity.QuantityError:
        raise ValueError(f"invalid quantity {amount!r} for {key!r}") from None


class MetadataOptions(CrdModel):
    """EC2 instance metadata service settings (Karpenter v1's defaults: IMDSv2 required, hop limit 1)."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(default="disabled", alias="httpProtocolIPv6")
    http_put_response_hop_limit: int = Field(default=KARPENTER_HOP_LIMIT, ge=1, le=64)
    http_tokens: Literal["required", "optional"] = "required"


class BlockDevice(CrdModel):
    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: int | None = None
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    throughput: int | None = None
    volume_initialization_rate: int | None = None
    volume_size: Quantity | None = None
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        return self


class BlockDeviceMapping(CrdModel):
    device_name: str | None = None
    ebs: BlockDevice | None = None
    root_volume: bool = False


class EC2NodeClassSpec(CrdModel):
    kubelet: KubeletConfiguration | None = None
    subnet_selector_terms: list[SubnetSelectorTerm] = Field(min_length=1, max_length=30)
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = Field(min_length=1, max_length=30)
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] | None = None
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    ami_selector_terms: list[AmiSelectorTerm] = Field(min_length=1, max_length=30)
    ami_family: AmiFamilyName | None = None
    user_data: str | None = None
    role: str | None = None
    instance_profile: str | None = Field(default=None, validate_default=True)
    tags: dict[str, str] = Field(default_factory=dict)
    block_device_mappings: list[BlockDeviceMapping] | None = Field(default=None, max_length=50)
    instance_store_policy: Literal["RAID0"] | None = None
    detailed_monitoring: bool | None = None
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    context: str | None = None

    @field_validator("capacity_reservation_selector_terms")
    @classmethod
    def _no_capacity_reservations(
        cls, terms: list[CapacityReservationSelectorTerm] | None
    ) -> list[CapacityReservationSelectorTerm] | None:
        """Refused, not ignored: see the module docstring for why."""
        if terms is not None:
            raise ValueError(CAPACITY_RESERVATIONS_REFUSED)
        return terms

    @field_validator("ami_selector_terms")
    @classmethod
    def _alias_alone(cls, terms: list[AmiSelectorTerm]) -> list[AmiSelectorTerm]:
        if len(terms) > 1 and any(t.alias is not None for t in terms):
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"
            )
        return terms

    @field_validator("ami_family")
    @classmethod
    def _family_matches_alias(cls, family: str | None, info: ValidationInfo) -> str | None:
        terms = info.data.get("ami_selector_terms") or []
        alias = next((t.alias for t in terms if t.alias), None)
        if family is not None and alias is not None:
            alias_family = ALIAS_FAMILIES[alias.split("@", 1)[0]]
            if family not in (alias_family, amifamily.CUSTOM.api_name):
                raise ValueError(
                    f"if set, amiFamily must be '{alias_family}' or 'Custom' when using an alias of that family"
                )
        return family

    @field_validator("instance_profile")
    @classmethod
    def _role_xor_profile(cls, profile: str | None, info: ValidationInfo) -> str | None:
        if (info.data.get("role") is None) == (profile is None):
            raise ValueError("must specify exactly one of ['role', 'instanceProfile']")
        return profile

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        for key in tags:
            if not key:
                raise ValueError("empty tag keys aren't supported")
            if key in _RESTRICTED_TAGS or key.startswith(_RESTRICTED_TAG_PREFIX):
                raise ValueError(f"tag {key!r} is restricted (carpool/Karpenter set it on every instance)")
        return tags

    @field_validator("block_device_mappings")
    @classmethod
    def _one_root_volume(cls, mappings: list[BlockDeviceMapping] | None) -> list[BlockDeviceMapping] | None:
        if mappings and sum(1 for m in mappings if m.root_volume) > 1:
            raise ValueError("must have only one blockDeviceMappings with rootVolume")
        return mappings

    @model_validator(mode="after")
    def _family_needed(self) -> EC2NodeClassSpec:
        if self.ami_family is None and not any(t.alias for t in self.ami_selector_terms):
            raise ValueError("amiFamily is required when amiSelectorTerms does not contain an alias")
        return self


class EC2NodeClass(CrdModel):
    """A Karpenter v1 EC2NodeClass. A `status` block is accepted and ignored."""

    api_version: Literal["karpenter.k8s.aws/v1"] = API_VERSION
    kind: Literal["EC2NodeClass"] = KIND
    metadata: CrdObjectMeta
    spec: EC2NodeClassSpec
    status: Any = Field(default=None, exclude=True)

    @field_validator("metadata")
    @classmethod
    def _carpool_flags(cls, meta: CrdObjectMeta) -> CrdObjectMeta:
        for key in (wk.PREFIX_DELEGATION, wk.CUSTOM_NETWORKING):
            value = meta.annotations.get(key)
            if value is not None and value not in ("true", "false"):
                raise ValueError(f'annotation {key} must be "true" or "false", got {value!r}')
        return meta

    @model_validator(mode="after")
    def _fields_the_family_carries(self) -> EC2NodeClass:
        """Refuse a field this node class's AMI family cannot carry (never accept it and drop it)."""
        problem = family_field_problem(self.ami_family(), self.spec)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def name(self) -> str:
        return self.metadata.name

    def alias(self) -> tuple[str, str] | None:
        """(family, version) of the alias term, e.g. ("al2023", "latest"); None without an alias."""
        term = next((t for t in self.spec.ami_selector_terms if t.alias), None)
        if term is None or term.alias is None:
            return None
        family, version = term.alias.split("@", 1)
        return family, version

    def ami_family(self) -> str:
        """ "al2023" | "al2" | "bottlerocket" | "windows2019" | "windows2022" | "windows2025" | "custom".

        As in Karpenter, an explicit `amiFamily` wins (it may be `Custom` next to an alias: the alias
        picks the image, the user supplies the bootstrap); otherwise the alias family decides.
        """
        if self.spec.ami_family is not None:
            return self.spec.ami_family.lower()
        alias = self.alias()
        return alias[0] if alias is not None else amifamily.CUSTOM.name

    def _flag(self, key: str) -> bool | None:
        value = self.metadata.annotations.get(key)
        return None if value is None else value == "true"

    @property
    def prefix_delegation(self) -> bool | None:
        """`carpool.dev/prefix-delegation`: True/False forces VPC CNI prefix delegation; None = detect."""
        return self._flag(wk.PREFIX_DELEGATION)

    @property
    def custom_networking(self) -> bool | None:
        """`carpool.dev/custom-networking`: True/False forces custom networking; None = detect."""
        return self._flag(wk.CUSTOM_NETWORKING)


#: `spec.kubelet` fields that only the user data carries (sizing does not use them), by attribute and
#: field name: a Custom family's user data is the user's own, so carpool cannot put them anywhere.
_USER_DATA_ONLY_KUBELET = (
    ("cluster_dns", "clusterDNS"), ("eviction_soft", "evictionSoft"),
    ("eviction_soft_grace_period", "evictionSoftGracePeriod"),
    ("eviction_max_pod_grace_period", "evictionMaxPodGracePeriod"),
    ("image_gc_high_threshold_percent", "imageGCHighThresholdPercent"),
    ("image_gc_low_threshold_percent", "imageGCLowThresholdPercent"), ("cpu_cfs_quota", "cpuCFSQuota"),
)


def family_field_problem(family: str, spec: EC2NodeClassSpec) -> str | None:
    """Why `spec` asks something of the AMI family `family` that its bootstrap cannot carry, or None.

    Karpenter drops these silently (pkg/providers/amifamily/bootstrap): Bottlerocket has no pods-per-core
    setting and its settings model reserves no pids (the settings API would refuse the user data);
    the Windows bootstrap takes one cluster DNS address (Karpenter passes the first of any number to every
    family but AL2023; bootstrap.sh and Bottlerocket take a list, so carpool passes them all) and sets up no
    instance store; a Custom family's user data is the user's, verbatim."""
    known = family_named(family)
    kubelet = spec.kubelet
    if kubelet is not None and not known.pods_per_core and kubelet.pods_per_core is not None:
        return f"spec.kubelet.podsPerCore: {known.api_name} has no pods-per-core setting; use maxPods"
    if kubelet is not None and not known.reserves_pids:
        for name, reserved in (("kubeReserved", kubelet.kube_reserved), ("systemReserved", kubelet.system_reserved)):
            if "pid" in reserved:
                return f"spec.kubelet.{name}.pid: {known.api_name} reserves only cpu, memory and ephemeral-storage"
    if kubelet is not None and not known.many_cluster_dns and len(kubelet.cluster_dns or []) > 1:
        return f"spec.kubelet.clusterDNS: the Windows bootstrap takes one cluster DNS address, not {len(kubelet.cluster_dns or [])}"
    if not known.instance_store_raid0 and spec.instance_store_policy is not None:
        return "spec.instanceStorePolicy: the EKS Windows bootstrap does not set up the instance store"
    if kubelet is not None and not known.carpool_user_data:
        for attr, name in _USER_DATA_ONLY_KUBELET:
            if getattr(kubelet, attr) not in (None, {}, []):
                return (f"spec.kubelet.{name}: with amiFamily Custom carpool passes spec.userData verbatim, so it "
                        "cannot reach the kubelet; set it in your own user data")
    return None
