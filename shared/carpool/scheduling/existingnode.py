"""Existing nodes and in-flight claims as fixed bins (Karpenter's existingnode.go).

Both are tried before any new claim, with what they have left (`remaining`) as their capacity, in
Karpenter's order (`sortExistingNodes`): initialized nodes first, so a pod lands on a node that is really
up rather than on one still coming up, then the uninitialized ones (in-flight claims included); by name
within each. A node no NodePool manages counts as initialized, as in Karpenter's `StateNode.Initialized`.

Their labels are their requirements: an empty value for a well-known key means "not known yet" (e.g. an
in-flight claim's zone before launch) and is dropped rather than matched as an empty string. The pods already on them are kept with the bin so topology counts and
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
    """In-flight claims and existing nodes as bins numbered from 0 in scheduling order (initialized first,
    then by name)."""
    both: list[InFlightClaim | ExistingNode] = [*in_flight, *existing]
    ordered = sorted(both, key=lambda x: (not initialized(x), x.name))
    out: list[FixedBin] = []
    for x in ordered:
        if isinstance(x, InFlightClaim):
            labels = {**x.labels, L.NODEPOOL: x.labels.get(L.NODEPOOL, x.pool)}
            out.append(_fixed(len(out), IN_FLIGHT, x.name, labels, x.taints, x.remaining, pool_by_name.get(x.pool),
                              x.pods, signatures))
        else:
            out.append(_fixed(len(out), NODE, x.name, x.labels, x.taints, x.remaining,
                              pool_by_name.get(x.pool or ""), x.pods, signatures))
    return out


def initialized(x: InFlightClaim | ExistingNode) -> bool:
    """Whether a bin is an initialized node: an in-flight claim has no node yet; a NodePool's node is
    initialized once it carries `karpenter.sh/initialized=true`; any other node always is."""
    if isinstance(x, InFlightClaim):
        return False
    if x.pool is None and L.NODEPOOL not in x.labels:
        return True
    return x.labels.get(L.NODE_INITIALIZED) == "true"


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
