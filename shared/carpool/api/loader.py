"""Load multi-document YAML/JSON (files or text) into typed objects, reporting every error at once.

Users hand carpool the same files they `kubectl apply`. The loader dispatches each document on
(apiVersion, kind), expands workloads into pending pods, and converts every validation problem into a
`ManifestError` that names the document (`examples/x.yaml#2 (NodePool default)`) and the YAML field path
(`spec.template.spec.requirements[0].operator`), so a user can fix all problems in one pass. Errors of
all documents are collected and raised together as `ManifestErrors`.

YAML is read as strictly as the API server decodes it: a key repeated in one mapping is refused
(`duplicate field "x"`, as the API server's strict field validation says) instead of the last one
silently winning, and a file holding no document is refused instead of validating "ok".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from carpool.api import crd_schema
from carpool.api import nodeclass as nodeclass_api
from carpool.api import nodepool as nodepool_api
from carpool.api.errors import describe, describe_all
from carpool.api.k8s import DaemonSet, Node, Pod, PodDisruptionBudget
from carpool.api.meta import DEFAULT_NAMESPACE
from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from carpool.api.workloads import WORKLOAD_KINDS, as_pending

__all__ = ["ManifestError", "ManifestErrors", "Manifests", "NamedText", "Source", "load", "load_object",
           "strict_yaml_documents"]



@dataclass(frozen=True, slots=True)
class NamedText:
    """YAML/JSON text with the name its documents are labelled by (`<name>#2 (NodePool a)`), for text that
    has a home other than a file: the deployed config's parameter, the built-in default."""

    name: str
    text: str


Source = str | Path | Mapping[str, Any] | NamedText
_EXTENSIONS = (".yaml", ".yml", ".json")

#: kind -> (apiVersion, model, Manifests attribute). Workload kinds are added below.
_KINDS: dict[str, tuple[str, type[BaseModel], str]] = {
    "NodePool": (nodepool_api.API_VERSION, NodePool, "nodepools"),
    "EC2NodeClass": (nodeclass_api.API_VERSION, EC2NodeClass, "nodeclasses"),
    "Pod": ("v1", Pod, "pods"),
    "Node": ("v1", Node, "nodes"),
    "DaemonSet": ("apps/v1", DaemonSet, "daemonsets"),
    "PodDisruptionBudget": ("policy/v1", PodDisruptionBudget, "pdbs"),
    "StorageClass": ("storage.k8s.io/v1", StorageClass, "storageclasses"),
    "PersistentVolume": ("v1", PersistentVolume, "persistentvolumes"),
    "PersistentVolumeClaim": ("v1", PersistentVolumeClaim, "persistentvolumeclaims"),
}
for (_api, _kind), _model in WORKLOAD_KINDS.items():
    _KINDS[_kind] = (_api, _model, "pods")
_WORKLOADS = tuple(WORKLOAD_KINDS.values())


@dataclass(frozen=True, slots=True)
class ManifestError:
    """One problem: which document, which field (camelCase YAML path, "" for the whole document), why."""

    document: str
    path: str
    message: str

    def __str__(self) -> str:
        return (
            f"{self.document}: {self.path}: {self.message}"
            if self.path
            else f"{self.document}: {self.message}"
        )


class ManifestErrors(Exception):
    """Every problem found in one `load` call."""

    def __init__(self, errors: Iterable[ManifestError]) -> None:
        self.errors: list[ManifestError] = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


