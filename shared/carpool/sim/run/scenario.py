"""The scenario file `carpool simulate` runs: a cluster, its manifests, hidden truths and a timed workload.

A scenario is what a user writes to try carpool without AWS, and what the e2e tests use to prove a
capability. The *truth* section is what the real world would do and carpool cannot know in advance
(how much memory a node really reports, how long it takes to boot, which offerings are out of capacity);
the simulation plays it so carpool's learning and fallbacks are exercised.

Field names are camelCase in YAML (like Kubernetes) and snake_case in Python. Unknown fields are errors,
so a typo is reported with its path (`workload[2].scale.replica: Extra inputs are not permitted`), and so
is a repeated key. `load_scenario` also checks, before any run, what would otherwise fail or do nothing
minutes in (`runnable_problems`): the manifests load as carpool's loader reads them (workloads as strictly
as the API server, `scenario_manifests`), steps name workloads applied by then, zones and NodePools exist.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from carpool.amis.aliases import AL2, AL2023, BOTTLEROCKET, LATEST, Alias, alias_paths
from carpool.api.loader import strict_yaml_documents
from carpool.sim.cluster.specs import (
    Agent,
    Cni,
    Delete,
    KarpenterController,
    KarpenterNodes,
    KubeletFault,
    Scale,
    Truth,
)
from carpool.sim.cluster.workload import WORKLOAD_KINDS, controller_id
from carpool.sim.run.scenario_manifests import (
    ManifestCheck,
    ManifestSource,
    ScenarioError,
    check_manifest,
    resolve_manifest,
)
from carpool.sim.yaml_model import YamlModel

__all__ = ["ManifestSource", "Scenario", "ScenarioError", "WorkloadStep", "load_scenario", "parse_scenario",
           "resolve_manifest"]

#: Errors that CreateFleet reports for offerings without capacity (see reference §6).
CapacityErrorCode = Literal[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
]


class ClusterSpec(YamlModel):
    name: str = "sim"
    version: str = "1.32"
    region: str = "us-east-1"
    zones: list[str] = Field(default_factory=lambda: ["us-east-1a", "us-east-1b", "us-east-1c"], min_length=1)
    cni: Cni = Field(default_factory=Cni)

    @field_validator("version")
    @classmethod
    def _version_shape(cls, v: str) -> str:
        parts = v.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"expected a Kubernetes minor version like '1.32', got {v!r}")
        return v


class AmiSpec(YamlModel):
    """One image to register in local EC2 and the SSM parameter that points at it."""

    parameter: str | None = None
    name: str
    architecture: Literal["x86_64", "arm64"] = "x86_64"
    creation_date: str = "2025-01-01T00:00:00.000Z"
    deprecated: bool = False
    id: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("creation_date", mode="before")
    @classmethod
    def _date_as_text(cls, v: Any) -> Any:
        # YAML turns an unquoted 2025-01-01 into a date; EC2 wants the ISO text.
        return v.isoformat() if hasattr(v, "isoformat") else v


class CapacityFailure(YamlModel):
    """Offerings that fail with a capacity error during a window of simulated time."""

    instance_type: str = Field(description="instance type name or glob, e.g. c7i-flex.* or c7i-flex*")
    zone: str | None = None
    capacity_type: Literal["spot", "on-demand"] | None = None
    from_: float = Field(default=0.0, alias="from", ge=0)
    until: float | None = Field(default=None, ge=0)
    error: CapacityErrorCode = "InsufficientInstanceCapacity"

    @model_validator(mode="after")
    def _window(self) -> CapacityFailure:
        if self.until is not None and self.until <= self.from_:
            raise ValueError(f"until ({self.until}) must be after from ({self.from_})")
        return self

    def matches(self, instance_type: str, zone: str | None, capacity_type: str | None, at: float) -> bool:
        """Whether an offering fails at `at` seconds into the run (unset fields match anything)."""
        if at < self.from_ or (self.until is not None and at >= self.until):
            return False
        if not fnmatch.fnmatchcase(instance_type, self.instance_type):
            return False
        if self.zone is not None and zone is not None and self.zone != zone:
            return False
        return not (self.capacity_type is not None and capacity_type is not None and self.capacity_type != capacity_type)


#: Where a Lambda invocation can die around a CreateFleet call (see `carpool.sim.run.faults.CrashFaults`);
#: `answer-lost-after-create-fleet` is not a death: EC2 launched and the answer never came back (read
#: timeouts on every retry), so the invocation goes on with botocore's `ReadTimeoutError`.
CrashPoint = Literal["before-create-fleet", "after-create-fleet", "answer-lost-after-create-fleet"]


class Crash(YamlModel):
    """A Lambda invocation killed at a point of its work (timeout, out of memory): nothing after that point
    runs, the invocation fails and its SQS batch comes back after the visibility timeout."""

    #: from this simulated time on, the next `times` invocations reaching `point` die there
    at: float = Field(default=0.0, ge=0)
    point: CrashPoint
    times: int = Field(default=1, ge=1)
    #: the function whose invocation dies (the provisioner is the one that launches)
    function: Literal["provisioner", "interruption", "disruption"] = "provisioner"


class TerminationDenial(YamlModel):
    """A service control policy (or IAM policy) with an explicit deny of `ec2:TerminateInstances` on the
    instances of `nodePool` (all of carpool's when unset) from `from` to `until` seconds: EC2 answers
    `UnauthorizedOperation` (HTTP 403) and terminates nothing of that call."""

    node_pool: str | None = None
    from_: float = Field(default=0.0, alias="from", ge=0)
    until: float | None = Field(default=None, ge=0)

    def denies(self, node_pool: str, at: float) -> bool:
        return ((self.node_pool is None or self.node_pool == node_pool) and at >= self.from_
                and (self.until is None or at < self.until))


class NodeGroup(YamlModel):
    """Nodes that exist before carpool starts (an EKS managed node group run by Cluster Autoscaler)."""

    name: str
    instance_type: str
    count: int = Field(default=1, ge=0)
    zone: str | None = None
    capacity_type: Literal["spot", "on-demand"] = "on-demand"
    ami_family: str = "al2023"
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, str]] = Field(default_factory=list)


class InstanceSelector(YamlModel):
    """Which carpool instances an interruption or health event hits (all set fields must match)."""

    node_pool: str | None = None
    instance_type: str | None = Field(default=None, description="name or glob")
    zone: str | None = None
    capacity_type: Literal["spot", "on-demand"] | None = None
    count: int = Field(default=1, ge=1)


#: How each family writes a release in its image names: `amazon-eks-node-al2023-x86_64-standard-1.32-v20250115`,
#: `amazon-eks-node-1.32-v20250115`, `bottlerocket-aws-k8s-1.32-x86_64-v1.31.0-aa1b2c3d`.
_RELEASE = {AL2023: r"v\d{8}", AL2: r"v\d{8}", BOTTLEROCKET: r"v\d+\.\d+\.\d+"}


@dataclass(frozen=True)
class Release:
    """One image of a published release: what to register in EC2 (a `seed_amis` entry, without a
    parameter) and every SSM parameter that names it from now on."""

    image: dict[str, Any]
    parameters: tuple[str, ...]


class PublishAmi(YamlModel):
    """AWS publishes a new release of an EKS-optimized (or Bottlerocket) AMI family: a new image for each
    of the scenario's `amis` the family's `@latest` alias resolves through, registered in EC2, its
    `@latest` parameter pointing at it, and the release's own parameter (`al2023@v20250301`) created."""

    #: the family: al2023, al2 or bottlerocket (`al2023@latest` is read as al2023)
    alias: str
    #: the new release, as the family's names write it: v20250301 (al2023, al2), v1.33.0 (bottlerocket)
    version: str
    #: the images' creation date (default: the simulated time of the step)
    creation_date: str | None = None

    @field_validator("alias")
    @classmethod
    def _family(cls, v: str) -> str:
        family, _, version = v.lower().partition("@")
        if family not in _RELEASE:
            raise ValueError(f"{v!r}: publishAmi publishes a release of {', '.join(_RELEASE)}")
        if version not in ("", LATEST):
            raise ValueError(f"{v!r}: a release is published under @latest; name the family alone")
        return family

    @field_validator("creation_date", mode="before")
    @classmethod
    def _date_as_text(cls, v: Any) -> Any:
        return v.isoformat() if hasattr(v, "isoformat") else v

    @model_validator(mode="after")
    def _version_shape(self) -> PublishAmi:
        if not re.fullmatch(_RELEASE[self.alias], self.version):
            example = "v1.33.0" if self.alias == BOTTLEROCKET else "v20250301"
            raise ValueError(f"version {self.version!r}: {self.alias} releases are written like {example}")
        return self

    def releases(self, amis: list[AmiSpec], cluster_version: str, at: datetime) -> list[Release]:
        """The images and parameters of this release, one for each of `amis` that the family's `@latest`
        parameters name. Raises ValueError when none does, or when an image's name shows no release."""
        latest = alias_paths(Alias(self.alias, LATEST), cluster_version, check_version=False)
        pinned = alias_paths(Alias(self.alias, self.version), cluster_version, check_version=False)
        by_path = {a.parameter: a for a in amis if a.parameter}
        out = [self._release(by_path[p.path], (p.path, q.path), at)
               for p, q in zip(latest, pinned, strict=True) if p.path in by_path]
        if not out:
            raise ValueError(f"publishAmi {self.alias}: no AMI of the scenario's `amis` is published under "
                             f"{self.alias}@latest for Kubernetes {cluster_version} "
                             f"(its parameters: {', '.join(p.path for p in latest)})")
        return out

    def _release(self, old: AmiSpec, parameters: tuple[str, ...], at: datetime) -> Release:
        name, n = re.subn(_RELEASE[self.alias], self.version, old.name, count=1)
        if not n:
            raise ValueError(f"publishAmi {self.alias}: AMI name {old.name!r} shows no release to replace "
                             f"(expected one like {_RELEASE[self.alias]})")
        image = old.model_dump(by_alias=True, exclude_none=True, exclude={"id", "parameter", "deprecated"})
        image |= {"name": name, "creationDate": self.creation_date or at.isoformat()}
        return Release(image, parameters)


#: The action fields of a step, as written in Python (`WorkloadStep.action` answers one of them).
STEP_ACTIONS = ("apply", "scale", "delete", "spot_interruption", "health_event", "publish_ami",
                "termination_protection")


class WorkloadStep(YamlModel):
    """One timed action; exactly one of the action fields is set. A NodePool or EC2NodeClass edit is an
    `apply` of the changed document, as `kubectl apply` sends it to the cluster; `delete: {nodepool: NAME}`
    is `kubectl delete nodepool NAME`."""

    at: float = Field(ge=0)
    apply: ManifestSource | None = None
    scale: Scale | None = None
    delete: Delete | None = None
    spot_interruption: InstanceSelector | None = None
    health_event: InstanceSelector | None = None
    publish_ami: PublishAmi | None = None
    #: someone turns on termination protection for these instances (ModifyInstanceAttribute
    #: `DisableApiTermination`): EC2 then refuses TerminateInstances with `OperationNotPermitted`
    termination_protection: InstanceSelector | None = None
    #: where the step is in the file (the steps are sorted by time once read): its messages name it so
    _position: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _one_action(self) -> WorkloadStep:
        actions = [n for n in STEP_ACTIONS if getattr(self, n) is not None]
        if len(actions) != 1:
            raise ValueError(
                f"a step needs exactly one of {', '.join(to_camel(n) for n in STEP_ACTIONS)}"
                f" (got {', '.join(actions) or 'none'})"
            )
        return self

    @property
    def path(self) -> str:
        """`workload[2]`: the step as the scenario file places it."""
        return f"workload[{self._position}]"

    @property
    def action(self) -> str:
        for n in STEP_ACTIONS:
            if getattr(self, n) is not None:
                return n
        raise AssertionError("validated to have one action")


class BindRace(YamlModel):
    """Pods created and bound by the kube-scheduler while a function's run is between its read of the
    cluster and its first cordon at or after `at` seconds (once).

    Deployed, the disruption function lists the pods, then plans for seconds (tens at a few thousand
    nodes) before it cordons what it chose; the kube-scheduler binds a new pod within milliseconds to any
    schedulable node it fits, and a node the plan judged empty is schedulable until it is cordoned. The
    simulation runs an invocation's work in one instant, so this plays that window: just before the
    cordon is written, the pods are created and the simulated kube-scheduler binds what it can (its own
    filters, nothing chosen for it)."""

    at: float = Field(default=0.0, ge=0)
    function: Literal["disruption"] = "disruption"
    apply: ManifestSource


class Expect(YamlModel):
    """Optional outcome the scenario author expects; `carpool simulate` reports whether it held."""

    all_pods_scheduled: bool | None = None
    max_seconds_to_schedule: float | None = None


class Scenario(YamlModel):
    name: str = ""
    description: str = ""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    manifests: list[ManifestSource] = Field(default_factory=list)
    amis: list[AmiSpec] = Field(default_factory=list)
    truth: Truth = Field(default_factory=Truth)
    capacity: list[CapacityFailure] = Field(default_factory=list)
    #: Lambda invocations killed at a point of their work (a crash between CreateFleet and the claim write)
    crashes: list[Crash] = Field(default_factory=list)
    node_groups: list[NodeGroup] = Field(default_factory=list)
    workload: list[WorkloadStep] = Field(default_factory=list)
    #: DaemonSet agents that remove startup taints (nothing else lifts them)
    agents: list[Agent] = Field(default_factory=list)
    #: kubelets that fail to join, join late or report less memory
    kubelets: list[KubeletFault] = Field(default_factory=list)
    #: pods the kube-scheduler binds between a function's read and its cordon (see `BindRace`)
    races: list[BindRace] = Field(default_factory=list)
    #: explicit denies of TerminateInstances (a service control policy, see `TerminationDenial`)
    termination_denials: list[TerminationDenial] = Field(default_factory=list)
    #: Karpenter controllers running beside carpool, each leading through its Lease (`KarpenterController`)
    karpenter: list[KarpenterController] = Field(default_factory=list)
    #: nodes Karpenter built before the run (NodeClaims, instances, nodes) for carpool to adopt (`KarpenterNodes`)
    karpenter_nodes: list[KarpenterNodes] = Field(default_factory=list)
    duration: float = Field(default=600.0, gt=0)
    #: how often the timeline is recorded; nothing is invoked on a tick: every function runs on its deployed
    #: trigger (`carpool.sim.run.lambda_service`), so a scenario cannot set a schedule of its own
    tick_seconds: float = Field(default=10.0, gt=0)
    expect: Expect = Field(default_factory=Expect)
    #: where the file was read from; relative manifest paths resolve against it
    base_dir: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _sorted_steps(self) -> Scenario:
        for position, step in enumerate(self.workload):
            step._position = position
        self.workload.sort(key=lambda s: s.at)
        return self

    @model_validator(mode="after")
    def _publishable(self) -> Scenario:
        """A release can only replace images the scenario has (checked now, not minutes into the run)."""
        for step in self.workload:
            if step.publish_ami is not None:
                try:
                    step.publish_ami.releases(self.amis, self.cluster.version, datetime.fromtimestamp(0, UTC))
                except ValueError as exc:
                    raise ValueError(f"workload step at {step.at:g}s: {exc}") from None
        return self

    def manifest_texts(self, sources: list[ManifestSource] | None = None) -> list[tuple[str, str]]:
        """(label, YAML text) for each source; files are read relative to the scenario file."""
        out = []
        for i, src in enumerate(self.manifests if sources is None else sources):
            out.append(resolve_manifest(src, self.base_dir, f"manifests[{i}]"))
        return out


def _format_errors(source: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        path = ""
        for part in e["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            elif part in {"str", "dict[str,any]", "list[dict[str,any]]"} or "[" in str(part):
                continue  # union member names pydantic adds to the location
            else:
                path += ("." if path else "") + str(part)
        lines.append(f"{source}: {path or '<root>'}: {e['msg'].removeprefix('Value error, ')}")
    return "\n".join(dict.fromkeys(lines))


def parse_scenario(data: Any, source: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    """Validate already-loaded YAML. Raises ScenarioError naming `source` and each bad field."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping (cluster, manifests, workload...)")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(_format_errors(source, err)) from None
    if base_dir is not None:
        scenario.base_dir = base_dir
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file and check that it can be run: its manifests load and its steps name what
    exists when they come due. Raises ScenarioError, one line a problem, naming the file and the field."""
    p = Path(path)
    scenario = parse_scenario(_read_document(p), str(p), p.resolve().parent)
    if not scenario.name:
        scenario.name = p.stem
    problems = runnable_problems(scenario)
    if problems:
        raise ScenarioError("\n".join(f"{p}: {problem}" for problem in problems))
    return scenario


def _read_document(p: Path) -> Any:
    """The one YAML document of a scenario file, read as strictly as a manifest (a repeated key refused)."""
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"{p}: cannot read scenario ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{p}: not a text file (it is not UTF-8: binary?)") from None
    try:
        documents = [(dup, doc) for dup, doc in strict_yaml_documents(text) if doc is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ScenarioError(f"{p}: not valid YAML: {problem}{where}") from None
    docs = [doc for _dup, doc in documents]
    if any(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs):
        kinds = ", ".join(dict.fromkeys(str(d.get("kind")) for d in docs if isinstance(d, dict)))
        raise ScenarioError(f"{p}: a Kubernetes manifest ({kinds}), not a scenario: `carpool validate` and "
                            "`carpool plan --manifests` read manifests; a scenario names them under `manifests:`")
    if len(docs) > 1:
        raise ScenarioError(f"{p}: {len(docs)} YAML documents; a scenario is one document")
    if not docs:
        return None
    if documents[0][0]:  # the first repeat; the file is fixed one key at a time, as the API server says
        path, key, line = documents[0][0][0]
        raise ScenarioError(f"{p}: {path or '<root>'}: duplicate field {key!r} (again at line {line})")
    return docs[0]


def runnable_problems(scenario: Scenario) -> list[str]:
    """What would stop the run once started, or make a part of it do nothing: a manifest that does not
    load (its file missing, a field carpool refuses), no NodePool or EC2NodeClass to start from, a step
    scaling or deleting a workload not applied by then, a zone the cluster does not have, a NodePool no
    manifest defines, a node group of an instance type EC2 does not have."""
    seen = _Applied()
    problems = [*_manifest_problems(scenario, seen), *_zone_problems(scenario), *_node_group_problems(scenario)]
    pools = ", ".join(sorted(seen.nodepools)) or "none"
    problems += [f"{path}.nodePool: no NodePool {pool!r} in the scenario's manifests (defined: {pools})"
                 for path, target in _targets(scenario)
                 if (pool := getattr(target, "node_pool", None)) is not None and pool not in seen.nodepools]
    return problems


@dataclass
class _Applied:
    """What the scenario's manifests have applied so far, in the order the run plays them."""

    workloads: set[str] = field(default_factory=set)
    nodepools: set[str] = field(default_factory=set)
    config: bool = False

    def add(self, check: ManifestCheck) -> list[str]:
        self.workloads.update(check.workloads)
        self.nodepools.update(check.nodepools)
        self.config = self.config or check.config
        return check.problems


def _manifest_problems(scenario: Scenario, seen: _Applied) -> list[str]:
    base = scenario.base_dir
    problems = [p for i, src in enumerate(scenario.manifests) for p in seen.add(check_manifest(src, base, f"manifests[{i}]"))]
    if not problems and not seen.config:
        problems.append("manifests: no NodePool or EC2NodeClass (carpool has nothing to launch from)")
    for step in scenario.workload:
        if step.apply is not None:
            problems += seen.add(check_manifest(step.apply, base, f"{step.path}.apply"))
        for action, target in (("scale", step.scale), ("delete", step.delete)):
            name = getattr(target, "deployment", None)
            if target is None or name is None:
                continue
            key = _applied(seen.workloads, name, target.namespace)
            if key is None:
                problems.append(f"{step.path}.{action}.deployment: no workload {target.namespace}/{name} is applied "
                                f"before {step.at:g}s (applied: {', '.join(sorted(seen.workloads)) or 'none'})")
            elif action == "delete":
                seen.workloads.discard(key)
        pool = step.delete.nodepool if step.delete is not None else None
        if pool is not None and pool not in seen.nodepools:
            problems.append(f"{step.path}.delete.nodepool: no NodePool {pool!r} is applied before {step.at:g}s "
                            f"(applied: {', '.join(sorted(seen.nodepools)) or 'none'})")
    for i, race in enumerate(scenario.races):
        problems += seen.add(check_manifest(race.apply, base, f"races[{i}].apply"))
    return problems


def _targets(scenario: Scenario) -> list[tuple[str, Any]]:
    """(path, section) of every section that picks nodes or offerings by zone or NodePool."""
    out: list[tuple[str, Any]] = [(f"nodeGroups[{i}]", g) for i, g in enumerate(scenario.node_groups)]
    out += [(f"karpenterNodes[{i}]", k) for i, k in enumerate(scenario.karpenter_nodes)]
    out += [(f"capacity[{i}]", c) for i, c in enumerate(scenario.capacity)]
    out += [(f"agents[{i}].nodes", a.nodes) for i, a in enumerate(scenario.agents)]
    out += [(f"kubelets[{i}]", k) for i, k in enumerate(scenario.kubelets)]
    out += [(f"terminationDenials[{i}]", d) for i, d in enumerate(scenario.termination_denials)]
    for step in scenario.workload:
        for name in ("spot_interruption", "health_event", "termination_protection"):
            if (selector := getattr(step, name)) is not None:
                out.append((f"{step.path}.{to_camel(name)}", selector))
        if step.delete is not None:  # `kubectl delete nodeclaim|node` of a NodePool's nodes
            out += [(f"{step.path}.delete.{to_camel(name)}", t) for name in ("node_claims", "nodes")
                    if (t := getattr(step.delete, name)) is not None]
    return out


def _zone_problems(scenario: Scenario) -> list[str]:
    """A zone must be the cluster's (its subnets are the only ones), and the cluster's in its region."""
    cluster = scenario.cluster
    problems = [f"cluster.zones[{i}]: {zone!r} is not a zone of region {cluster.region}"
                for i, zone in enumerate(cluster.zones) if not zone.startswith(cluster.region)]
    zones = ", ".join(cluster.zones)
    problems += [f"{path}.zone: {zone!r} is not one of the cluster's zones ({zones})"
                 for path, target in _targets(scenario)
                 if (zone := getattr(target, "zone", None)) is not None and zone not in cluster.zones]
    return problems


def _node_group_problems(scenario: Scenario) -> list[str]:
    """A node group's (or Karpenter's) instances are launched as listed: EC2 refuses a type it does not have."""
    sections: list[tuple[str, NodeGroup | KarpenterNodes]] = [
        *((f"nodeGroups[{i}]", g) for i, g in enumerate(scenario.node_groups)),
        *((f"karpenterNodes[{i}]", k) for i, k in enumerate(scenario.karpenter_nodes))]
    if not sections:
        return []
    from carpool.catalog import Catalog, SnapshotNotFound

    try:
        catalog = Catalog.snapshot(scenario.cluster.region)
    except SnapshotNotFound:
        return []  # no offline catalog to check against: local EC2 says it
    return [f"{path}.instanceType: {g.instance_type!r} is not an EC2 instance type"
            + (f" (did you mean {', '.join(close)}?)" if (close := catalog.suggest(g.instance_type)) else "")
            for path, g in sections if g.instance_type not in catalog.types]


def _applied(applied: set[str], name: str, namespace: str) -> str | None:
    """The workload a step names, found as the simulated cluster finds it (any workload kind)."""
    return next((k for kind in WORKLOAD_KINDS if (k := controller_id(kind, namespace, name)) in applied), None)


#: The tag the usual EC2NodeClass selects its subnets and security groups by, with the cluster's name.
DISCOVERY_TAG = "karpenter.sh/discovery"


def for_cluster(doc: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The scenario document `doc` (as loaded from YAML) played for the cluster `cluster`: its name, and
    every discovery tag that selected the old name, now select the new one. Scenarios written for
    different clusters can then share one set of names (tables, queues, bus) and one synthesized stack."""
    old = doc["cluster"]["name"]

    def renamed(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (cluster if k == DISCOVERY_TAG and v == old else renamed(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [renamed(v) for v in value]
        return value

    out: dict[str, Any] = renamed(doc)
    out["cluster"]["name"] = cluster
    return out
