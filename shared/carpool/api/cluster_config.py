"""The config as the cluster holds it: NodePools and EC2NodeClasses judged one object at a time.

Why each object on its own: in a cluster the config is many objects written by many hands (a file per
team, GitOps), not one file a deploy checks as a whole. Karpenter judges each NodePool by itself
(`pkg/controllers/nodepool/validation/controller.go`: `RuntimeValidate`, condition `ValidationSucceeded`)
and each NodePool's class by itself (`pkg/controllers/nodepool/readiness/controller.go`: condition
`NodeClassReady`, `NodeClassNotFound` when the class is absent, `NodeClassTerminating` while it is being
deleted); a bad object stops only itself. So does `judge`: each object goes through the same verdict as
`carpool validate` (`carpool.api.loader`: Karpenter's CRD schema, then carpool's models), then each
NodePool's `nodeClassRef` must name an EC2NodeClass that is valid and not being deleted. What passes is
the `Manifests` the functions schedule with; every object, valid or not, has its `ObjectVerdict`, from
which the status helper writes `ValidationSucceeded` and `NodeClassReady`, and with the status as listed,
so a NodePool whose class is `Ready=False` can be skipped without another read.

Pure: data in (the objects as `list_objects` returns them), data out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from carpool.api import nodeclass as nodeclass_api
from carpool.api import nodepool as nodepool_api
from carpool.api.loader import ManifestError, ManifestErrors, Manifests, load_object

__all__ = ["EC2NODECLASS_KIND", "NODEPOOL_KIND", "ClusterConfig", "ObjectVerdict", "judge", "user_object"]

NODEPOOL_KIND: Final = nodepool_api.KIND
EC2NODECLASS_KIND: Final = nodeclass_api.KIND

#: metadata the API server writes (or kubectl keeps for itself): none of it is the user's config, and
#: `status` is carpool's own to write
_SERVER_METADATA: Final = frozenset({
    "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "managedFields", "selfLink", "namespace",
})
_SERVER_ANNOTATIONS: Final = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
#: what the objects' problems are labelled by inside the loader (each verdict already names its object)
_LABEL: Final = "cluster"


@dataclass(frozen=True, slots=True)
class ObjectVerdict:
    """What carpool made of one object. `problems` empty: it is in the `Manifests` and served.

    `problems` lists the object's own problems (`own_problems`: the CRD's and the models' verdict, what
    `ValidationSucceeded` says) and then, for a NodePool, why its class keeps it out (`reference_problem`).
    `nodeclass_missing`: the NodePool names an EC2NodeClass the cluster does not hold (Karpenter's
    `NodeClassNotFound`); a class that is there but invalid or terminating is not missing."""

    kind: str
    name: str
    uid: str
    generation: int
    resource_version: str
    problems: tuple[str, ...] = ()
    nodeclass_missing: bool = False
    #: the object's `status` as listed (empty when it has none)
    status: dict[str, Any] = field(default_factory=dict, compare=False)
    #: the EC2NodeClass a NodePool names ("" for a class, or a NodePool whose reference cannot be read)
    nodeclass: str = ""
    #: why the NodePool's class keeps it out ("" when it does not): the last of `problems`
    reference_problem: str = ""

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def own_problems(self) -> tuple[str, ...]:
        """`problems` less the class reference's: what `ValidationSucceeded=False` reports."""
        return self.problems[:-1] if self.reference_problem else self.problems


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster's config: the valid objects (`manifests`) and a verdict on every object, keyed
    (kind, name)."""

    manifests: Manifests
    verdicts: dict[tuple[str, str], ObjectVerdict]

    def verdict(self, kind: str, name: str) -> ObjectVerdict | None:
        return self.verdicts.get((kind, name))

    def refused(self) -> list[ObjectVerdict]:
        """The objects kept out, in (kind, name) order."""
        return [v for _, v in sorted(self.verdicts.items()) if v.problems]

    def summary(self) -> str:
        """One line for the log: what is served and what is kept out, with why."""
        served = self.manifests.summary()
        refused = self.refused()
        if not refused:
            return f"{served} served"
        reasons = "; ".join(f"{v.kind} {v.name}: {' / '.join(v.problems)}" for v in refused)
        return f"{served} served, {len(refused)} kept out ({reasons})"


def judge(nodepools: Iterable[Mapping[str, Any]], nodeclasses: Iterable[Mapping[str, Any]]) -> ClusterConfig:
    """Judge every object on its own, then each NodePool's class reference (see the module docstring)."""
    manifests = Manifests()
    verdicts: dict[tuple[str, str], ObjectVerdict] = {}
    terminating: set[str] = set()
    for obj in nodeclasses:
        verdict, judged = _judge_one(EC2NODECLASS_KIND, obj)
        verdicts[(EC2NODECLASS_KIND, verdict.name)] = verdict
        if judged is not None:
            _add(manifests, judged)
        if _metadata(obj).get("deletionTimestamp"):
            terminating.add(verdict.name)
    served_classes = {c.name for c in manifests.nodeclasses} - terminating
    for obj in nodepools:
        verdict, judged = _judge_one(NODEPOOL_KIND, obj)
        verdict = _with_reference(verdict, _node_class_ref(obj), verdicts, served_classes, terminating)
        verdicts[(NODEPOOL_KIND, verdict.name)] = verdict
        if judged is not None and not verdict.problems:
            _add(manifests, judged)
    return ClusterConfig(manifests, verdicts)


