"""Deployment settings read from CDK context (``cdk deploy -c clusterName=NAME -c key=value``).

One typed object instead of ``try_get_context`` calls spread over the constructs: every value is checked
once, here, with an error that names the context key, before CloudFormation gets a chance to fail
twenty minutes into a deploy. Values from ``-c`` arrive as strings, values from ``cdk.json`` may be JSON
types; both are accepted.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: EKS cluster names: 1-100 characters, alphanumeric first, then alphanumerics, hyphens, underscores.
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9A-Za-z-]+$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
#: a role of ``-c nodeClassRoles``: its ARN or its name (a path may precede it), ``*`` matching any characters
_NODE_CLASS_ROLE = re.compile(r"^(arn:aws[a-z-]*:iam::\d{12}:role/)?[\w+=,.@/*-]+$")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SG_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_OUR_KEY = re.compile(r"^[a-z][A-Za-z0-9]*$")
#: the group the functions' roles are mapped to by default; `infra/rbac.yaml` is bound to it
DEFAULT_KUBERNETES_GROUP = "carpool-controller"
KUBERNETES_ACCESS = ("group", "clusterAdmin")
_K8S_GROUP = re.compile(r"^(?!system:)[a-z0-9]([-a-z0-9:.]*[a-z0-9])?$")
_K8S_VERSION = re.compile(r"^1\.\d{1,3}$")
#: a Kubernetes namespace name (a DNS-1123 label)
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: where Karpenter's Helm release runs (its leader-election Lease is there), unless ``-c karpenterNamespace``
DEFAULT_KARPENTER_NAMESPACE = "kube-system"
IP_FAMILIES = ("ipv4", "ipv6")

#: CloudWatch Logs accepts only these retention values.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                      2557, 2922, 3288, 3653)  # fmt: skip
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

#: Every context key the app reads; an unknown ``-c`` key is almost always a typo worth stopping for.
KNOWN_KEYS = frozenset(
    {
        "clusterName", "configFile", "nodeRoleArn", "vpcId",
        "clusterSecurityGroupId", "clusterEndpoint", "clusterCa", "accessEntries", "kubernetesGroup",
        "kubernetesAccess",
        "alarmEmail", "logRetentionDays", "logLevel", "reservedConcurrency",
        "retainState", "clusterVersion", "serviceCidr", "clusterDns", "ipFamily", "karpenterNamespace",
    }
) | frozenset({"ebsKmsKeyArns", "instanceProfileRoleArns", "nodeClassRoles"})  # fmt: skip

#: Keys an older release read, with what to do instead: refused by name rather than as unknown typos.
RETIRED_KEYS = {
    "subnetTag": "the stack deploys no default EC2NodeClass any more (the config lives in the cluster): write "
                 "subnetSelectorTerms in your EC2NodeClass and kubectl apply it",
    "securityGroupTag": "the stack deploys no default EC2NodeClass any more (the config lives in the cluster): "
                        "write securityGroupSelectorTerms in your EC2NodeClass and kubectl apply it",
}


class SettingsError(ValueError):
    """A context value is missing or malformed; the message names the key and shows an example."""


@dataclass(frozen=True)
class Settings:
    """Everything the stack is parameterised by. Only ``cluster_name`` is required."""

    cluster_name: str
    #: ``-c configFile``: NodePool/EC2NodeClass YAML checked at synth, once, and never stored: the config
    #: lives in the cluster (``infra/config_file.py``)
    config_file: Path | None = None
    node_role_arn: str | None = None
    vpc_id: str | None = None
    cluster_security_group_id: str | None = None
    cluster_endpoint: str | None = None
    cluster_ca: str | None = None
    access_entries: bool = True
    #: ``-c kubernetesGroup``: the Kubernetes group the functions' roles are mapped to (least privilege,
    #: the default); None when ``-c kubernetesAccess=clusterAdmin`` asks for AWS managed access policies
    kubernetes_group: str | None = DEFAULT_KUBERNETES_GROUP
    alarm_email: str | None = None
    log_retention_days: int = 30
    log_level: str = "INFO"
    reserved_concurrency: bool = True
    retain_state: bool = True
    #: ``-c ebsKmsKeyArns=arn1,arn2``: customer-managed KMS keys EC2 may use for node volumes on carpool's
    #: behalf (``kmsKeyID`` in a node class's ``blockDeviceMappings``); see ``infra/nodeclasses.py``
    ebs_kms_key_arns: tuple[str, ...] = ()
    #: ``-c instanceProfileRoleArns=arn1,arn2``: the roles held by the instance profiles node classes name
    #: in ``spec.instanceProfile`` (carpool passes only roles the deployment names)
    instance_profile_role_arns: tuple[str, ...] = ()
    #: ``-c nodeClassRoles=name,prefix-*,arn``: the roles the cluster's EC2NodeClasses may name in
    #: ``spec.role`` besides the stack's node role (Karpenter's controller policy passes one node role;
    #: ``infra/nodeclasses.py``); names resolve in the stack's account, ``*`` matches any characters
    node_class_roles: tuple[str, ...] = ()
    #: cluster facts the functions otherwise read from DescribeCluster (``carpool.adapters.aws.eks``)
    cluster_version: str | None = None
    service_cidr: str | None = None
    cluster_dns: str | None = None
    ip_family: str | None = None
    #: ``-c karpenterNamespace``: the namespace of Karpenter's Helm release, where the functions read its
    #: leader-election Lease (``CARPOOL_KARPENTER_NAMESPACE``; ``infra/rbac.yaml``'s Role is bound there)
    karpenter_namespace: str = DEFAULT_KARPENTER_NAMESPACE

    @property
    def stack_name(self) -> str:
        """CloudFormation stack names allow no underscore, EKS cluster names do."""
        return f"carpool-{self.cluster_name.replace('_', '-')}"

    @property
    def bus_name(self) -> str:
        return f"carpool-{self.cluster_name}"

    @classmethod
    def from_context(cls, context: Mapping[str, Any], *, base_dir: Path | None = None) -> Settings:
        """Parse and validate; ``base_dir`` resolves a relative ``configFile`` (the directory of cdk.json)."""
        # CDK itself stores keys such as "@aws-cdk/...", "aws:cdk:...", "vpc-provider:account=..." and
        # "acknowledged-issue-numbers"; only bare camelCase keys can be ours.
        retired = sorted(k for k in context if k in RETIRED_KEYS)
        if retired:
            raise SettingsError(f"context {retired[0]} is no longer read: {RETIRED_KEYS[retired[0]]}")
        unknown = sorted(k for k in context if _OUR_KEY.match(k) and k not in KNOWN_KEYS)
        if unknown:
            raise SettingsError(f"unknown context key(s) {unknown}; known keys: {sorted(KNOWN_KEYS)}")
        cluster = _text(context, "clusterName")
        if cluster is None:
            raise SettingsError(
                "context clusterName is required: cdk deploy -c clusterName=<your EKS cluster name>"
            )
        if not _CLUSTER_NAME.match(cluster):
            raise SettingsError(
                f"context clusterName={cluster!r} is not an EKS cluster name "
                "(1-100 characters: letters, digits, '-' and '_', starting with a letter or digit)"
            )
        return cls(
            cluster_name=cluster,
            config_file=_config_file(context, base_dir),
            node_role_arn=_matching(context, "nodeRoleArn", _ROLE_ARN, "arn:aws:iam::123456789012:role/NAME"),
            vpc_id=_matching(context, "vpcId", _VPC_ID, "vpc-0123456789abcdef0"),
            cluster_security_group_id=_matching(
                context, "clusterSecurityGroupId", _SG_ID, "sg-0123456789abcdef0"
            ),
            cluster_endpoint=_endpoint(context),
            cluster_ca=_text(context, "clusterCa"),
            access_entries=_flag(context, "accessEntries", default=True),
            kubernetes_group=_kubernetes_group(context),
            alarm_email=_matching(context, "alarmEmail", _EMAIL, "ops@example.com"),
            log_retention_days=_retention(context),
            log_level=_choice(context, "logLevel", LOG_LEVELS, default="INFO"),
            reserved_concurrency=_flag(context, "reservedConcurrency", default=True),
            retain_state=_flag(context, "retainState", default=True),
            ebs_kms_key_arns=_arns(context, "ebsKmsKeyArns", _KMS_KEY_ARN,
                                   "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
            instance_profile_role_arns=_arns(context, "instanceProfileRoleArns", _ROLE_ARN,
                                             "arn:aws:iam::123456789012:role/NAME"),
            node_class_roles=_arns(context, "nodeClassRoles", _NODE_CLASS_ROLE,
                                   "team-a-nodes, KarpenterNodeRole-*, or arn:aws:iam::123456789012:role/NAME"),
            cluster_version=_matching(context, "clusterVersion", _K8S_VERSION, "1.32"),
            service_cidr=_network(context, "serviceCidr"),
            cluster_dns=_address(context, "clusterDns"),
            ip_family=_ip_family(context),
            karpenter_namespace=_matching(context, "karpenterNamespace", _NAMESPACE, "karpenter")
            or DEFAULT_KARPENTER_NAMESPACE,
        )._checked()

    def _check_network_facts(self) -> None:
        """The service CIDR, cluster DNS and IP family given together must describe one network."""
        if self.service_cidr is None:
            if self.cluster_dns is not None:
                raise SettingsError("context clusterDns needs serviceCidr (the range kube-dns's address is in)")
            return
        network = ipaddress.ip_network(self.service_cidr)
        if self.ip_family is not None and self.ip_family != f"ipv{network.version}":
            raise SettingsError(f"context serviceCidr={self.service_cidr} is not an {self.ip_family} range (ipFamily)")
        if self.cluster_dns is not None and ipaddress.ip_address(self.cluster_dns) not in network:
            raise SettingsError(f"context clusterDns={self.cluster_dns} is outside serviceCidr={self.service_cidr}")

    def _checked(self) -> Settings:
        self._check_network_facts()
        if self.cluster_security_group_id and not self.vpc_id:
            raise SettingsError("context clusterSecurityGroupId needs vpcId (the functions must run in the VPC)")
        return self


def _ip_family(context: Mapping[str, Any]) -> str | None:
    value = _text(context, "ipFamily")
    if value is not None and value.lower() not in IP_FAMILIES:
        raise SettingsError(f"context ipFamily={value!r} must be one of {IP_FAMILIES}")
    return value.lower() if value is not None else None


def _network(context: Mapping[str, Any], key: str) -> str | None:
    value = _text(context, key)
    if value is None:
        return None
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise SettingsError(f"context {key}={value!r} is not a CIDR ({exc}); e.g. 172.20.0.0/16") from None


def _address(context: Mapping[str, Any], key: str) -> str | None:
    value = _text(context, key)
    if value is None:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise SettingsError(f"context {key}={value!r} is not an IP address; e.g. 172.20.0.10") from None


def _text(context: Mapping[str, Any], key: str) -> str | None:
    value = context.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise SettingsError(f"context {key} must be a string, got {type(value).__name__}")
    text = str(value).strip()
    return text or None


def _matching(context: Mapping[str, Any], key: str, pattern: re.Pattern[str], example: str) -> str | None:
    value = _text(context, key)
    if value is not None and not pattern.match(value):
        raise SettingsError(f"context {key}={value!r} is malformed; expected something like {example}")
    return value


def _kubernetes_group(context: Mapping[str, Any]) -> str | None:
    """The functions' Kubernetes group: least privilege through `infra/rbac.yaml` unless
    ``-c kubernetesAccess=clusterAdmin`` asks for AWS managed access policies instead; none at all without
    access entries (the operator grants access, README "Without access entries")."""
    given = _text(context, "kubernetesAccess") or "group"
    access = next((a for a in KUBERNETES_ACCESS if a.lower() == given.lower()), None)
    if access is None:
        raise SettingsError(f"context kubernetesAccess={given!r} must be one of {KUBERNETES_ACCESS}")
    group = _matching(context, "kubernetesGroup", _K8S_GROUP, DEFAULT_KUBERNETES_GROUP)
    if access == "clusterAdmin":
        if group is not None:
            raise SettingsError("context kubernetesGroup maps the functions to a group; drop kubernetesAccess=clusterAdmin")
        return None
    if not _flag(context, "accessEntries", default=True):
        if group is not None:
            raise SettingsError("context kubernetesGroup is used by access entries; drop accessEntries=false")
        return None
    return group or DEFAULT_KUBERNETES_GROUP


def _flag(context: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = context.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "yes", "1", "on"}:
        return True
    if text in {"false", "no", "0", "off"}:
        return False
    raise SettingsError(f"context {key}={value!r} must be true or false")


def _endpoint(context: Mapping[str, Any]) -> str | None:
    value = _text(context, "clusterEndpoint")
    if value is not None and not value.startswith("https://"):
        raise SettingsError(f"context clusterEndpoint={value!r} must be the https:// API server URL")
    return value


def _retention(context: Mapping[str, Any]) -> int:
    value = context.get("logRetentionDays", 30)
    try:
        days = int(value)
    except (TypeError, ValueError):
        days = -1
    if days not in LOG_RETENTION_DAYS:
        raise SettingsError(f"context logRetentionDays={value!r} must be one of {LOG_RETENTION_DAYS}")
    return days


def _choice(context: Mapping[str, Any], key: str, choices: tuple[str, ...], *, default: str) -> str:
    value = (_text(context, key) or default).upper()
    if value not in choices:
        raise SettingsError(f"context {key}={value!r} must be one of {choices}")
    return value


def _arns(context: Mapping[str, Any], key: str, pattern: re.Pattern[str], example: str) -> tuple[str, ...]:
    """A comma-separated list (or a JSON list from cdk.json) of ARNs (or role names), each checked."""
    value = context.get(key)
    if value is None:
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    arns = tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))
    for arn in arns:
        if not pattern.match(arn):
            raise SettingsError(f"context {key}: {arn!r} is malformed; expected something like {example}")
    return arns


def _config_file(context: Mapping[str, Any], base_dir: Path | None) -> Path | None:
    value = _text(context, "configFile")
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.is_dir():
        raise SettingsError(f"context configFile={value!r}: {path} is a directory; name the NodePool/EC2NodeClass "
                            "YAML file in it")
    if not path.is_file():
        raise SettingsError(f"context configFile={value!r}: no such file ({path})")
    return path
