"""Launch templates: one per (AMI, max pods, user-data inputs) group of a claim's instance types.

CreateFleet takes launch templates plus per-override instance types; the image and user data live in
the template, so instance types needing a different AMI (nvidia vs standard) or a different max-pods
value need different templates. Names are a hash of everything in the template, so:
- equal inputs reuse the same template across claims and Lambda invocations (no create storms);
- any change (new AMI, new CA, new kubelet setting) yields a new name instead of mutating a template
  that in-flight fleets still reference; the old one is garbage-collected after a grace period.

Tags: the template itself carries the ownership tags (so a launch may use only carpool's own templates and
garbage collection may delete only them), and its data tags what CreateFleet cannot tag itself: the
network interface, and for spot launches the spot instance request. The IAM policy requires the ownership
tags on every resource a launch creates, and EC2 authorizes a launch once per created resource, so a
missing tag specification refuses the whole launch. EC2 rejects spot-request tags in a launch that
creates no spot request ("You cannot specify tags for Spot instances requests if there are no Spot
instances requests being created by the request"), so spot and on-demand launches use different
templates, as in Karpenter.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from carpool import labels as wk
from carpool import quantity
from carpool.amifamily import family_named
from carpool.amis.model import ResolvedAmi
from carpool.launch.failures import Cause
from carpool.launch.userdata import NodeBootstrap, encode, render

NAME_PREFIX = "carpool/"
#: Karpenter v1's IMDS settings when `metadataOptions` is absent: IMDSv2 only, and a hop limit of 1 so
#: that a pod off the host network (one hop further) cannot read the node role's credentials. Instance
#: tags in IMDS are always off, as Karpenter sets them: an account default turning them on would fail
#: the launch, the ownership tag keys (`kubernetes.io/cluster/...`) being invalid there.
DEFAULT_METADATA_OPTIONS: Mapping[str, Any] = {
    "HttpEndpoint": "enabled",
    "HttpProtocolIpv6": "disabled",
    "HttpPutResponseHopLimit": 1,
    "HttpTokens": "required",
    "InstanceMetadataTags": "disabled",
}
_GIB = 2**30
#: rendered user data kept per process: (AMI family, bootstrap fingerprint) -> base64 user data
_RENDERED: dict[tuple[str, str], str] = {}
#: bound on `_RENDERED` (a container serves one cluster: a few node classes x labels x sizes)
RENDERED_CACHE_SIZE = 512


class LaunchTemplateError(ValueError):
    """A node class that cannot be turned into a launch template (names the field); `cause` says which part
    of the node class (`carpool.launch.failures`)."""

    def __init__(self, message: str, cause: Cause = Cause.LAUNCH_TEMPLATE) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True)
class LaunchSettings:
    """The parts of a launch template that come from the node class, not from the instance type."""

    security_group_ids: tuple[str, ...]
    instance_profile: str
    block_device_mappings: tuple[Mapping[str, Any], ...] = ()
    metadata_options: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_METADATA_OPTIONS))
    tags: Mapping[str, str] = field(default_factory=dict)
    #: `spec.associatePublicIPAddress`: None leaves it to the subnet's setting
    associate_public_ip_address: bool | None = None
    #: `spec.detailedMonitoring`: CloudWatch one-minute metrics (Karpenter's default: off)
    detailed_monitoring: bool = False


@dataclass(frozen=True)
class LaunchTemplateSpec:
    name: str
    ami_id: str
    user_data_b64: str
    max_pods: int | None
    instance_types: tuple[str, ...]
    block_device_mappings: tuple[Mapping[str, Any], ...]
    metadata_options: Mapping[str, Any]
    security_group_ids: tuple[str, ...]
    instance_profile: str
    tags: Mapping[str, str]
    #: `spot` or `on-demand`: only spot templates tag the spot instance request
    capacity_type: str | None = None
    associate_public_ip_address: bool | None = None
    detailed_monitoring: bool = False


# -- grouping ---------------------------------------------------------------------------------------
def plan_launch_templates(
    cluster_name: str,
    ami_family: str,
    amis: Mapping[str, ResolvedAmi],
    bootstraps: Mapping[str, NodeBootstrap] | Callable[[str], NodeBootstrap],
    settings: LaunchSettings,
    instance_types: Iterable[str] | None = None,
    capacity_type: str | None = None,
) -> list[LaunchTemplateSpec]:
    """Group instance types into launch templates, sorted by name.

    `amis` is `carpool.amis.map_instance_types` output; a type absent from it has no AMI and is skipped
    (it is not offered). `bootstraps` gives each type's NodeBootstrap (its max pods and reserved
    resources differ by size). `instance_types` defaults to every type in `amis`. `capacity_type` is the
    launch's (spot or on-demand); by default the `karpenter.sh/capacity-type` label the node will carry.
    """
    bootstrap_of = bootstraps if callable(bootstraps) else bootstraps.__getitem__
    groups: dict[tuple[str, int | None, str, str | None], list[str]] = {}
    boots: dict[tuple[str, int | None, str, str | None], NodeBootstrap] = {}
    for name in sorted(set(instance_types if instance_types is not None else amis)):
        ami = amis.get(name)
        if ami is None:
            continue
        boot = bootstrap_of(name)
        ct = capacity_type or boot.labels.get(wk.CAPACITY_TYPE)
        key = (ami.id, boot.max_pods, boot.fingerprint(), ct)
        groups.setdefault(key, []).append(name)
        boots[key] = boot
    specs = [
        _spec(cluster_name, ami_family, key[0], boots[key], names, settings, key[3]) for key, names in groups.items()
    ]
    return sorted(specs, key=lambda s: s.name)


def _spec(
    cluster: str,
    family: str,
    ami_id: str,
    boot: NodeBootstrap,
    names: list[str],
    settings: LaunchSettings,
    capacity_type: str | None,
) -> LaunchTemplateSpec:
    user_data = rendered_user_data(family, boot)
    tags = {**settings.tags, **ownership_tags(cluster)}
    bdm = tuple(settings.block_device_mappings)
    meta = dict(settings.metadata_options)
    sgs = tuple(sorted(settings.security_group_ids))
    public, monitoring = settings.associate_public_ip_address, settings.detailed_monitoring
    inputs = [ami_id, user_data, bdm, meta, sgs, settings.instance_profile, tags, capacity_type, public, monitoring]
    return LaunchTemplateSpec(
        template_name(cluster, inputs), ami_id, user_data, boot.max_pods, tuple(names), bdm, meta, sgs,
        settings.instance_profile, tags, capacity_type, public, monitoring,
    )  # fmt: skip


def rendered_user_data(family: str, boot: NodeBootstrap) -> str:
    """`encode(render(family, boot))`, rendered once per distinct bootstrap per process: the fingerprint
    covers every field the rendering reads, and rendering (YAML, MIME, its round-trip check) costs
    milliseconds per template while a provisioning batch asks for the same few templates per claim."""
    key = (family, f"{boot.fingerprint()}|{boot.taints!r}|{boot.startup_taints!r}")
    found = _RENDERED.get(key)
    if found is None:
        if len(_RENDERED) >= RENDERED_CACHE_SIZE:
            _RENDERED.pop(next(iter(_RENDERED)))
        found = _RENDERED[key] = encode(render(family, boot))
    return found


def template_name(cluster: str, inputs: Any) -> str:
    """`carpool/<cluster>/<first 16 hex of sha256(canonical JSON of inputs)>`."""
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=list).encode()).hexdigest()
    return f"{NAME_PREFIX}{cluster}/{digest[:16]}"


def ownership_tags(cluster: str) -> dict[str, str]:
    """Tags that let carpool's IAM conditions and garbage collection recognise what it created."""
    return {wk.TAG_CLUSTER_OWNED.format(cluster=cluster): "owned", wk.TAG_MANAGED_BY: cluster}