def user_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` as its author wrote it: no `status`, none of the metadata the API server (or kubectl) adds.
    The CRD's defaults the server filled in stay: the loader fills the same ones."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in _metadata(obj).items() if k not in _SERVER_METADATA}
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        kept = {k: v for k, v in annotations.items() if k not in _SERVER_ANNOTATIONS}
        if kept:
            meta["annotations"] = kept
        else:
            meta.pop("annotations")
    out["metadata"] = meta
    return out


def _judge_one(kind: str, obj: Mapping[str, Any]) -> tuple[ObjectVerdict, Manifests | None]:
    """The verdict on one object and, when it passes, what it loaded as."""
    meta = _metadata(obj)
    status = obj.get("status")
    verdict = ObjectVerdict(
        kind=kind,
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        generation=_int(meta.get("generation")),
        resource_version=str(meta.get("resourceVersion") or ""),
        status=dict(status) if isinstance(status, Mapping) else {},
    )
    try:
        loaded = load_object(user_object(obj), _LABEL)
    except ManifestErrors as exc:
        return replace(verdict, problems=tuple(_problem(e) for e in exc.errors)), None
    return verdict, loaded


def _with_reference(verdict: ObjectVerdict, ref: Mapping[str, Any], verdicts: Mapping[tuple[str, str], ObjectVerdict],
                    served: set[str], terminating: set[str]) -> ObjectVerdict:
    """`verdict` with its class reference judged: the class must be an EC2NodeClass that is there, valid and
    not being deleted. Judged even when the NodePool itself is invalid, so both are said at once."""
    group, kind, name = (str(ref.get(k) or "") for k in ("group", "kind", "name"))
    why, missing = "", False
    if not name:  # no reference to judge: the CRD's `required` problem already says so
        return verdict
    if (group, kind) != ("karpenter.k8s.aws", EC2NODECLASS_KIND):
        why = f"spec.template.spec.nodeClassRef: carpool launches only karpenter.k8s.aws/EC2NodeClass (got {group}/{kind})"
    elif name in served:
        return replace(verdict, nodeclass=name)
    elif name in terminating:
        why = f"EC2NodeClass {name!r} is being deleted (NodeClassTerminating)"
    elif (EC2NODECLASS_KIND, name) in verdicts:
        why = f"EC2NodeClass {name!r} is not valid (see its ValidationSucceeded condition)"
    else:
        known = ", ".join(sorted(n for k, n in verdicts if k == EC2NODECLASS_KIND)) or "none"
        why, missing = f"EC2NodeClass {name!r} not found on the cluster (NodeClassNotFound; the cluster holds: {known})", True
    return replace(verdict, problems=(*verdict.problems, why), nodeclass_missing=missing, nodeclass=name,
                    reference_problem=why)


def _add(manifests: Manifests, loaded: Manifests) -> None:
    manifests.nodepools.extend(loaded.nodepools)
    manifests.nodeclasses.extend(loaded.nodeclasses)
    manifests.documents.update(loaded.documents)


def _problem(error: ManifestError) -> str:
    """A loader problem without its document label: the verdict names the object already."""
    return f"{error.path}: {error.message}" if error.path else error.message


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _node_class_ref(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    ref: Any = obj
    for key in ("spec", "template", "spec", "nodeClassRef"):
        ref = ref.get(key) if isinstance(ref, Mapping) else None
    return ref if isinstance(ref, Mapping) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
