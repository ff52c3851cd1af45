"""Existing nodes and in-flight claims as fixed bins (Karpenter's existingnode.go).

Both are tried before any new claim (in-flight claims first, then nodes, as Karpenter), with what they
have left (`remaining`) as their capacity. Their labels are their requirements: an empty value for a
well-known key means "not known yet" (e.g. an in-flight claim's zone before launch) and is dropped rather
than matched as an empty string. The pods already on them are kept with the bin so topology counts and
host ports start from what is really there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from carpool import labels as L
from carpool.resources import Resources
from carpool.scheduling.claim import IN_FLIGHT, NODE, Bin
from carpool.scheduling.inputs import ExistingNode, InFlightClaim, PodSpec
from carpool.scheduling.pools import PoolState
from carpool.scheduling.signature import SignatureRegistry
from carpool.taints import Taint

# a fixed bin with the pods already on it
FixedBin = tuple[Bin, Sequence[PodSpec]]


def fixed_bins(
    in_flight: Sequence[InFlightClaim],
    existing: Sequence[ExistingNode],
    pool_by_name: Mapping[str, PoolState],
    signatures: SignatureRegistry,
) -> list[FixedBin]:
    """In-flight claims, then existing nodes, as bins numbered from 0 in that order."""
    out: list[FixedBin] = []
    for c in in_flight:
        labels = {**c.labels, L.NODEPOOL: c.labels.get(L.NODEPOOL, c.pool)}
        out.append(_fixed(len(out), IN_FLIGHT, c.name, labels, c.taints, c.remaining, pool_by_name.get(c.pool),
                          c.pods, signatures))
    for n in existing:
        out.append(_fixed(len(out), NODE, n.name, n.labels, n.taints, n.remaining, pool_by_name.get(n.pool or ""),
                          n.pods, signatures))
    return out


def _fixed(id: int, kind: str, name: str, labels: Mapping[str, str], taints: Sequence[Taint], remaining: Resources,
           pool: PoolState | None, pods: Sequence[PodSpec], signatures: SignatureRegistry) -> FixedBin:
    labels = {k: v for k, v in labels.items() if v or k not in L.WELL_KNOWN}
    host_labels = {**labels, L.HOSTNAME: labels.get(L.HOSTNAME) or name}
    signature_labels = {k: v for k, v in host_labels.items() if k != L.HOSTNAME}
    signature = signatures.for_node(pool, signature_labels, tuple(taints))
    b = Bin(id, name, kind, signature, pool, {}, capacity=dict(remaining))
    b.hostname = host_labels[L.HOSTNAME]
    b.ports = [hp for p in pods for hp in p.host_ports]
    signature.members |= 1 << b.id
    return b, pods
