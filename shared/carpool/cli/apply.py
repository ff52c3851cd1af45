"""`carpool apply -f FILE...`: NodePools and EC2NodeClasses into the cluster, as `kubectl apply` puts them.

The cluster is where carpool's config lives (Karpenter's own CRDs, v1.14.1); `kubectl apply -f` is the way
to change it, and this command is the same apply with carpool's verdict first: the files are judged as
`carpool validate` judges them (`carpool.api.config.load_config`; only NodePool and EC2NodeClass documents;
a `nodeClassRef` is checked against the files' EC2NodeClasses when they hold some, as validate checks it),
and a bad file is one line a problem and exit 2 before anything is sent. A NodePool whose class is in
neither the files nor the cluster is applied, as Karpenter accepts it, with a warning that it launches
nothing until the class exists. Then each object is created, or
patched with kubectl's three-way merge patch (`carpool.api.kubectl_apply`, which also writes kubectl's
last-applied annotation, so the two tools can follow each other), EC2NodeClasses first so the NodePools'
references resolve at once, and one line an object is printed as kubectl prints it
(`nodepool.karpenter.sh/NAME created|configured|unchanged`). `--dry-run` reads the cluster and prints the
same lines, with `(dry run)` and the patch that would be sent, and writes nothing.

The cluster is reached as kubectl reaches it (`carpool.adapters.k8s.kubeconfig`: `--kubeconfig`,
`$KUBECONFIG`, `~/.kube/config`; `--context`). A patch carries the live object's resourceVersion, so a write
racing another is refused (409) and read again, at most `CONFLICT_RETRIES` times, as kubectl retries its
patch on a conflict. An object the API server refuses (422, its CRD's schema) is one `error:` line naming the
object and field; the others are still applied, and the exit code is 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from carpool.api import kubectl_apply
from carpool.api.config import CONFIG_KINDS, load_config
from carpool.api.loader import ManifestError, ManifestErrors, strict_yaml_documents
from carpool.karpenter_objects import (
    EC2NODECLASS,
    NODEPOOL,
    KarpenterObjects,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectInvalid,
    ObjectKind,
)

if TYPE_CHECKING:
    from carpool.api.loader import Manifests

EXIT_INVALID = 2
EXIT_REFUSED = 1
#: how many times a patch refused for a stale resourceVersion is read and sent again (kubectl: 5)
CONFLICT_RETRIES = 5
#: applied in this order: a NodePool's class is there before the pool
APPLY_ORDER = (EC2NODECLASS, NODEPOOL)
_EXTENSIONS = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Applied:
    """What one object's apply did (or, in a dry run, would do): kubectl's word and the patch sent."""

    kind: ObjectKind
    name: str
    outcome: str  # created | configured | unchanged
    patch: dict[str, Any]

    def line(self, dry_run: bool) -> str:
        return f"{resource_name(self.kind, self.name)} {self.outcome}{' (dry run)' if dry_run else ''}"


def resource_name(kind: ObjectKind, name: str) -> str:
    """`nodepool.karpenter.sh/general`, as kubectl names an object it applied."""
    return f"{kind.kind.lower()}.{kind.group}/{name}"


def apply_object(objects: KarpenterObjects, kind: ObjectKind, config: dict[str, Any], *,
                 dry_run: bool = False) -> Applied:
    """Create `config`, or patch the live object towards it (module docstring). Raises the port's errors."""
    name = str(config["metadata"]["name"])
    modified = kubectl_apply.applied_form(config)
    for attempt in range(CONFLICT_RETRIES + 1):
        live = objects.get_object(kind, name)
        if live is None:
            if not dry_run:
                objects.create_object(kind, modified)
            return Applied(kind, name, "created", modified)
        patch = kubectl_apply.three_way_patch(kubectl_apply.last_applied(live), modified, live)
        if not patch:
            return Applied(kind, name, "unchanged", patch)
        if dry_run:
            return Applied(kind, name, "configured", patch)
        try:
            objects.patch_object(kind, name, patch, resource_version=live["metadata"].get("resourceVersion"))
        except (ObjectConflict, ObjectGone):
            if attempt == CONFLICT_RETRIES:
                raise
            continue  # changed (or deleted) since it was read: read it again
        return Applied(kind, name, "configured", patch)
    raise AssertionError("unreachable: the last attempt returns or raises")


