"""Consolidation: remove or replace underutilized nodes when the rest of the cluster can take their pods.

Every question is answered by the real scheduler (`carpool.scheduling.scheduler.schedule`), so
consolidation honours exactly the constraints provisioning does (requests, node affinity, taints,
topology spread, pod (anti-)affinity, host ports, pool limits): the candidate nodes' pods are scheduled
against every *other* node's free room (`existing`), in-flight claims and, if need be, new claims.
- every pod fits on what exists -> **delete** (saves the nodes' whole price);
- the pods need exactly one new node whose cheapest option costs less than the nodes -> **replace**
  with it (only options cheaper than the nodes are kept, so the launch cannot pick a dearer one);
- otherwise (a pod fits nowhere, or more than one new node) -> leave the nodes alone.
Spot nodes are not replaced by spot nodes (Karpenter's SpotToSpotConsolidation gate, off by default:
spot prices move and a cheaper spot node is often a more interrupted one); they can still be deleted.

Multi-node (Karpenter's multi-node consolidation): the first k candidates in disruption order are tried
together, k found by binary search; a multi-node replacement may not use an instance type of the nodes it
replaces unless cheaper than the cheapest of them (else deleting some of them would do). It is taken when
it saves more than the best single-node decision among the same nodes.

Pending pods a new node could serve block consolidation (Karpenter's `SimulateScheduling` schedules the
pending pods with the candidates' pods, so they add new NodeClaims to every simulation: no deletion is
possible, and `len(NewNodeClaims) != 1` refuses the rest). While a scale-out is still being served, moving a
node's pods now would send them back to pending beside the pods still waiting (`Simulator.awaiting_new_nodes`).
Pods no pool can serve do not block (Karpenter ignores pending pods' scheduling errors), nor do pods nominated
to a claim still coming (not in `ClusterView.pending`).

`Simulator` keeps the cluster consistent while one run takes several decisions: pending pods' room is
reserved first, and each decision's placements are committed, so two decisions never count on the same
free room. Only registered, Ready nodes are room: like Karpenter (which refuses plans that rely on
uninitialized nodes), a plan never counts on an in-flight claim, nor on a replacement decided in the same
run, since pods drained now would be pending until that node joins and the provisioner would launch again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from carpool import labels
from carpool.disruption.candidates import Candidate, ClusterView
from carpool.disruption.decision import Decision, Kind, Reason, Replacement
from carpool.resources import fits, subtract, sum_all
from carpool.scheduling import inputs as si
from carpool.scheduling.claim import NODE
from carpool.scheduling.indexcache import IndexCache
from carpool.scheduling.result import PlannedClaim, SchedulingResult
from carpool.scheduling.scheduler import ScheduleOptions, schedule

MAX_MULTI = 100


@dataclass(frozen=True, slots=True)
class Outcome:
    """What removing a set of nodes would take: a decision, or why not (`decision` is None)."""

    decision: Decision | None
    why_not: str = ""
    result: SchedulingResult | None = None


class Simulator:
    """The scheduler over the view's room, updated as decisions are taken.

    Each simulation hands the scheduler every node that is room, so its cost grows with the cluster; three
    reductions keep it small without changing any answer:
    - the pools' instance indexes (types priced and sorted, requirement masks) are built once per run and
      shared by its simulations (`IndexCache`): the pools are the same in every one;
    - a node's labels are cut to the keys something can ask about (`referenced_keys`: the keys of every
      pod's node affinity, node selector and topology terms, of the pools' requirements and labels, and the
      keys the scheduler itself reads): a label no requirement or topology term names cannot change where
      a pod fits;
    - a node's pods (which the scheduler only counts for topology spread, pod (anti-)affinity and host
      ports) are left out of a simulation whose moving pods have none of those and where no pod in the
      cluster has a required anti-affinity (the one constraint of *other* pods a moving pod must respect).
    """

    def __init__(self, view: ClusterView, pools: Sequence[si.PoolSpec], daemonsets: Sequence[si.PodSpec] = ()) -> None:
        self.pools = list(pools)
        self.daemonsets = list(daemonsets)
        self.existing: dict[str, si.ExistingNode] = {n.name: n for n in view.existing}
        #: nodes that took pods in this run (pending ones or a decision's): not candidates any more
        self.touched: set[str] = set()
        self._seq = 0
        self._keys = referenced_keys(view, self.pools, self.daemonsets)
        self._repelling = any(p.anti_affinity for n in view.existing for p in n.pods)
        self._reduced: dict[tuple[str, bool], si.ExistingNode] = {}
        self._indexes = IndexCache()
        self.simulations = 0
        #: the least request of a candidate's pods -> the nodes whose room it fits (`settled`); emptied
        #: whenever a node's room changes
        self._fitting: dict[tuple[tuple[str, int], ...], list[str]] = {}
        #: every pool's (price, allocatable) per offering it may launch, cheapest first (`settled`)
        self._offers = sorted((offer for pool in self.pools for offer in _offers(pool)), key=lambda o: o[0])
        #: pending pods no existing node has room for and a new node could serve (see the module docstring)
        self.awaiting_new_nodes: tuple[str, ...] = ()
        self._reserve_for_pending(view.pending)

    # -- simulation ---------------------------------------------------------------------------------
    def simulate(self, removed: Sequence[Candidate], exclude: Iterable[str] = ()) -> SchedulingResult:
        """Schedule the pods of `removed` as if those nodes (and `exclude`) were gone."""
        gone = {c.node for c in removed} | set(exclude)
        self._seq += 1
        self.simulations += 1
        seq = self._seq
        moving = [p for c in removed for p in c.pods]
        with_pods = self._repelling or any(map(_looks_at_other_pods, moving))
        return schedule(
            moving, self.pools,
            existing=[self._room(n, with_pods) for name, n in self.existing.items() if name not in gone],
            daemonsets=self.daemonsets,
            options=ScheduleOptions(claim_name=lambda pool, i: f"{pool}-replacement-{seq}-{i}"),
            indexes=self._indexes,
        )

    def settled(self, cands: Sequence[Candidate]) -> str | None:
        """Why consolidating `cands` together finds nothing, when that is known without a simulation (None:
        simulate). A pod fits a node only where each quantity it requests is within the node's room
        (`resources.fits`, the scheduler's own test), so when the least request of their pods fits no
        other node's room, none of the pods can stay on a node that exists: all would need new nodes, and
        a single new node (the most a decision launches) must hold them all, at an allocatable of at least
        their sum. If no offering of any pool with that allocatable is cheaper than the nodes together, the
        simulation could only keep them (the cost of a packed cluster: every candidate simulated against
        every node, every run)."""
        pods = [p for c in cands for p in c.pods]
        price = _price(cands)
        if price is None or not pods:
            return None
        least: dict[str, int] = dict(pods[0].requests)
        for pod in pods[1:]:
            least = {r: min(v, pod.requests.get(r, 0)) for r, v in least.items()}
        gone = {c.node for c in cands}
        if any(name not in gone for name in self._fitting_nodes(least)):
            return None
        total = sum_all(p.requests for p in pods)
        for offer_price, allocatable in self._offers:
            if offer_price >= price:
                break
            if fits(total, allocatable):
                return None
        return (f"no other node has room for any of its pods, and no instance type that holds them all is "
                f"cheaper than ${price:.4f}/h")

    def _fitting_nodes(self, least: Mapping[str, int]) -> list[str]:
        key = tuple(sorted((r, v) for r, v in least.items() if v > 0))
        found = self._fitting.get(key)
        if found is None:
            found = self._fitting[key] = [name for name, n in self.existing.items() if fits(least, n.remaining)]
        return found

    def _room(self, node: si.ExistingNode, with_pods: bool) -> si.ExistingNode:
        """The node as a simulation needs it (labels cut to the referenced keys, pods only when counted);
        built once per node until a decision changes it."""
        got = self._reduced.get((node.name, with_pods))
        if got is None:
            kept = {k: v for k, v in node.labels.items() if k in self._keys}
            got = self._reduced[(node.name, with_pods)] = replace(node, labels=kept, pods=node.pods if with_pods else ())
        return got

    def commit(self, removed: Sequence[Candidate], result: SchedulingResult | None,
               pods: dict[str, si.PodSpec]) -> None:
        """Take a decision into account: its nodes are gone and their pods occupy the existing nodes they
        were placed on (its new claims are not room for later decisions, see the module docstring)."""
        for c in removed:
            self.existing.pop(c.node, None)
            self.touched.add(c.node)
        self._fitting.clear()
        if result is not None:
            self._occupy(result, pods)

    def _reserve_for_pending(self, pending: Sequence[si.PodSpec]) -> None:
        """Room pending pods will take is not room consolidation may count on; nodes that receive them
        are as good as nominated and are not disrupted in this run."""
        if not pending:
            return
        result = schedule(pending, [], existing=list(self.existing.values()), daemonsets=self.daemonsets)
        self._occupy(result, {p.key: p for p in pending})
        unhoused = [p for p in pending if p.key not in result.placements]
        if unhoused:
            served = schedule(unhoused, self.pools, daemonsets=self.daemonsets, indexes=self._indexes)
            self.awaiting_new_nodes = tuple(sorted(served.placements))

    def _occupy(self, result: SchedulingResult, pods: dict[str, si.PodSpec]) -> None:
        for key, placement in result.placements.items():
            pod = pods.get(key)
            if pod is None:
                continue
            if placement.kind == NODE and placement.target in self.existing:
                n = self.existing[placement.target]
                self.existing[n.name] = replace(n, remaining=subtract(n.remaining, pod.requests), pods=(*n.pods, pod))
                self._fitting.clear()
                self.touched.add(n.name)
                self._reduced.pop((n.name, True), None)
                self._reduced.pop((n.name, False), None)
                self._repelling = self._repelling or bool(pod.anti_affinity)


def blocked_by_pending(sim: Simulator) -> str | None:
    """Why no consolidation is taken in this run while pods wait for a new node, or None."""
    waiting = sim.awaiting_new_nodes
    if not waiting:
        return None
    return (f"{len(waiting)} pending pods need a new node (first {waiting[0]}): consolidating now would send "
            f"this node's pods back to pending beside them")


def _offers(pool: si.PoolSpec) -> Iterable[tuple[float, si.Resources]]:
    """(price, allocatable) of each offering the pool may launch: available, in a zone and of a capacity
    type its requirements allow (the scheduler's own test of an offering)."""
    zones, capacity_types = pool.requirements.get(labels.ZONE), pool.requirements.get(labels.CAPACITY_TYPE)
    for t in pool.instance_types:
        for o in t.offerings:
            if (o.available and (zones is None or zones.has(o.zone))
                    and (capacity_types is None or capacity_types.has(o.capacity_type))):
                yield o.price, t.allocatable


#: labels the scheduler reads on every node whatever the pods ask
SCHEDULER_KEYS = frozenset({labels.HOSTNAME, labels.NODEPOOL, labels.ZONE, labels.CAPACITY_TYPE,
                            labels.INSTANCE_TYPE, labels.ARCH, labels.OS})


def _looks_at_other_pods(pod: si.PodSpec) -> bool:
    """Whether where this pod may go depends on the pods already on a node."""
    return bool(pod.spread or pod.affinity or pod.anti_affinity or pod.preferred_affinity
                or pod.preferred_anti_affinity or pod.host_ports)


def referenced_keys(view: ClusterView, pools: Sequence[si.PoolSpec], daemonsets: Sequence[si.PodSpec]) -> frozenset[str]:
    """Every node label key a simulation of this view can look at (with its aliases)."""
    keys: set[str] = set(SCHEDULER_KEYS)
    # pods of one workload share their constraint tuples (and pods without any share the empty ones):
    # each combination is looked at once; `specs` keeps them alive, so their ids stay unique meanwhile
    seen: set[tuple[int, ...]] = set()
    specs = [p for c in view.candidates for p in c.pods] + list(view.pending) + list(daemonsets)
    specs += [p for n in view.existing for p in n.pods]
    for p in specs:
        marker = (id(p.requirements), id(p.preferred_node_affinity), id(p.spread), id(p.affinity),
                  id(p.anti_affinity), id(p.preferred_affinity), id(p.preferred_anti_affinity))
        if marker in seen:
            continue
        seen.add(marker)
        for term in p.requirements:
            keys.update(term)
        for pref in p.preferred_node_affinity:
            keys.update(pref.requirements)
        keys.update(s.topology_key for s in p.spread)
        for terms in (p.affinity, p.anti_affinity):
            keys.update(t.topology_key for t in terms)
        for weighted in (p.preferred_affinity, p.preferred_anti_affinity):
            keys.update(w.term.topology_key for w in weighted)
    for pool in pools:
        keys.update(pool.requirements)
        keys.update(pool.labels)
    for key in list(keys):
        keys.update(labels.ALIASES.get(key, ()))
    for alias_of, aliases in labels.ALIASES.items():
        if keys.intersection(aliases):
            keys.add(alias_of)
    return frozenset(keys)


# -- the rule --------------------------------------------------------------------------------------------
def evaluate(cands: Sequence[Candidate], sim: Simulator, *, spot_to_spot: bool = False,
             avoid_same_type: bool = False) -> Outcome:
    """Delete or replace `cands` together, or why not."""
    settled = sim.settled(cands)
    if settled is not None:
        return Outcome(None, settled)
    result = sim.simulate(cands)
    moving = {p.key for c in cands for p in c.pods}
    stuck = sorted(k for k in result.unschedulable if k in moving)
    if stuck:
        return Outcome(None, f"pod {stuck[0]} would fit nowhere ({_first_reason(result, stuck[0])})")
    price = _price(cands)
    if not result.claims:
        return Outcome(_decision(Kind.DELETE, cands, None, price or 0.0), result=result)
    if len(result.claims) > 1:
        return Outcome(None, f"its pods would need {len(result.claims)} new nodes")
    if price is None:
        return Outcome(None, "its price is unknown, so a replacement cannot be shown to be cheaper")
    if not spot_to_spot and all(c.capacity_type == labels.CAPACITY_SPOT for c in cands):
        return Outcome(None, "spot nodes are not replaced by other spot nodes (spot-to-spot consolidation is off)")
    claim = _cheaper_only(result.claims[0], price, cands if avoid_same_type else ())
    if claim is None:
        return Outcome(None, f"no single instance type that holds its pods is cheaper than ${price:.4f}/h")
    return Outcome(_decision(Kind.REPLACE, cands, claim, price - claim.price), result=result)


def _cheaper_only(claim: PlannedClaim, price: float, same_type_of: Sequence[Candidate]) -> PlannedClaim | None:
    """The claim restricted to options cheaper than `price` (and, for multi-node, than the cheapest node
    of a type it would launch again); None when no option is left."""
    limit = price
    types = {c.instance_type: c.price for c in same_type_of if c.price is not None}
    for t in claim.instance_types:
        if t.name in types:
            limit = min(limit, types[t.name])
    kept = tuple(t for t in claim.instance_types if t.price < limit)
    return replace(claim, instance_types=kept, option_count=len(kept)) if kept else None


def _decision(kind: Kind, cands: Sequence[Candidate], claim: PlannedClaim | None, savings: float) -> Decision:
    nodes = tuple(c.node for c in cands)
    replacement = Replacement(tuple(claim.pods), (claim,)) if claim else None
    what = (f"replace with {replacement.describe()}" if replacement else "delete: their pods fit on other nodes"
            if len(cands) > 1 else "delete: its pods fit on other nodes")
    subject = f"node {nodes[0]} ({cands[0].instance_type})" if len(cands) == 1 else f"nodes {', '.join(nodes)}"
    return Decision(kind, Reason.UNDERUTILIZED, nodes, tuple(c.claim for c in cands),
                    tuple(dict.fromkeys(c.pool for c in cands)), replacement, round(savings, 6),
                    f"{subject} underutilized: {what} (saves ${savings:.4f}/h)")


def _price(cands: Sequence[Candidate]) -> float | None:
    if any(c.price is None for c in cands):
        return None
    return sum(c.price or 0.0 for c in cands)


def _first_reason(result: SchedulingResult, key: str) -> str:
    reasons = result.unschedulable.get(key) or {}
    return next(iter(reasons.values()), "no node fits") if reasons else "no node fits"


def multi(cands: Sequence[Candidate], sim: Simulator, *, spot_to_spot: bool = False,
          max_nodes: int = MAX_MULTI, out_of_time: Callable[[], bool] = lambda: False) -> Outcome:
    """The largest prefix (at least 2) of `cands` that can be consolidated together (binary search, as
    Karpenter: candidates are in disruption order, so a prefix is the cheapest set to disrupt). At most
    `max_nodes` candidates are considered (Karpenter's 100), so a search takes about log2(100) = 7
    simulations whatever the cluster's size; once `out_of_time` says so, the best prefix found so far is
    the answer (Karpenter's multi-node timeout)."""
    cands = list(cands)[:max_nodes]
    if len(cands) < 2:
        return Outcome(None, "fewer than two candidates")
    best = Outcome(None, "no set of two or more nodes can be consolidated together")
    low, high = 2, len(cands)
    while low <= high and not out_of_time():
        mid = (low + high) // 2
        got = evaluate(cands[:mid], sim, spot_to_spot=spot_to_spot, avoid_same_type=True)
        if got.decision is not None:
            best, low = got, mid + 1
        else:
            high = mid - 1
    return best


def relocate(c: Candidate, sim: Simulator, reason: Reason, why: str, exclude: Iterable[str] = ()) -> Outcome:
    """For drift and expiry: the node goes whatever it costs; its pods move to free room where they fit
    and to as many new nodes as they need (launched first). Nodes in `exclude` (themselves about to be
    replaced) are not used as room. Refused only when a pod would fit nowhere, as Karpenter's drift."""
    result = sim.simulate([c], exclude)
    stuck = sorted(k for k in result.unschedulable if k in {p.key for p in c.pods})
    if stuck:
        return Outcome(None, f"{why}, but pod {stuck[0]} would fit nowhere ({_first_reason(result, stuck[0])})")
    if not result.claims:
        decision = Decision(Kind.DELETE, reason, (c.node,), (c.claim,), (c.pool,), savings=c.price or 0.0,
                            message=f"{why}: delete node {c.node} ({len(c.pods)} pods fit on other nodes)")
        return Outcome(decision, result=result)
    repl = Replacement(tuple(k for cl in result.claims for k in cl.pods), tuple(result.claims))
    decision = Decision(Kind.REPLACE, reason, (c.node,), (c.claim,), (c.pool,), repl,
                        round((c.price or 0.0) - repl.price, 6), f"{why}: replace node {c.node} with {repl.describe()}")
    return Outcome(decision, result=result)


def pods_of(cands: Iterable[Candidate]) -> dict[str, si.PodSpec]:
    return {p.key: p for c in cands for p in c.pods}
