"""Karpenter's custom resources (NodePool, EC2NodeClass, NodeClaim) as kube-apiserver serves them from
Karpenter's CRDs: the simulated cluster's `carpool.karpenter_objects.KarpenterObjects`.

Modelled on apiextensions-apiserver at Kubernetes v1.24 (`staging/src/k8s.io/apiextensions-apiserver/pkg/
registry/customresource/strategy.go`, `status_strategy.go`) and the generic registry it runs on
(`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`), with the CEL rules of EKS's
servers (v1.25 on; the v1.24 test server has them behind a feature gate that is off):
- create: `metadata.name` (or `generateName` plus five of `utilrand`'s characters), 409 AlreadyExists;
  uid, creationTimestamp, resourceVersion and `generation: 1` set by the server; `status` dropped (the
  status subresource owns it); unknown fields pruned, the schema's defaults applied, what the schema or its
  rules refuse is 422 Invalid (`carpool.api.crd_schema.admit`, on the CRDs carpool ships);
- update (a JSON merge patch): metadata and spec; `status` kept as it was; `generation` + 1 only when
  something outside `metadata` changed; the transition rules (`oldSelf`) of the CRDs; a stale
  `resourceVersion` precondition is 409 Conflict; finalizers cannot be added to an object being deleted;
  an update that leaves an object being deleted without finalizers deletes it (`deleteWithoutFinalizers`);
- the status subresource: only `status` changes (`statusStrategy.PrepareForUpdate` copies the rest from
  the stored object), judged by the status schema; `generation` unchanged;
- delete: without finalizers the object goes (DELETED); with them `markAsDeleting` sets
  `deletionTimestamp` and `deletionGracePeriodSeconds: 0` and bumps `generation` once (MODIFIED), and a
  second delete changes nothing.

Every object is one of the cluster's `Record`s and every change goes through the cluster's change log
(`record_change`): one resourceVersion sequence for every kind, and the cluster's watch and HTTP API server
serve these kinds as they serve pods; the cluster's garbage collector (`carpool.sim.cluster.garbage`) hears
of each change there.
"""

from __future__ import annotations

import copy
import json
import random
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from carpool.api import crd_schema
from carpool.api.crd_schema import Problem
from carpool.karpenter_objects import (
    KARPENTER_KINDS,
    KindNotServed,
    ObjectConflict,
    ObjectGone,
    ObjectInvalid,
    ObjectKind,
    ObjectList,
    kind_named,
)
from carpool.sim.cluster.api_answers import merge_patch
from carpool.sim.cluster.records import Record

__all__ = ["GENERATE_NAME_ALPHABET", "AlreadyExists", "KarpenterStore", "ObjectInvalidProblems", "field_errors",
           "invalid_message"]

#: `k8s.io/apimachinery/pkg/util/rand.String`'s alphabet (no vowels, no 0, 1, 3: no words, no look-alikes)
GENERATE_NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
#: `generateName` is cut to leave room for the suffix (`names.SimpleNameGenerator`: 63 - 5 characters)
_MAX_GENERATED_BASE: Final = 58
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS_SUBDOMAIN_WORDS: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
#: metadata fields a client may write (the rest are the server's: uid, resourceVersion, generation, ...)
_CLIENT_METADATA: Final = ("name", "generateName", "labels", "annotations", "finalizers", "ownerReferences")
#: the CRDs' transition rules (`x-kubernetes-validations` with `oldSelf`, which `crd_schema` leaves to the
#: update): (kind, path, holds(old, new), message)
_TRANSITION_RULES: Final[tuple[tuple[str, str, Callable[[Any, Any], bool], str], ...]] = (
    ("NodeClaim", "spec", lambda old, new: old == new, "spec is immutable"),
    ("NodePool", "spec", lambda old, new: ("replicas" in old) == ("replicas" in new),
     "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"),
    ("NodePool", "spec.template.spec.nodeClassRef", lambda old, new: old.get("group") == new.get("group"),
     "nodeClassRef.group is immutable"),
    ("NodePool", "spec.template.spec.nodeClassRef", lambda old, new: old.get("kind") == new.get("kind"),
     "nodeClassRef.kind is immutable"),
)