def apply(
    files: Annotated[list[Path], typer.Option(
        "-f", "--filename", help="NodePool/EC2NodeClass YAML or JSON, or a directory of them (repeatable).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would change; write nothing.")] = False,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context (default: its current one)")] = None,
) -> None:
    """Validate NodePools and EC2NodeClasses as carpool reads them, then apply them to the cluster as
    `kubectl apply` does."""
    from carpool.cli import files as cli_files

    manifests = _judged(files)
    documents = sorted(_config_documents(files), key=lambda d: APPLY_ORDER.index(_kind_of(d)))
    if not documents:
        raise cli_files.fail(f"{', '.join(map(str, files))}: no NodePool or EC2NodeClass to apply")
    objects = _connect(kubeconfig, context)
    refused = 0
    for document in documents:
        kind = _kind_of(document)
        try:
            applied = apply_object(objects, kind, document, dry_run=dry_run)
        except KindNotServed as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_REFUSED) from None
        except (ObjectInvalid, ObjectConflict, ObjectGone) as exc:
            typer.echo(f"error: {resource_name(kind, document['metadata']['name'])}: {exc}", err=True)
            refused += 1
            continue
        except Exception as exc:  # noqa: BLE001 - unreachable, forbidden (RBAC), 5xx: one line, not a traceback
            typer.echo(f"error: {resource_name(kind, document['metadata']['name'])}: {type(exc).__name__}: {exc}",
                       err=True)
            refused += 1
            continue
        typer.echo(applied.line(dry_run))
        if dry_run and applied.outcome == "configured":
            typer.echo(f"  patch: {json.dumps(_shown(applied.patch), sort_keys=True)}")
    _note_missing_classes(manifests, documents, objects)
    if refused:
        raise typer.Exit(EXIT_REFUSED)


def _judged(files: list[Path]) -> Manifests:
    """`carpool validate`'s verdict on the files, and only the config's kinds; exit 2 with every problem."""
    try:
        manifests = load_config(files, complete=False)
    except ManifestErrors as exc:
        _fail_with(exc.errors)
    others = dict.fromkeys(label for (kind, _), label in manifests.documents.items() if kind not in CONFIG_KINDS)
    if others:
        _fail_with([ManifestError(label, "kind", "carpool apply applies only NodePool and EC2NodeClass documents; "
                                                 "apply other objects with kubectl") for label in others])
    return manifests


def _fail_with(errors: list[ManifestError]) -> None:
    for error in errors:
        typer.echo(str(error), err=True)
    typer.echo(f"{len(errors)} error{'s' if len(errors) != 1 else ''}", err=True)
    raise typer.Exit(EXIT_INVALID)


def _config_documents(files: list[Path]) -> Iterator[dict[str, Any]]:
    """The NodePool and EC2NodeClass objects of the (already judged) files, as written, Lists expanded."""
    for path in files:
        paths = sorted(p for p in path.iterdir() if p.suffix in _EXTENSIONS and p.is_file()) if path.is_dir() else [path]
        for file in paths:
            text = file.read_text(encoding="utf-8")
            docs = [json.loads(text)] if file.suffix == ".json" else [doc for _, doc in strict_yaml_documents(text)]
            for doc in docs:
                yield from _objects_of(doc)


def _objects_of(doc: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(doc, dict):
        return
    if isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List"):
        for item in doc["items"]:
            yield from _objects_of(item)
    elif doc.get("kind") in CONFIG_KINDS:
        yield doc


def _kind_of(document: dict[str, Any]) -> ObjectKind:
    return NODEPOOL if document["kind"] == "NodePool" else EC2NODECLASS


def _shown(patch: dict[str, Any]) -> dict[str, Any]:
    """The patch without the annotation's copy of the whole config (it changes whenever anything does)."""
    annotations = (patch.get("metadata") or {}).get("annotations") or {}
    if kubectl_apply.LAST_APPLIED not in annotations:
        return patch
    rest = {k: v for k, v in annotations.items() if k != kubectl_apply.LAST_APPLIED}
    metadata = {k: v for k, v in patch["metadata"].items() if k != "annotations"} | ({"annotations": rest} if rest else {})
    return {k: v for k, v in patch.items() if k != "metadata"} | ({"metadata": metadata} if metadata else {})


def _note_missing_classes(manifests: Manifests, documents: list[dict[str, Any]], objects: KarpenterObjects) -> None:
    """A NodePool whose EC2NodeClass is neither applied here nor in the cluster is accepted, as Karpenter
    accepts it, but launches nothing until the class exists (its NodeClassReady condition says so)."""
    applied = {d["metadata"]["name"] for d in documents if d["kind"] == "EC2NodeClass"}
    for pool in manifests.nodepools:
        ref = pool.spec.template.spec.node_class_ref.name
        if ref not in applied and objects.get_object(EC2NODECLASS, ref) is None:
            typer.echo(f"warning: NodePool {pool.name}: EC2NodeClass {ref!r} is not in the cluster; the pool launches "
                       "nothing until it is applied", err=True)


def _connect(kubeconfig: Path | None, context: str | None) -> KarpenterObjects:
    from carpool.adapters.k8s.kubeconfig import KubeconfigError, karpenter_objects
    from carpool.cli import files as cli_files

    try:
        return karpenter_objects(kubeconfig, context)
    except KubeconfigError as exc:
        raise cli_files.fail(str(exc)) from None


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("apply")(apply)
