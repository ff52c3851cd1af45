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

The YAML is checked at synth time: a UTF-8 text file holding documents, parseable, no key repeated in a
mapping (the API server's strict decoding refuses them too), only NodePool and EC2NodeClass documents,
within what the parts can hold, and (when the library's loader is available) valid Karpenter v1, so a typo
fails ``cdk synth`` with one line naming the document and field instead of the next scale-up.
The NodePool limits found here also define the "pool near its limit" alarms (one per pool and resource).
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from carpool import config_parts
from infra.settings import Settings

#: A config up to this size is stored as the index parameter's value (ADVANCED tier); larger ones in parts.
MAX_PARAMETER_BYTES = config_parts.INLINE_MAX_BYTES
#: The only kinds a config holds: carpool reads nothing else from it.
CONFIG_KINDS = ("NodePool", "EC2NodeClass")
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
    """Read ``configFile`` (or render the default), check it and list its pool limits."""
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
    documents = _parse(checked, source)
    _check_limits(documents, source)
    warnings: tuple[str, ...] = ()
    if settings.validate_config:
        warnings = _validate_with_library(checked, source, settings.config_file)
        for warning in warnings:
            print(f"carpool config: {warning}", file=sys.stderr)
    nodepools = tuple(_name(doc, source) for doc in documents if doc.get("kind") == "NodePool")
    limits = tuple(
        PoolLimit(_name(doc, source), str(resource), _limit_value(doc, str(resource), source))
        for doc in documents
        if doc.get("kind") == "NodePool"
        for resource in sorted((doc.get("spec") or {}).get("limits") or {})
    )
    return ClusterConfig(text=text, source=source, pool_limits=limits, nodepools=nodepools, warnings=warnings,
                         index_value=index_value if parts else text, parts=tuple(parts))


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


def _check_limits(documents: list[dict[str, Any]], source: str) -> None:
    """Negative NodePool limits fail the synth even without the library: a limit below zero refuses
    every launch of the pool, forever, which nobody means."""
    for doc in documents:
        if doc.get("kind") != "NodePool":
            continue
        for resource, value in ((doc.get("spec") or {}).get("limits") or {}).items():
            if str(value).strip().startswith("-"):
                raise ConfigError(
                    f"{source}: NodePool {_name(doc, source)}: spec.limits[{resource}]: invalid limit {value!r}: "
                    "must not be negative (0 stops the pool launching)"
                )


def _limit_value(doc: dict[str, Any], resource: str, source: str) -> float:
    """A NodePool limit as the library counts it (``"100"`` cpu -> 100,000 millicores, ``"1Gi"`` -> bytes)."""
    from carpool import quantity

    raw = doc["spec"]["limits"][resource]
    try:
        return float(quantity.resource_value(resource, raw))
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{source}: NodePool {_name(doc, source)}: spec.limits[{resource}]: invalid quantity {raw!r}: {exc}"
        ) from exc


def _parse(text: str, source: str) -> list[dict[str, Any]]:
    """The documents, decoded as strictly as the API server decodes them; one line naming the problem."""
    from carpool.api.loader import strict_yaml_documents

    documents: list[Any] = []
    try:
        for number, (duplicates, doc) in enumerate(strict_yaml_documents(text), start=1):
            for path, key, line in duplicates[:1]:
                where = f"{path}: " if path else ""
                raise ConfigError(f'{source}#{number}: {where}duplicate field "{key}" (again at line {line})')
            if doc is not None:
                documents.append((number, doc))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{source}: not valid YAML: {getattr(exc, 'problem', None) or exc}{where}") from None
    if not documents:
        raise ConfigError(f"{source}: holds no document (empty, or only comments); expected NodePools and EC2NodeClasses")
    for number, doc in documents:
        if not isinstance(doc, dict) or "kind" not in doc:
            raise ConfigError(f"{source}#{number}: every document needs a kind (NodePool or EC2NodeClass)")
        if doc["kind"] not in CONFIG_KINDS:
            raise ConfigError(
                f"{source}#{number}: kind {doc['kind']!r} ({_name_or(doc)}): configFile holds only NodePool and "
                "EC2NodeClass documents; apply other objects to the cluster with kubectl"
            )
    documents = [doc for _, doc in documents]
    if not any(doc["kind"] == "NodePool" for doc in documents):
        raise ConfigError(f"{source}: no NodePool; carpool would never launch a node")
    return documents


def _name_or(doc: dict[str, Any]) -> str:
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    return f"name {name!r}" if isinstance(name, str) else "no name"


def _name(doc: dict[str, Any], source: str) -> str:
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: a {doc.get('kind')} has no metadata.name")
    return name


def _validate_with_library(text: str, source: str, path: Path | None) -> tuple[str, ...]:
    """Run carpool's own manifest loader, the one the functions use, when it can be imported; returns
    its warnings (limits no instance type of the pool can reach, checked against the shipped catalog).

    The import is optional because the deployment must not depend on every library module being
    importable on the deploying machine; when it is, a bad field fails here with its path.
    """
    try:
        from carpool.api import loader  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return ()
    with tempfile.TemporaryDirectory() as folder:
        if path is None:  # the built-in default: give the loader a file named after what it is
            path = Path(folder, "default-config.yaml")
            path.write_text(text)
        try:
            manifests = loader.load([path])
        except getattr(loader, "ManifestErrors", ()) as exc:  # type: ignore[misc]
            details = "\n".join(
                f"  {err.document} {err.path}: {err.message}" for err in getattr(exc, "errors", [])
            )
            raise ConfigError(f"{source} is not valid carpool/Karpenter v1 config:\n{details or exc}") from exc
    try:
        from carpool.cli.validate import limit_warnings  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return ()
    return tuple(limit_warnings(list(manifests.nodepools)))
