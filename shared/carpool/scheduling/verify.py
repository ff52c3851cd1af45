"""An independent checker of a plan: does every placement respect every hard constraint?

Why a second implementation: the scheduler is built for speed (masks, caches, incremental counts); this
module is built for obviousness (plain loops over pods, labels and offerings) so property tests and
benchmarks can catch the scheduler lying. It only uses the requirement algebra and the input types.

Checks: resources (every remaining option of a claim holds its pods and DaemonSet overhead; fixed bins
not overcommitted), node affinity and labels on every option x allowed offering, taints, offerings,
host ports, required pod anti-affinity (on possible domains, so an undecided zone counts as every zone it
could become), required pod affinity, `DoNotSchedule` spread skew (for constraints whose selected pods all
own it), NodePool limits (at the largest option), minValues, opted-out pods left alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from carpool import labels as L
from carpool.requirements import Requirement, Requirements
from carpool.resources import Resources, add, fits, maximum
from carpool.scheduling.inputs import AffinityTerm, ExistingNode, InFlightClaim, PodSpec, PoolSpec
from carpool.scheduling.podgroups import normalized_requests, opts_out
from carpool.scheduling.pools import daemon_overhead, daemons_on
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.scheduling.topology import namespaces_of
from carpool.taints import untolerated


@dataclass
class _Node:
    """A bin as the checker sees it: possible label sets, the pods on it."""

    name: str
    possible: list[dict[str, str]]  # every label set the node may end up with
    pods: list[PodSpec]
    fixed: bool


def verify(
    result: SchedulingResult,
    pods: Sequence[PodSpec],
    pools: Sequence[PoolSpec],
    *,
    in_flight: Sequence[InFlightClaim] = (),
    existing: Sequence[ExistingNode] = (),
    daemonsets: Sequence[PodSpec] = (),
) -> list[str]:
    """Every violation found, as text (empty when the plan is valid). Needs the full option lists
    (schedule with `ScheduleOptions(max_instance_types=None)`)."""
    errors: list[str] = []
    by_key = {p.key: p for p in pods}
    pool_by_name = {p.name: p for p in pools}
    nodes: dict[str, _Node] = {}
    for c in in_flight:
        labels = {**c.labels, L.HOSTNAME: c.labels.get(L.HOSTNAME, c.name), L.NODEPOOL: c.labels.get(L.NODEPOOL, c.pool)}
        nodes[c.name] = _Node(c.name, [labels], list(c.pods), True)
    for n in existing:
        nodes[n.name] = _Node(n.name, [{**n.labels, L.HOSTNAME: n.labels.get(L.HOSTNAME, n.name)}], list(n.pods), True)

    seen: set[str] = set()
    for claim in result.claims:
        for key in claim.pods:
            if key in seen:
                errors.append(f"{key}: placed twice")
            seen.add(key)
        pool = pool_by_name.get(claim.pool)
        if pool is None:
            errors.append(f"{claim.name}: unknown pool {claim.pool}")
            continue
        nodes[claim.name] = _Node(claim.name, _claim_label_sets(claim, pool, errors), [by_key[k] for k in claim.pods], False)
        _check_claim(claim, pool, [by_key[k] for k in claim.pods], daemonsets, errors)
    fixed_taints = {c.name: c.taints for c in in_flight} | {n.name: n.taints for n in existing}
    fixed_room = {c.name: c.remaining for c in in_flight} | {n.name: n.remaining for n in existing}
    placed_fixed: dict[str, list[PodSpec]] = defaultdict(list)
    for key, placement in result.placements.items():
        if placement.kind != "claim":
            if key in seen:
                errors.append(f"{key}: placed twice")
            seen.add(key)
            placed_fixed[placement.target].append(by_key[key])
    for name, placed in placed_fixed.items():
        node = nodes[name]
        total = add(*(normalized_requests(q) for q in placed))
        if not fits(total, fixed_room[name]):
            errors.append(f"{name}: overcommitted {total} > {fixed_room[name]}")
        for q in placed:
            _check_node_fit(q, node.possible, fixed_taints[name], errors, name)
        node.pods.extend(placed)

    for pod in pods:
        if opts_out(pod):
            if pod.key in seen:
                errors.append(f"{pod.key}: opted out but placed")
        elif pod.key not in seen and pod.key not in result.unschedulable:
            errors.append(f"{pod.key}: neither placed nor explained")
        elif pod.key in result.unschedulable and not result.unschedulable[pod.key]:
            errors.append(f"{pod.key}: unschedulable without a reason")

    _check_ports(nodes, errors)
    batch = {p.key for p in pods}
    _check_anti_affinity(nodes, errors)
    _check_affinity(nodes, batch, errors)
    _check_spread(nodes, batch, pools, result, errors)
    _check_limits(result, pools, errors)
    return errors


# -- per claim ----------------------------------------------------------------------------------------
def _type_labels(reqs: Requirements) -> dict[str, str]:
    return {k: v for k, v in reqs.labels().items() if k not in (L.ZONE, L.CAPACITY_TYPE)}


def _claim_label_sets(claim: PlannedClaim, pool: PoolSpec, errors: list[str]) -> list[dict[str, str]]:
    types = {it.name: it for it in pool.instance_types}
    out = []
    base = {**pool.labels, **claim.requirements.labels(), L.NODEPOOL: pool.name, L.HOSTNAME: claim.name}
    zone_req = claim.requirements.get(L.ZONE)
    ct_req = claim.requirements.get(L.CAPACITY_TYPE)
    for choice in claim.instance_types:
        it = types.get(choice.name)
        if it is None:
            errors.append(f"{claim.name}: unknown instance type {choice.name}")
            continue
        offered = False
        for o in it.offerings:
            if not o.available:
                continue
            if (zone_req is None or zone_req.has(o.zone)) and (ct_req is None or ct_req.has(o.capacity_type)):
                offered = True
                labels = {k: v for k, v in base.items() if k not in (L.ZONE, L.CAPACITY_TYPE)}
                labels.update(_type_labels(it.requirements))
                labels[L.ZONE] = o.zone
                labels[L.CAPACITY_TYPE] = o.capacity_type
                out.append(labels)
        if not offered:
            errors.append(f"{claim.name}: option {choice.name} has no available offering it allows")
    return out


def _check_claim(claim: PlannedClaim, pool: PoolSpec, pods: list[PodSpec], daemonsets: Sequence[PodSpec],
                 errors: list[str]) -> None:
    types = {it.name: it for it in pool.instance_types}
    pool_reqs = pool.requirements
    overhead = add(daemon_overhead(daemons_on(pool_reqs, pool.taints, daemonsets)), pool.daemon_overhead)
    total = add(overhead, *(normalized_requests(p) for p in pods))
    for choice in claim.instance_types:
        it = types.get(choice.name)
        if it is not None and not fits(total, it.allocatable):
            errors.append(f"{claim.name}: option {it.name} cannot hold {total}")
    possible = _claim_label_sets(claim, pool, [])
    for labels in possible:
        broken = [k for k, r in pool_reqs.items() if k in labels and not r.has(labels[k])]
        if broken:
            errors.append(f"{claim.name}: node labels {labels} break pool requirement on {broken}")
            break
    for p in pods:
        _check_node_fit(p, possible, pool.taints, errors, claim.name)
    for key, r in pool_reqs.items():
        if r.min_values:
            values = {_type_labels(types[c.name].requirements).get(key) for c in claim.instance_types if c.name in types}
            values.discard(None)
            if len(values) < r.min_values and claim.option_count == len(claim.instance_types):
                errors.append(f"{claim.name}: minValues {key}>={r.min_values} but {len(values)} values")


def _check_node_fit(p: PodSpec, possible: list[dict[str, str]], taints, errors: list[str], where: str) -> None:
    t = untolerated(taints, p.tolerations)
    if t is not None:
        errors.append(f"{p.key} on {where}: taint {t} not tolerated")
    terms = p.requirements or (Requirements(),)
    for labels in possible:
        if not any(term.satisfied_by(labels) is None for term in terms):
            errors.append(f"{p.key} on {where}: node affinity not satisfied by {labels}")
            return


# -- cross-node ---------------------------------------------------------------------------------------
def _check_ports(nodes: Mapping[str, _Node], errors: list[str]) -> None:
    for node in nodes.values():
        ports = [(p.key, hp) for p in node.pods for hp in p.host_ports]
        for i, (k1, a) in enumerate(ports):
            for k2, b in ports[i + 1 :]:
                if k1 != k2 and a.conflicts(b):
                    errors.append(f"{node.name}: host port {a.port} used by {k1} and {k2}")


def _domains(node: _Node, key: str) -> set[str]:
    return {labels[key] for labels in node.possible if key in labels}


def _selects(term: AffinityTerm, owner: PodSpec, other: PodSpec) -> bool:
    ns = namespaces_of(owner.namespace, term)
    return (ns is None or other.namespace in ns) and term.selector.matches(other.labels)


def _check_anti_affinity(nodes: Mapping[str, _Node], errors: list[str]) -> None:
    placed = [(n, p) for n in nodes.values() for p in n.pods]
    for node, p in placed:
        for term in p.anti_affinity:
            mine = _domains(node, term.topology_key)
            for other_node, q in placed:
                if q is p or not _selects(term, p, q):
                    continue
                if mine & _domains(other_node, term.topology_key):
                    errors.append(f"{p.key}: anti-affinity on {term.topology_key} with {q.key}")


def _check_affinity(nodes: Mapping[str, _Node], batch: set[str], errors: list[str]) -> None:
    placed = [(n, p) for n in nodes.values() for p in n.pods]
    for node, p in placed:
        if p.key not in batch:
            continue
        for term in p.affinity:
            mine = _domains(node, term.topology_key)
            if len(mine) != 1:
                errors.append(f"{p.key}: affinity on {term.topology_key} but domain undecided {sorted(mine)}")
                continue
            matching = [(n, q) for n, q in placed if _selects(term, p, q)]
            others = [q for n, q in matching if q is not p and _domains(n, term.topology_key) == mine]
            if not others and len(matching) > 1:
                errors.append(f"{p.key}: affinity on {term.topology_key} has no matching pod in {mine}")


def _check_spread(nodes: Mapping[str, _Node], batch: set[str], pools: Sequence[PoolSpec],
                  result: SchedulingResult, errors: list[str]) -> None:
    placed = [(n, p) for n in nodes.values() for p in n.pods]
    constraints: dict[tuple, list[PodSpec]] = defaultdict(list)
    for _, p in placed:
        if p.key in batch:
            for c in p.spread:
                # under nodeTaintsPolicy Honor the domains depend on each owner's tolerations: not checked
                if c.hard and not p.requirements and not c.honor_node_taints:
                    constraints[(p.namespace, c)].append(p)
    for (ns, c), owners in constraints.items():
        owner_keys = {o.key for o in owners}
        selected = [(n, q) for n, q in placed if q.namespace == ns and c.selector.matches(q.labels)]
        if any(q.key in batch and q.key not in owner_keys for _, q in selected):
            continue  # other pods move the counts; the invariant only holds per placement
        if not all(c.selector.matches(o.labels) for o in owners):
            continue
        counts: dict[str, int] = defaultdict(int)
        landed: set[str] = set()  # domains the batch's owners went to (existing skew is not theirs)
        for n, q in selected:
            doms = _domains(n, c.topology_key)
            if len(doms) != 1:
                errors.append(f"{q.key}: spread on {c.topology_key} but domain undecided {sorted(doms)}")
                continue
            counts[next(iter(doms))] += 1
            if q.key in owner_keys:
                landed |= doms
        if c.topology_key == L.HOSTNAME:
            worst = max((counts[d] for d in landed), default=0)
            if worst > c.max_skew:
                errors.append(f"spread {c.topology_key} {c.selector}: {worst} pods on one node > maxSkew {c.max_skew}")
            continue
        eligible = _eligible(pools, nodes, c.topology_key)
        low = min((counts.get(d, 0) for d in eligible), default=0)
        if c.min_domains is not None and len(eligible) < c.min_domains:
            low = 0
        high = max((counts[d] for d in landed), default=0)
        if high - low > c.max_skew:
            errors.append(f"spread {c.topology_key} {c.selector}: skew {high - low} > {c.max_skew} ({dict(counts)})")


def _eligible(pools: Sequence[PoolSpec], nodes: Mapping[str, _Node], key: str) -> set[str]:
    out: set[str] = set()
    for pool in pools:
        req: Requirement | None = pool.requirements.get(key)
        for it in pool.instance_types:
            for o in it.offerings:
                if not o.available:
                    continue
                value = o.zone if key == L.ZONE else o.capacity_type if key == L.CAPACITY_TYPE else it.requirements.labels().get(key)
                if value is not None and (req is None or req.has(value)):
                    zr, cr = pool.requirements.get(L.ZONE), pool.requirements.get(L.CAPACITY_TYPE)
                    if (zr is None or zr.has(o.zone)) and (cr is None or cr.has(o.capacity_type)):
                        out.add(value)
    for n in nodes.values():
        if n.fixed:
            out |= _domains(n, key)
    return out


def _check_limits(result: SchedulingResult, pools: Sequence[PoolSpec], errors: list[str]) -> None:
    for pool in pools:
        if not pool.limits:
            continue
        types = {it.name: it for it in pool.instance_types}
        charged: Resources = dict(pool.usage)
        for claim in result.claims:
            if claim.pool != pool.name:
                continue
            biggest = maximum(*(types[c.name].limit_capacity for c in claim.instance_types))
            charged = add(charged, biggest, {"nodes": 1})
        for name, limit in pool.limits.items():
            if charged.get(name, 0) > limit:
                errors.append(f"pool {pool.name}: limit {name} {limit} exceeded ({charged.get(name, 0)})")
