"""Where a pod's persistent volumes let it run, and whether its claims let it be scheduled at all.

Modelled on Karpenter's `VolumeTopology` (pkg/controllers/provisioning/scheduling/volumetopology.go):
- a claim bound to a volume (`spec.volumeName`) confines the pod to the volume's `nodeAffinity` (each
  required term one alternative; a local or hostPath volume's hostname term is dropped, since a new node
  never has the old hostname);
- an unbound claim of a `WaitForFirstConsumer` class confines it to the class's `allowedTopologies` (each
  term one alternative, its expressions `In`);
- several volumes combine as the cross product of their alternatives, keeping only compatible branches
  (all of them when none is compatible, which then schedules nowhere);
- a pod whose claim is missing, being deleted, lost, bound to a missing volume, not yet marked bound, or
  unbound without a class or with an `Immediate` class is not scheduled (`ValidatePersistentVolumeClaims`):
  new capacity cannot help it until its storage is sorted out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from carpool.api.k8s import Pod
from carpool.api.storage import (
    BIND_COMPLETED_ANNOTATION,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from carpool.labels import HOSTNAME
from carpool.requirements import Requirement, Requirements

__all__ = ["VolumeTopology", "combine", "conflict"]

Alternatives = tuple[Requirements, ...]


class VolumeTopology:
    """The cluster's storage objects, indexed for per-pod look-ups."""

    def __init__(self, classes: Iterable[StorageClass], volumes: Iterable[PersistentVolume],
                 claims: Iterable[PersistentVolumeClaim]) -> None:
        self.classes = {c.name: c for c in classes}
        self.volumes = {v.name: v for v in volumes}
        self.claims = {(c.namespace, c.name): c for c in claims}
        defaults = [c for c in self.classes.values() if c.is_default()]
        self.default_class = defaults[-1].name if defaults else ""

    def _claims(self, pod: Pod) -> Iterable[tuple[str, PersistentVolumeClaim | None]]:
        for volume in pod.spec.volumes:
            name = volume.claim_name(pod.name)
            if name is not None:
                yield name, self.claims.get((pod.namespace, name))

    def class_of(self, claim: PersistentVolumeClaim) -> str:
        """The claim's class; an unset one gets the default class, as DefaultStorageClass admission does."""
        given = claim.spec.storage_class_name
        return self.default_class if given is None else given

    # -- validation -----------------------------------------------------------------------------------
    def problem(self, pod: Pod) -> str | None:
        """Why the pod cannot be scheduled because of its claims, or None."""
        for name, claim in self._claims(pod):
            if claim is None:
                return f"persistentvolumeclaim {pod.namespace}/{name} not found"
            reason = self._claim_problem(claim)
            if reason is not None:
                return f"persistentvolumeclaim {claim.namespace}/{claim.name}: {reason}"
        return None

    def _claim_problem(self, claim: PersistentVolumeClaim) -> str | None:
        if claim.metadata.deletion_timestamp is not None:
            return "is being deleted"
        if claim.status.phase == "Lost":
            return "bound to a non-existent persistentvolume"
        volume_name = claim.spec.volume_name
        if volume_name:
            volume = self.volumes.get(volume_name)
            if volume is None:
                return f"persistentvolume {volume_name} not found"
            if volume.metadata.deletion_timestamp is not None:
                return f"persistentvolume {volume_name} is being deleted"
            if BIND_COMPLETED_ANNOTATION not in claim.metadata.annotations:
                return f"considered unbound: it lacks the {BIND_COMPLETED_ANNOTATION} annotation"
            return None
        class_name = self.class_of(claim)
        if not class_name:
            return "an unbound claim must name a storage class"
        storage_class = self.classes.get(class_name)
        if storage_class is None:
            return f"storageclass {class_name} not found"
        if storage_class.volume_binding_mode == "Immediate":
            return f"storageclass {class_name} binds immediately, so the claim must be bound first"
        return None

    # -- requirements ---------------------------------------------------------------------------------
    def requirements(self, pod: Pod) -> Alternatives:
        """The pod's volume topology as ORed alternatives; () when its volumes do not constrain it.

        Call for pods `problem` accepts (a missing object simply contributes nothing here)."""
        alternatives: Alternatives = ()
        for _, claim in self._claims(pod):
            if claim is None:
                continue
            alternatives = combine(alternatives, self._claim_alternatives(claim))
        return alternatives

    def _claim_alternatives(self, claim: PersistentVolumeClaim) -> Alternatives:
        if claim.spec.volume_name:
            volume = self.volumes.get(claim.spec.volume_name)
            return _volume_alternatives(volume) if volume is not None else ()
        storage_class = self.classes.get(self.class_of(claim))
        if storage_class is None:
            return ()
        return tuple(
            Requirements(Requirement.of(e.key, "In", e.values) for e in term.match_label_expressions)
            for term in storage_class.allowed_topologies
            if term.match_label_expressions
        )


def conflict(terms: Sequence[Requirements], volume_terms: Sequence[Requirements]) -> str | None:
    """Why no node can satisfy both the pod's node affinity and its volumes (`terms` being the two
    combined, as `convert.pod_spec` builds them), or None. Every combined term then requires a label to
    take a value from an empty set, which Karpenter reports as incompatible volume requirements."""
    if not volume_terms or not terms:
        return None
    empty = [next((k for k in t if t[k].is_empty()), None) for t in terms]
    if any(key is None for key in empty):
        return None
    keys = ", ".join(sorted({k for k in empty if k is not None}))
    return f"incompatible volume requirements: the pod's volumes and its node affinity admit no common {keys}"


def _volume_alternatives(volume: PersistentVolume) -> Alternatives:
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return ()
    out = []
    for term in affinity.required.node_selector_terms:
        expressions = term.match_expressions
        if volume.is_node_local():
            kept = [e for e in expressions if e.key != HOSTNAME]
            if expressions and not kept:  # hostname-only: no constraint at all on a new node
                out.append(Requirements())
                continue
            expressions = kept
        if expressions:
            out.append(Requirements(e.to_domain() for e in expressions))
    return tuple(out)


def combine(alternatives: Sequence[Requirements], more: Sequence[Requirements]) -> Alternatives:
    """The cross product of two alternative lists, compatible branches only (all when none is)."""
    if not more:
        return tuple(alternatives)
    if not alternatives:
        return tuple(more)
    pairs = [(a, b) for a in alternatives for b in more]
    compatible = [(a, b) for a, b in pairs if a.intersects(b) is None]
    return tuple(a.merge(b) for a, b in (compatible or pairs))