# -- node class -> settings -------------------------------------------------------------------------
def launch_settings(
    nodeclass: Any,
    family: str,
    security_group_ids: Iterable[str],
    instance_profile: str | None = None,
) -> LaunchSettings:
    """LaunchSettings from an EC2NodeClass (the `carpool.api` model or a stand-in with the same fields).

    `instance_profile` is the profile the caller resolved for the node class (`spec.instanceProfile` as
    given, or the one made for `spec.role`); without it `spec.instanceProfile` is used.
    """
    spec = nodeclass.spec
    profile = instance_profile or getattr(spec, "instance_profile", None)
    if not profile:
        raise LaunchTemplateError("spec.instanceProfile: unknown (resolve spec.role to an instance profile first)",
                                  Cause.INSTANCE_PROFILE)
    tags = dict(getattr(spec, "tags", None) or {})
    name = getattr(getattr(nodeclass, "metadata", None), "name", None)
    if name:
        tags[wk.TAG_NODECLASS] = name
    return LaunchSettings(
        security_group_ids=tuple(sorted(security_group_ids)),
        instance_profile=profile,
        block_device_mappings=block_device_mappings(getattr(spec, "block_device_mappings", None), family),
        metadata_options=metadata_options(getattr(spec, "metadata_options", None)),
        tags=tags,
        associate_public_ip_address=getattr(spec, "associate_public_ip_address", None),
        detailed_monitoring=bool(getattr(spec, "detailed_monitoring", None)),
    )


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
        return obj.get(camel, obj.get(name))
    return getattr(obj, name, None)


def metadata_options(opts: Any) -> dict[str, Any]:
    """Karpenter's IMDS defaults (`DEFAULT_METADATA_OPTIONS`) with the node class's `metadataOptions` on
    top."""
    out = dict(DEFAULT_METADATA_OPTIONS)
    for attr, key in (
        ("http_endpoint", "HttpEndpoint"),
        ("http_protocol_i_pv6", "HttpProtocolIpv6"),
        ("http_protocol_ipv6", "HttpProtocolIpv6"),
        ("http_put_response_hop_limit", "HttpPutResponseHopLimit"),
        ("http_tokens", "HttpTokens"),
    ):
        value = _get(opts, attr)
        if value is not None:
            out[key] = value
    return out