def field_errors(problems: list[Problem]) -> list[dict[str, str]]:
    """`details.causes` of a 422 as the API server writes them (`field.Error` per problem: its type as the
    reason, the body as the message, the path as the field)."""
    reasons = (("Required value", "FieldValueRequired"), ("Unsupported value", "FieldValueNotSupported"),
               ("Too long", "FieldValueTooLong"), ("Too many", "FieldValueTooMany"),
               ("Forbidden", "FieldValueForbidden"), ("Duplicate value", "FieldValueDuplicate"))
    out = []
    for p in problems:
        reason = next((r for prefix, r in reasons if p.message.startswith(prefix)), "FieldValueInvalid")
        out.append({"reason": reason, "message": p.message, "field": p.path})
    return out


def invalid_message(problems: list[Problem]) -> str:
    """What follows `<Kind>.<group> "<name>" is invalid: ` in the API server's message: one error as
    `path: message`, several in brackets (`ErrorList.ToAggregate`)."""
    parts = [f"{p.path}: {p.message}" if p.path else p.message for p in problems]
    return parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"


class AlreadyExists(ObjectConflict):
    """The 409 of a create whose name is taken (reason AlreadyExists, not Conflict)."""

    def __init__(self, kind: ObjectKind, name: str) -> None:
        super().__init__(kind, name, f'{kind.plural}.{kind.group} "{name}" already exists')


class ObjectInvalidProblems(ObjectInvalid):
    """`ObjectInvalid` with the field errors it was made of (the HTTP API server's `details.causes`)."""

    def __init__(self, kind: ObjectKind, name: str, problems: list[Problem]) -> None:
        super().__init__(kind, name, invalid_message(problems))
        self.problems = problems


def _at(obj: Mapping[str, Any], path: str) -> Any:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


