"""The NodePool/EC2NodeClass YAML that the functions read from SSM (``/carpool/<cluster>/config``).

Why SSM and not the cluster: carpool does not install CRDs into the cluster, so the same Karpenter v1
manifests live in versioned parameters instead, written by every ``cdk deploy`` (pass ``-c
configFile=nodepools.yaml``). A config that fits 8 KB is the index parameter's value, as it always was;
a larger one (200 NodePools is ~100 KB) is stored compressed in STANDARD-tier parts that the index points
to (``carpool.config_parts`` says why this storage: free parameters, one GetParameters a change, IAM
naming each parameter, no bucket or custom resource). The parts are written before the index
(a dependency), and the functions' reader refuses a mix of old and new parts by the index's digest. Without a file, a conservative default is deployed so that ``cdk deploy -c
clusterName=NAME`` alone gives a working autoscaler: one pool, AL2023, spot and on-demand, c/m/r families
of generation 5+, and a 100 vCPU limit so a runaway workload cannot buy an unbounded fleet.

The YAML is checked at synth time: a UTF-8 text file within what the parts can hold, then judged by the
library exactly as ``carpool validate`` and every function judge it (``carpool.api.config``: Karpenter's CRD
schema, carpool's models, only NodePool and EC2NodeClass documents, every ``nodeClassRef`` resolved), so a
typo fails ``cdk synth`` with one line a problem naming the document and field instead of the next scale-up.
The NodePool limits found here also define the "pool near its limit" alarms (one per pool and resource).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from carpool import config_parts, quantity
from carpool.api import config as api_config
from carpool.api.loader import ManifestErrors, Manifests, NamedText
from carpool.cli.validate import limit_warnings
from infra.settings import Settings

#: A config up to this size is stored as the index parameter's value (ADVANCED tier); larger ones in parts.
MAX_PARAMETER_BYTES = config_parts.INLINE_MAX_BYTES
#: The only kinds a config holds: carpool reads nothing else from it.
CONFIG_KINDS = api_config.CONFIG_KINDS
#: Stands in for the node role name while validating the default config (the real one is a CDK token).
_ROLE_PLACEHOLDER = "carpool-node-role"


class ConfigError(ValueError):
    """The NodePool/EC2NodeClass YAML is unusable; the message names the document and field."""


@dataclass(frozen=True)
class PoolLimit:
    """A ``spec.limits`` entry of a NodePool, as deployed: the stack alarms on the pools' limits only when
    there is one (the watcher compares each pool's usage with the limits of the config it reads).

    ``value`` is in the library's canonical units (millicores, bytes, counts), the units the watcher
    publishes usage in; a limit is identified by pool and resource alone.
    """

    nodepool: str
    resource: str
    value: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ClusterConfig:
    """The text stored in the parameter, where it came from, and the limits it declares."""

    text: str
    source: str
    pool_limits: tuple[PoolLimit, ...]
    nodepools: tuple[str, ...]
    #: problems that do not stop a deploy (a limit on a resource no admitted instance type offers)
    warnings: tuple[str, ...] = ()
    #: what the index parameter holds (``text`` itself, or the pointer to ``parts``) and the parts
    index_value: str = ""
    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigParameters:
    """The parameters the config is stored in: the index (the name the functions are given) and its parts."""

    index: ssm.StringParameter
    parts: tuple[ssm.StringParameter, ...]

    @property
    def parameter_arns(self) -> list[str]:
        """Exactly what a function reads (GetParameter on the index, GetParameters on the parts)."""
        return [self.index.parameter_arn, *(part.parameter_arn for part in self.parts)]


def store_config(scope: Construct, settings: Settings, config: ClusterConfig) -> ConfigParameters:
    """The index parameter (construct id ``Config``, as before parts existed, so existing stacks keep it)
    and one STANDARD-tier parameter per part, written before the index."""
    index = ssm.StringParameter(
        scope,
        "Config",
        parameter_name=settings.config_parameter_name,
        description=f"carpool NodePools and EC2NodeClasses ({config.source})"
        + (f", in {len(config.parts)} compressed parts" if config.parts else ""),
        string_value=config.index_value or config.text,
        tier=ssm.ParameterTier.ADVANCED,
    )
    parts = tuple(
        ssm.StringParameter(
            scope,
            f"ConfigPart{number}",
            parameter_name=config_parts.part_name(settings.config_parameter_name, number),
            description=f"carpool config part {number + 1} of {len(config.parts)} (gzip+base64)",
            string_value=value,
            tier=ssm.ParameterTier.STANDARD,
        )
        for number, value in enumerate(config.parts)
    )
    for part in parts:
        index.node.add_dependency(part)
    return ConfigParameters(index, parts)


def default_config(settings: Settings, node_role_name: str) -> str:
    """Karpenter v1 manifests for a sensible first pool; ``node_role_name`` may be a CDK token."""
    subnet, group = settings.discovery_subnet_tag, settings.discovery_security_group_tag
    documents: list[dict[str, Any]] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
                        ],
                        "expireAfter": "720h",
                    }
                },
                "limits": {"cpu": "100", "memory": "400Gi"},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
            },
        },
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": node_role_name,
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {subnet.key: subnet.value}}],
                "securityGroupSelectorTerms": [{"tags": {group.key: group.value}}],
            },
        },
    ]
    return yaml.safe_dump_all(documents, sort_keys=False, width=200)


def load_config(settings: Settings, node_role_name: str) -> ClusterConfig:
    """Read ``configFile`` (or render the default), judge it as the functions will and list its pool limits.

    The verdict is the library's one (``carpool.api.config.load_config``): the same documents are refused
    with the same lines by ``carpool validate``, here and at every function's cold start."""
    if settings.config_file is not None:
        source = f"configFile {settings.config_file}"
        text = _read_text(settings.config_file, source)
        checked = text
    else:
        text = default_config(settings, node_role_name)
        source = "built-in default"
        checked = default_config(settings, _ROLE_PLACEHOLDER)
    try:
        index_value, parts = config_parts.encode(checked)
    except config_parts.ConfigPartsError as exc:
        raise ConfigError(f"{source}: too large to store: {exc}") from None
    if parts and checked != text:  # only the default has deploy-time values; it is far below the limit
        raise ConfigError(f"{source}: a config with deploy-time values must fit {MAX_PARAMETER_BYTES} bytes")
    manifests = _judged(checked, source, settings.config_file)
    warnings = tuple(limit_warnings(list(manifests.nodepools)))
    for warning in warnings:
        print(f"carpool config: {warning}", file=sys.stderr)
    limits = tuple(
        PoolLimit(pool.name, resource, float(quantity.resource_value(resource, value)))
        for pool in manifests.nodepools
        for resource, value in sorted((pool.spec.limits or {}).items())
    )
    return ClusterConfig(text=text, source=source, pool_limits=limits,
                         nodepools=tuple(pool.name for pool in manifests.nodepools), warnings=warnings,
                         index_value=index_value if parts else text, parts=tuple(parts))


def _judged(text: str, source: str, path: Path | None) -> Manifests:
    """The library's verdict; every problem one line (``document: path: message``), as validate prints it."""
    named: Path | NamedText = path if path is not None else NamedText("default-config.yaml", text)
    try:
        return api_config.load_config([named], name=source)
    except ManifestErrors as exc:
        raise ConfigError("\n".join(str(e) for e in exc.errors)) from None


def _read_text(path: Path, source: str) -> str:
    """The file's UTF-8 text; a binary, unreadable or empty file is a one-line ``ConfigError``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    if "\x00" in text:
        raise ConfigError(f"{source}: not a text file (binary content); expected NodePool/EC2NodeClass YAML")
    return text