@dataclass
class Manifests:
    """What a set of files describes. `pods` includes the pods of expanded workloads."""

    nodepools: list[NodePool] = field(default_factory=list)
    nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    #: what decides a pod's volume zone (see `carpool.scheduling.volumetopology`)
    storageclasses: list[StorageClass] = field(default_factory=list)
    persistentvolumes: list[PersistentVolume] = field(default_factory=list)
    persistentvolumeclaims: list[PersistentVolumeClaim] = field(default_factory=list)
    #: (kind, name or namespace/name) -> the document it came from, for later error messages.
    documents: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)

    def nodepool(self, name: str) -> NodePool | None:
        return next((p for p in self.nodepools if p.name == name), None)

    def nodeclass(self, name: str) -> EC2NodeClass | None:
        return next((c for c in self.nodeclasses if c.name == name), None)

    def check_references(self) -> list[ManifestError]:
        """NodePools whose `nodeClassRef` does not name a loaded EC2NodeClass (or names another kind)."""
        known = {c.name for c in self.nodeclasses}
        errors = []
        for pool in self.nodepools:
            ref = pool.spec.template.spec.node_class_ref
            document = self.documents.get(("NodePool", pool.name), f"NodePool {pool.name}")
            if (ref.group, ref.kind) != ("karpenter.k8s.aws", "EC2NodeClass"):
                errors.append(
                    ManifestError(
                        document,
                        "spec.template.spec.nodeClassRef",
                        f"carpool launches only karpenter.k8s.aws/EC2NodeClass (got {ref.group}/{ref.kind})",
                    )
                )
            elif ref.name not in known:
                loaded = ", ".join(sorted(known)) or "none"
                errors.append(
                    ManifestError(
                        document,
                        "spec.template.spec.nodeClassRef.name",
                        f"EC2NodeClass {ref.name!r} is not among the loaded manifests (loaded: {loaded})",
                    )
                )
        return errors

    def summary(self) -> str:
        """ "2 NodePools, 2 EC2NodeClasses, 12 pods" (pools and classes always, the rest when present)."""
        counts = [
            (len(self.nodepools), "NodePool", True),
            (len(self.nodeclasses), "EC2NodeClass", True),
            (len(self.pods), "pod", False),
            (len(self.daemonsets), "DaemonSet", False),
            (len(self.nodes), "node", False),
            (len(self.pdbs), "PodDisruptionBudget", False),
            (len(self.storageclasses), "StorageClass", False),
            (len(self.persistentvolumes), "PersistentVolume", False),
            (len(self.persistentvolumeclaims), "PersistentVolumeClaim", False),
        ]
        return ", ".join(_plural(n, word) for n, word, always in counts if always or n)


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def load(sources: Source | Iterable[Source], *, expand: bool = True) -> Manifests:
    """Load files, directories (their *.yaml/*.yml/*.json), YAML/JSON text or parsed dicts.

    A string is text when it spans lines, starts with "{" or contains ": "; otherwise it is a path.
    `expand=False` validates workloads without making their pods (a check before a run that makes them
    later: a 10,000-replica Deployment costs most of a second to expand).
    Raises `ManifestErrors` with every problem of every document.
    """
    loader = _Loader(expand)
    items = [sources] if isinstance(sources, str | Path | Mapping | NamedText) else list(sources)
    for index, source in enumerate(items, 1):
        loader.source(source, index)
    loader.flush()
    if loader.errors:
        raise ManifestErrors(loader.errors)
    return loader.out


def load_object(doc: Mapping[str, Any], label: str) -> Manifests:
    """One object already parsed (as the API server lists it), its problems labelled `label`
    (`NodePool default`) instead of an input's number. Raises `ManifestErrors`."""
    loader = _Loader()
    loader.document(dict(doc), label, "")
    loader.flush()
    if loader.errors:
        raise ManifestErrors(loader.errors)
    return loader.out


def _is_text(source: str) -> bool:
    stripped = source.lstrip()
    return "\n" in source or stripped.startswith(("{", "[")) or ": " in source