class KarpenterStore:
    """The three kinds' objects by name, kept as the cluster's records.

    `record_change(type, kind, record)` is the cluster's change log (it sets the resourceVersion, and the
    cluster's garbage collector hears of each change there)."""

    def __init__(self, clock: Callable[[], datetime], record_change: Callable[[str, str, Record], None],
                 resource_version: Callable[[], str], seed: int = 0) -> None:
        self._clock = clock
        self._record_change = record_change
        self._resource_version = resource_version
        self._random = random.Random(seed)  # generated names and uids repeat from run to run
        self.stores: dict[str, dict[str, Record]] = {k.kind: {} for k in KARPENTER_KINDS}
        #: the kinds whose CRDs are installed (all three unless a scenario says otherwise)
        self.installed: set[ObjectKind] = set(KARPENTER_KINDS)

    # -- reads ------------------------------------------------------------------------------------------
    def served(self, kind: ObjectKind) -> dict[str, Record]:
        """The kind's records; `KindNotServed` when its CRD is not installed (404 on its collection)."""
        if kind not in self.installed:
            raise KindNotServed(kind)
        return self.stores[kind.kind]

    def list_objects(self, kind: ObjectKind) -> ObjectList:
        store = self.served(kind)
        return ObjectList([copy.deepcopy(store[n].raw) for n in sorted(store)], self._resource_version())

    def get_object(self, kind: ObjectKind, name: str) -> dict[str, Any] | None:
        rec = self.served(kind).get(name)
        return copy.deepcopy(rec.raw) if rec is not None else None

    # -- create -----------------------------------------------------------------------------------------
    def create_object(self, kind: ObjectKind, obj: Mapping[str, Any]) -> dict[str, Any]:
        store = self.served(kind)
        raw = json.loads(json.dumps(dict(obj), default=str))
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        name = self._name_for(kind, meta)
        if meta.get("resourceVersion"):
            raise ObjectInvalidProblems(kind, name, [Problem("metadata.resourceVersion", (
                "Invalid value: " + json.dumps(str(meta["resourceVersion"]))
                + ": must be empty (resourceVersion should not be set on objects to be created)"))])
        if name in store:
            raise AlreadyExists(kind, name)
        raw.pop("status", None)
        raw["apiVersion"], raw["kind"] = kind.api_version, kind.kind
        raw["metadata"] = {k: meta[k] for k in _CLIENT_METADATA if meta.get(k) is not None} | {
            "name": name, "uid": str(uuid.UUID(int=self._random.getrandbits(128), version=4)),
            "generation": 1, "creationTimestamp": self._now()}
        admitted = self._admitted(kind, raw, name)
        rec = Record(admitted, 0)
        store[name] = rec
        self._record_change("ADDED", kind.kind, rec)
        return copy.deepcopy(rec.raw)

    def _name_for(self, kind: ObjectKind, meta: Mapping[str, Any]) -> str:
        name, base = meta.get("name") or "", meta.get("generateName") or ""
        if not name and base:
            suffix = "".join(self._random.choice(GENERATE_NAME_ALPHABET) for _ in range(5))
            name = str(base)[:_MAX_GENERATED_BASE] + suffix
        if not name:
            raise ObjectInvalidProblems(kind, "", [Problem("metadata.name", "Required value: name or generateName is required")])
        if len(str(name)) > 253 or not _DNS_SUBDOMAIN.match(str(name)):
            raise ObjectInvalidProblems(kind, str(name), [Problem("metadata.name", f"Invalid value: {json.dumps(name)}: {_DNS_SUBDOMAIN_WORDS}")])
        return str(name)

    def _admitted(self, kind: ObjectKind, raw: dict[str, Any], name: str, *, with_status: bool = False,
                  old: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """`raw` pruned and defaulted by its CRD's schema, or `ObjectInvalid` with every refusal."""
        admitted = crd_schema.admit(kind.api_version, kind.kind, raw, with_status=with_status)
        problems = list(admitted.problems)
        if old is not None:
            problems += self._transition_problems(kind, old, admitted.obj)
        if problems:
            raise ObjectInvalidProblems(kind, name, problems)
        return admitted.obj

    @staticmethod
    def _transition_problems(kind: ObjectKind, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
        out = []
        for rule_kind, path, holds, message in _TRANSITION_RULES:
            before, after = _at(old, path), _at(new, path)
            if rule_kind == kind.kind and isinstance(before, Mapping) and isinstance(after, Mapping) \
                    and not holds(before, after):
                out.append(Problem(path, f'Invalid value: "object": {message}'))
        return out

    # -- updates ----------------------------------------------------------------------------------------
    def _current(self, kind: ObjectKind, name: str, resource_version: str | None) -> Record:
        rec = self.served(kind).get(name)
        if rec is None:
            raise ObjectGone(kind, name)
        if resource_version is not None and str(resource_version) != str(rec.rv):
            raise ObjectConflict(kind, name, (
                f'Operation cannot be fulfilled on {kind.plural}.{kind.group} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again"))
        return rec

    def patch_object(self, kind: ObjectKind, name: str, patch: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        rec = self._current(kind, name, resource_version or (patch.get("metadata") or {}).get("resourceVersion"))
        patched = merge_patch(copy.deepcopy(rec.raw), json.loads(json.dumps(dict(patch), default=str)))
        return self._update(kind, rec, patched)

    def _update(self, kind: ObjectKind, rec: Record, patched: dict[str, Any]) -> dict[str, Any]:
        """An update of the object to `patched` (`customResourceStrategy.PrepareForUpdate`, then the
        schema, then the store)."""
        old, name = rec.raw, rec.raw["metadata"]["name"]
        patched["metadata"] = self._kept_metadata(old["metadata"], patched.get("metadata") or {})
        patched["apiVersion"], patched["kind"] = kind.api_version, kind.kind
        if "status" in old:
            patched["status"] = copy.deepcopy(old["status"])
        else:
            patched.pop("status", None)
        problems = self.finalizer_problems(old["metadata"], patched["metadata"])
        if problems:
            raise ObjectInvalidProblems(kind, name, problems)
        new = self._admitted(kind, patched, name, old=old)
        if {k: v for k, v in new.items() if k != "metadata"} != {k: v for k, v in old.items() if k != "metadata"}:
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        return self._write(kind, rec, new)

    @staticmethod
    def _kept_metadata(old: Mapping[str, Any], patched: Mapping[str, Any]) -> dict[str, Any]:
        """The stored metadata with what a client may change taken from the patched one (the server's own
        fields, such as uid and deletionTimestamp, cannot be written this way)."""
        out = {k: v for k, v in old.items() if k not in _CLIENT_METADATA or k in ("name", "generateName")}
        out.update({k: copy.deepcopy(patched[k]) for k in _CLIENT_METADATA
                    if k not in ("name", "generateName") and patched.get(k) is not None})
        return out

    @staticmethod
    def finalizer_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
        """`ValidateNoNewFinalizers`: an object being deleted may lose finalizers, never gain one."""
        if not old.get("deletionTimestamp"):
            return []
        extra = sorted(set(new.get("finalizers") or []) - set(old.get("finalizers") or []))
        if not extra:
            return []
        found = "[]string{" + ", ".join(json.dumps(f) for f in extra) + "}"
        return [Problem("metadata.finalizers",
                        f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {found}")]

    def patch_status(self, kind: ObjectKind, name: str, status: Mapping[str, Any], *,
                     resource_version: str | None = None) -> dict[str, Any]:
        rec = self._current(kind, name, resource_version)
        new = copy.deepcopy(rec.raw)
        merged = merge_patch(new.get("status"), json.loads(json.dumps(dict(status), default=str)))
        if merged:
            new["status"] = merged
        else:
            new.pop("status", None)
        new = self._admitted(kind, new, name, with_status=True)
        return self._write(kind, rec, new)

    def _write(self, kind: ObjectKind, rec: Record, new: dict[str, Any]) -> dict[str, Any]:
        """Store an update: nothing when it changes nothing (etcd keeps the version, no event), a deletion
        when it leaves an object being deleted without finalizers."""
        new["metadata"]["resourceVersion"] = rec.raw["metadata"].get("resourceVersion")
        if new == rec.raw:
            return copy.deepcopy(rec.raw)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # `deleteWithoutFinalizers`: the update is not stored; the DELETED event carries the object as
            # it was, the answer the object as the client sent it
            self._remove(kind, new["metadata"]["name"])
            return copy.deepcopy(new)
        rec.raw = new
        self._record_change("MODIFIED", kind.kind, rec)
        return copy.deepcopy(rec.raw)

    # -- delete -----------------------------------------------------------------------------------------
    def delete_object(self, kind: ObjectKind, name: str) -> None:
        self.delete(kind, name)

    def delete(self, kind: ObjectKind, name: str) -> tuple[dict[str, Any], bool] | None:
        """DELETE: (the object as it is after, whether it is gone) or None when there was none. With
        finalizers, the first delete marks it (`markAsDeleting`); later ones change nothing."""
        rec = self.served(kind).get(name)
        if rec is None:
            return None
        meta = rec.raw["metadata"]
        if not meta.get("finalizers"):
            self._remove(kind, name)
            return copy.deepcopy(rec.raw), True
        if not meta.get("deletionTimestamp"):
            meta["generation"] = int(meta.get("generation") or 0) + 1
            meta["deletionTimestamp"] = self._now()
            meta["deletionGracePeriodSeconds"] = 0
            self._record_change("MODIFIED", kind.kind, rec)
        return copy.deepcopy(rec.raw), False

    def _remove(self, kind: ObjectKind, name: str) -> None:
        rec = self.stores[kind.kind].pop(name)
        self._record_change("DELETED", kind.kind, rec)

    # -- what the simulation and its scenarios drive ------------------------------------------------------
    def apply_object(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """`kubectl apply` of one object (the kind from `raw["kind"]`): created when absent; else an update
        whose fields other than metadata and status are `raw`'s (the spec replaced whole, as applying a
        manifest that always names its whole spec does) and whose labels and annotations are merged from
        it; status, finalizers and owner references stay."""
        kind = kind_named(str(raw.get("kind")))
        name = str((raw.get("metadata") or {}).get("name") or "")
        rec = self.served(kind).get(name) if name else None
        if rec is None:
            return self.create_object(kind, raw)
        given = json.loads(json.dumps(dict(raw), default=str))
        meta = copy.deepcopy(rec.raw["metadata"])
        for key in ("labels", "annotations"):
            if (given.get("metadata") or {}).get(key):
                meta[key] = {**(meta.get(key) or {}), **given["metadata"][key]}
        new = {k: v for k, v in given.items() if k not in ("metadata", "status")} | {"metadata": meta}
        return self._update(kind, rec, new)

    def _now(self) -> str:
        return self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
