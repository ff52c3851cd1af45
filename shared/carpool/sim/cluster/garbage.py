"""kube-controller-manager's garbage collector for the objects the simulated cluster keeps with owners:
Karpenter's NodeClaims (owned by their NodePool) and Nodes (owned by their NodeClaim).

Modelled on `pkg/controller/garbagecollector/garbagecollector.go` (`attemptToDeleteItem`) with background
propagation, the default of a DELETE: once an owner is gone, each dependent whose `ownerReferences` name it
(by uid: an object of the same name made anew is another owner) is looked at; when none of its owners
exists any more it is deleted (a DELETE like any other: one with finalizers only gets its
`deletionTimestamp`, and goes when they are removed), and when some still exist the references to those
gone are patched away. A dependent created or patched to name owners none of which exists is deleted the
same way (the real collector finds such a "virtual" owner absent when it looks it up).

When: at once, in the same step as the change that made the owner go. The real collector acts from its
informers within about a second; the simulation's watchers see changes no finer than a watch delivery,
so a delay would add nothing a reader could tell, while doing it at once keeps every run reproducible
without a process of its own on the simulated clock.

Owners of kinds the cluster does not keep (a ReplicaSet of a pod) are never judged: the collector here
knows only the kinds below, as the real one acts only on kinds its RESTMapper resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["GarbageCollector", "Owned"]


@dataclass(frozen=True, slots=True)
class Owned:
    """How the collector reaches one kind of dependent: its objects by name, its DELETE, and the write
    that sets its `ownerReferences`."""

    objects: Callable[[], Mapping[str, Any]]
    delete: Callable[[str], None]
    set_owners: Callable[[str, list[dict[str, Any]]], None]


class GarbageCollector:
    """Deletes the dependents of owners that are gone. `kinds` are the dependent kinds by name (their
    records' `raw` are read); `owner_exists(kind, name, uid)` says whether an owner is there, None for a
    kind the collector does not know."""

    def __init__(self, kinds: Mapping[str, Owned], owner_exists: Callable[[str, str, str], bool | None]) -> None:
        self._kinds = kinds
        self._owner_exists = owner_exists
        #: (kind, name) of every dependent the collector deleted, in order (for the tests and the timeline)
        self.deleted: list[tuple[str, str]] = []

    def owner_gone(self, uid: str) -> None:
        """An object with `uid` is gone for good: look at every dependent that names it."""
        if not uid:
            return
        for kind, owned in self._kinds.items():
            named = [name for name, rec in owned.objects().items()
                     if any(ref.get("uid") == uid for ref in _owners(rec.raw))]
            for name in named:
                self.attempt_to_delete(kind, name)

    def attempt_to_delete(self, kind: str, name: str) -> None:
        """`attemptToDeleteItem` for one dependent: nothing for one already being deleted; delete it when
        none of its owners exists, drop the references to the gone ones when some do, nothing when all do
        (or none is of a known kind)."""
        rec = self._kinds[kind].objects().get(name)
        if rec is None or (rec.raw.get("metadata") or {}).get("deletionTimestamp"):
            return  # gone, or already being deleted ("returned at once, because its DeletionTimestamp is non-nil")
        refs = _owners(rec.raw)
        verdicts = [self._owner_exists(str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid"))) for ref in refs]
        dangling = [ref for ref, found in zip(refs, verdicts, strict=True) if found is False]
        if not dangling:
            return
        if len(dangling) == len(refs):
            self.deleted.append((kind, name))
            self._kinds[kind].delete(name)
            return
        self._kinds[kind].set_owners(name, [ref for ref in refs if ref not in dangling])


def _owners(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((raw.get("metadata") or {}).get("ownerReferences") or [])