def _describe(kind: str, doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return kind
    ns = meta.get("namespace")
    return f"{kind} {ns}/{meta['name']}" if isinstance(ns, str) and ns else f"{kind} {meta['name']}"


@cache
def _pod_list() -> TypeAdapter[list[Pod]]:
    """Built on first use: handlers import this module but few of them load pods from files."""
    return TypeAdapter(list[Pod])


@dataclass(frozen=True, slots=True)
class _PendingPod:
    """A Pod document waiting for the batch validation: its data, its label, its path in a List."""

    doc: Mapping[str, Any]
    label: str
    prefix: str


class _Loader:
    def __init__(self, expand: bool = True) -> None:
        self.expand = expand
        self.out = Manifests()
        self.errors: list[ManifestError] = []
        #: consecutive Pod documents, validated together by `flush` (pod lists run to 100,000 items)
        self.pending: list[_PendingPod] = []
        #: objects accepted so far (an empty file is one that adds none and no error)
        self.counted = 0

    def error(self, document: str, path: str, message: str) -> None:
        self.errors.append(ManifestError(document, path, message))

    # -- sources ------------------------------------------------------------------------------------
    def source(self, source: Source, index: int) -> None:
        if isinstance(source, NamedText):
            before = len(self.errors), self.counted
            self.text(source.text, source.name)
            self.flush()
            if (len(self.errors), self.counted) == before:
                self.error(source.name, "", "holds no document (empty, or only comments)")
        elif isinstance(source, Mapping):
            self.document(dict(source), f"<input {index}>#1")
        elif isinstance(source, Path) or not _is_text(source):
            self.path(Path(source), str(source))
        else:
            self.text(source, f"<input {index}>")

    def path(self, path: Path, name: str) -> None:
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in _EXTENSIONS and p.is_file())
            if not files:
                self.error(name, "", "directory holds no .yaml, .yml or .json file")
            for f in files:
                self.path(f, str(f))
            return
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.error(name, "", "file not found")
            return
        except UnicodeDecodeError:
            self.error(name, "", "not a text file (it is not UTF-8: binary?)")
            return
        except OSError as exc:
            self.error(name, "", f"cannot read file: {exc.strerror or exc}")
            return
        before = len(self.errors), self.counted
        if path.suffix == ".json":
            self.json_text(text, name)
        else:
            self.text(text, name)
        self.flush()
        if (len(self.errors), self.counted) == before:
            self.error(name, "", "the file holds no document (empty, or only comments)")

    def json_text(self, text: str, name: str) -> None:
        """A `.json` file is one JSON document (an object or a List): parsed by the C JSON parser, which is
        two orders of magnitude faster than reading it as YAML."""
        import json

        repeated: list[str] = []

        def strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            keys = [key for key, _ in pairs]
            repeated.extend(key for i, key in enumerate(keys) if key in keys[:i])
            return dict(pairs)

        try:
            doc = json.loads(text, object_pairs_hook=strict_object)
        except json.JSONDecodeError as exc:
            self.error(f"{name}#1", "", f"invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")
            return
        if repeated:
            for key in repeated:
                self.error(f"{name}#1", "", f'duplicate field "{key}"')
            return
        self.document(doc, f"{name}#1")

    def text(self, text: str, name: str) -> None:
        import yaml  # on first use: handlers import this module, but parse YAML only when the config changes

        # libyaml's scanner (when PyYAML was built with it) is ~10x faster than the pure-Python one and
        # reports the same line/column marks, so errors still point at the line.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        number = 0
        try:
            for number, (duplicates, doc) in enumerate(strict_yaml_documents(text, loader), 1):
                for path, key, line in duplicates:
                    self.error(f"{name}#{number}", path, f'duplicate field "{key}" (again at line {line})')
                if doc is not None and not duplicates:
                    self.document(doc, f"{name}#{number}")
        except yaml.YAMLError as exc:
            where = ""
            mark = getattr(exc, "problem_mark", None)
            if mark is not None:
                where = f" at line {mark.line + 1}, column {mark.column + 1}"
            problem = getattr(exc, "problem", None) or str(exc)
            self.error(f"{name}#{number + 1}", "", f"invalid YAML: {problem}{where}")

    # -- documents ----------------------------------------------------------------------------------
    def document(self, doc: Any, label: str, prefix: str = "") -> None:
        """Validate one object; `prefix` is its field path inside an enclosing List (`items[3]`).

        Pods are queued for `flush`, which validates a run of them in one call."""
        if not isinstance(doc, Mapping) or doc.get("kind") != "Pod":
            self.flush()
        if not isinstance(doc, Mapping):
            self.error(
                label,
                prefix,
                f"expected a Kubernetes object with apiVersion and kind, got {type(doc).__name__}",
            )
            return
        kind, api_version = doc.get("kind"), doc.get("apiVersion")
        at = f"{prefix}." if prefix else ""
        if not isinstance(kind, str) or not kind:
            self.error(label, at + "kind", "required field is missing")
            return
        if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
            self.list(doc, f"{label} ({kind})" if not prefix else label, at)
            return
        described = f"{label} ({_describe(kind, doc)})" if not prefix else label
        if kind not in _KINDS and (api_version, kind) in crd_schema.karpenter_kinds():
            self.error(described, at + "kind", f"{kind} ({api_version}): not supported by carpool (a Karpenter "
                                               f"{crd_schema.KARPENTER_VERSION} kind carpool does not implement)")
            return
        if kind not in _KINDS:
            self.error(
                described,
                at + "kind",
                f"unsupported kind {kind!r} (apiVersion {api_version!r}); carpool reads "
                + ", ".join(sorted(_KINDS))
                + " and List",
            )
            return
        expected_api, model, attribute = _KINDS[kind]
        if model is Pod and api_version == expected_api:
            self.pending.append(_PendingPod(doc, described, prefix))
            return
        self.flush()  # keeps the order of objects and errors as the documents give it
        if api_version != expected_api:
            hint = " (carpool reads Karpenter v1 objects)" if "karpenter" in expected_api else ""
            self.error(
                described,
                at + "apiVersion",
                f"apiVersion {api_version!r} is not supported for {kind}; expected {expected_api!r}{hint}",
            )
            return
        problems = crd_schema.check(api_version, kind, doc, model)
        if problems:  # Karpenter's verdict first; the model would only say the same less clearly
            for problem in problems:
                self.error(described, at + problem.path if problem.path else prefix, problem.message)
            return
        try:
            obj = model.model_validate(doc)
        except ValidationError as exc:
            for path, message in describe_all(model, exc):
                self.error(described, at + path if path else prefix, message)
            return
        self.add(obj, doc, kind, attribute, described)

    def list(self, doc: Mapping[str, Any], label: str, at: str) -> None:
        items = doc.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            self.error(label, at + "items", "expected a list of objects")
            return
        for i, item in enumerate(items):
            self.document(item, label, f"{at}items[{i}]")

    def flush(self) -> None:
        """Validate the queued Pod documents in one pydantic call (the per-document call costs as much
        again as the validation itself at 100,000 pods); each error still names its document and field."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        try:
            pods = _pod_list().validate_python([p.doc for p in batch])
        except ValidationError as exc:
            failed = self.pod_errors(batch, exc.errors(include_url=False))
            valid = [p for i, p in enumerate(batch) if i not in failed]
            pods = _pod_list().validate_python([p.doc for p in valid])  # the rest still count for duplicates
            batch = valid
        for pending, pod in zip(batch, pods, strict=True):
            self.add_pod(pod, pending)

    def pod_errors(self, batch: Sequence[_PendingPod], errors: Sequence[ErrorDetails]) -> set[int]:
        """Report the errors of a batch per document; the indices of the documents at fault."""
        by_index: dict[int, Any] = defaultdict(list)
        for e in errors:
            index = e["loc"][0]
            assert isinstance(index, int)
            inside = e.copy()
            inside["loc"] = e["loc"][1:]  # the path inside the document
            by_index[index].append(inside)
        for index in sorted(by_index):
            pending = batch[index]
            at = f"{pending.prefix}." if pending.prefix else ""
            for e in by_index[index]:
                path, message = describe(Pod, e)
                self.error(pending.label, at + path if path else pending.prefix, message)
        return set(by_index)

    def add_pod(self, pod: Pod, pending: _PendingPod) -> None:
        """`add` for a validated Pod document, without the generic dispatch."""
        if not pod.spec.node_name and "status" not in pending.doc:
            as_pending(pod)
        meta = pod.metadata
        key = ("Pod", f"{meta.namespace or DEFAULT_NAMESPACE}/{meta.name or ''}")
        documents = self.out.documents
        first = documents.get(key)
        if first is not None:
            self.error(pending.label, "metadata.name", f"duplicate Pod {key[1]!r} (first defined in {first})")
            return
        documents[key] = pending.label
        self.counted += 1
        self.out.pods.append(pod)

    def add(self, obj: BaseModel, doc: Mapping[str, Any], kind: str, attribute: str, label: str) -> None:
        self.counted += 1
        if isinstance(obj, Pod) and "status" not in doc and not obj.spec.node_name:
            as_pending(obj)  # a hand-written pod: just created, and no node fits it yet
        produced: list[tuple[str, BaseModel]] = [(kind, obj)]
        if isinstance(obj, _WORKLOADS):
            produced = [("Pod", pod) for pod in obj.pods()] if self.expand else []
        for produced_kind, item in produced:
            key = (produced_kind, _key(item))
            first = self.out.documents.get(key)
            if first is not None:
                self.error(
                    label, "metadata.name", f"duplicate {produced_kind} {key[1]!r} (first defined in {first})"
                )
                continue
            self.out.documents[key] = label
            getattr(self.out, attribute).append(item)


def strict_yaml_documents(text: str, loader_class: Any = None) -> Iterator[tuple[list[tuple[str, str, int]], Any]]:
    """(duplicate keys, object) of each YAML document: duplicates are found in the node tree, before the
    constructor silently keeps the last value (and flattens merge keys into the mapping). Each duplicate
    is (path of its mapping, the key, the line it is repeated at). Raises `yaml.YAMLError`."""
    if loader_class is None:
        import yaml

        loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            duplicates = _duplicate_keys(node)
            yield duplicates, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def _duplicate_keys(root: Any) -> list[tuple[str, str, int]]:
    """(path of the mapping, repeated key, 1-based line of the repeat) for each key a mapping repeats.

    `<<` merge keys are left to YAML (they merge, they do not repeat); aliases are walked once."""
    import yaml

    found: list[tuple[str, str, int]] = []
    seen_nodes: set[int] = set()
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else repr(key_node.value)
                if key == "<<" and key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                if key in keys:
                    found.append((path, key, key_node.start_mark.line + 1))
                keys.add(key)
                stack.append((value_node, f"{path}.{key}" if path else key))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
    return sorted(found, key=lambda f: f[2])


def _key(obj: BaseModel) -> str:
    if isinstance(obj, Pod | PodDisruptionBudget | DaemonSet | PersistentVolumeClaim):
        return f"{obj.namespace}/{obj.name}"
    return str(getattr(obj, "name", ""))
