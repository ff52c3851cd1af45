"""Which of a pod group's node-affinity terms a bin's signature can satisfy, taints first.

Why per signature: bins sharing a signature accept the same pods, so the answer is computed once per
(relaxation level, signature) and cached on the `ActiveConstraints`. A pod's required terms are an OR;
carpool tries each compatible term (Karpenter tries the first and relaxes it away on failure).

Existing nodes are matched by their labels (a missing label satisfies only a negative operator); claims
by requirement intersection, and only when narrowing the claim by the term leaves an instance type.
A term naming specific hostnames can only match an existing node, never a new claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from carpool import labels as L
from carpool.requirements import NEGATIVE, Requirements
from carpool.scheduling.pending import ActiveConstraints
from carpool.scheduling.signature import Signature, SignatureRegistry
from carpool.taints import Taint, Toleration


def compatible_terms(active: ActiveConstraints, signature: Signature, signatures: SignatureRegistry) -> tuple[int, ...]:
    """Indices of the variant's node-affinity terms compatible with a signature (cached)."""
    got = active.terms_by_signature.get(signature.id)
    if got is not None:
        return got
    variant = active.variant
    out: list[int] = []
    if blocking_taint(signature.taints, variant.tolerations) is None:
        for i, term in enumerate(variant.terms):
            if signature.labels is not None:
                if satisfied_except_hostname(term, signature.labels):
                    out.append(i)
            elif (claimable(term) and signature.requirements.compatible(term, L.WELL_KNOWN) is None
                  and signatures.narrowed_by_term(signature, variant, i) is not None):
                out.append(i)
    got = active.terms_by_signature[signature.id] = tuple(out)
    return got


def blocking_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first taint none of the tolerations tolerates."""
    for t in taints:
        if not any(tol.tolerates(t) for tol in tolerations):
            return t
    return None


def satisfied_except_hostname(term: Requirements, labels: Mapping[str, str]) -> bool:
    """A term against a node's labels; the hostname is checked per bin, not per signature."""
    for key, r in term.items():
        if key == L.HOSTNAME:
            continue
        value = labels.get(key)
        if value is None:
            if r.operator in NEGATIVE and r.gt is None and r.lt is None:
                continue
            return False
        if not r.has(value):
            return False
    return True


def claimable(term: Requirements) -> bool:
    """A term naming specific hostnames can only match an existing node, never a new claim."""
    r = term.get(L.HOSTNAME)
    return r is None or r.operator in NEGATIVE