def default_block_device_mappings(family: str) -> tuple[dict[str, Any], ...]:
    """The volumes Karpenter gives each family (`AmiFamily.volumes`), gp3, encrypted, deleted with the
    instance."""

    def ebs(size: int) -> dict[str, Any]:
        return {"VolumeSize": size, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}

    return tuple({"DeviceName": v.device_name, "Ebs": ebs(v.size_gib)} for v in family_named(family).volumes)


_EBS_FIELDS = (
    ("volume_type", "VolumeType"),
    ("iops", "Iops"),
    ("throughput", "Throughput"),
    ("encrypted", "Encrypted"),
    ("kms_key_id", "KmsKeyId"),
    ("delete_on_termination", "DeleteOnTermination"),
    ("snapshot_id", "SnapshotId"),
    ("volume_initialization_rate", "VolumeInitializationRate"),
)


def block_device_mappings(mappings: Any, family: str) -> tuple[dict[str, Any], ...]:
    """`spec.blockDeviceMappings` in CreateLaunchTemplate shape (sizes as whole GiB, rounded up)."""
    if not mappings:
        return default_block_device_mappings(family)
    out = []
    for i, m in enumerate(mappings):
        device = _get(m, "device_name")
        if not device:
            raise LaunchTemplateError(f"spec.blockDeviceMappings[{i}].deviceName is required")
        ebs_in = _get(m, "ebs")
        ebs: dict[str, Any] = {}
        if (size := _get(ebs_in, "volume_size")) is not None:
            ebs["VolumeSize"] = math.ceil(quantity.to_int(size) / _GIB) if isinstance(size, str) else int(size)
        for attr, key in _EBS_FIELDS:
            if (value := _get(ebs_in, attr)) is not None:
                ebs[key] = value
        out.append({"DeviceName": device, "Ebs": ebs})
    return tuple(out)


# -- API shapes ---------------------------------------------------------------------------------------
def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def instance_tag_specifications(spec: LaunchTemplateSpec) -> list[dict[str, Any]]:
    """The template data's tag specifications: what a launch creates that CreateFleet's own tag
    specifications do not cover (see the module docstring)."""
    types = ["network-interface"]
    if spec.capacity_type == wk.CAPACITY_SPOT:
        types.append("spot-instances-request")
    return [{"ResourceType": rt, "Tags": tag_list(spec.tags)} for rt in types]


def create_launch_template_request(spec: LaunchTemplateSpec) -> dict[str, Any]:
    """boto3 `ec2.create_launch_template(**request)` kwargs.

    `associatePublicIPAddress` goes on a network interface of its own (device 0, the security groups
    with it: EC2 refuses them beside a network interface), as Karpenter builds it; without the field
    the instance-level security groups stay and the subnet decides. Monitoring is always stated, as
    Karpenter states it, so an account default cannot turn it on behind the node class's back.
    """
    data: dict[str, Any] = {
        "ImageId": spec.ami_id,
        "UserData": spec.user_data_b64,
        "IamInstanceProfile": {"Name": spec.instance_profile},
        "SecurityGroupIds": list(spec.security_group_ids),
        "MetadataOptions": dict(spec.metadata_options),
        "Monitoring": {"Enabled": spec.detailed_monitoring},
        "BlockDeviceMappings": [dict(m) for m in spec.block_device_mappings],
        "TagSpecifications": instance_tag_specifications(spec),
    }
    if spec.associate_public_ip_address is not None:
        data["NetworkInterfaces"] = [{
            "DeviceIndex": 0,
            "AssociatePublicIpAddress": spec.associate_public_ip_address,
            "Groups": data.pop("SecurityGroupIds"),
        }]  # fmt: skip
    return {
        "LaunchTemplateName": spec.name,
        "LaunchTemplateData": data,
        "TagSpecifications": [{"ResourceType": "launch-template", "Tags": tag_list(spec.tags)}],
    }


# -- garbage collection -------------------------------------------------------------------------------
def launch_templates_to_delete(
    existing_names_with_last_used: Mapping[str, datetime | None],
    in_use: Iterable[str],
    now: datetime,
    grace: timedelta,
) -> list[str]:
    """carpool templates that nothing uses and nothing used within `grace`, sorted.

    Only names under `carpool/` are ever returned. A template with an unknown last-used time (None) is
    kept: it may have just been created by a provisioning run that has not launched yet; pass the
    creation time for templates never used.
    """
    in_use = set(in_use)
    out = []
    for name, last_used in existing_names_with_last_used.items():
        if not name.startswith(NAME_PREFIX) or name in in_use or last_used is None:
            continue
        if last_used + grace <= now:
            out.append(name)
    return sorted(out)
