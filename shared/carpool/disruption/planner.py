"""One disruption run's decisions, in a fixed order, within budgets, PDBs and protections.

Order (first rules first; a node decided by one rule is not seen by the next):
1. repair (`Unhealthy`): NotReady nodes, forceful, not budgeted, capped at 20% of a pool;
2. emptiness (`Empty`): nodes with no pods for consolidateAfter (both consolidation policies);
3. drift (`Drifted`): replacement first; pods may not move onto other drifted/expired nodes;
4. expiry (`Expired`): same, budgets without `reasons`;
5. multi-node consolidation (`Underutilized`), then 6. single-node consolidation, only for
   `WhenEmptyOrUnderutilized` pools, and not while pending pods wait for a new node
   (`consolidation.blocked_by_pending`, Karpenter's simulation with the pending pods).
Within a rule, candidates go in disruption-cost order (Karpenter's: the pods' eviction cost weighted by
the lifetime the node has left), ties by node name, so the same snapshot always gives the same plan.
Voluntary rules (2-6) only consider Ready, registered nodes that are not already disrupting, not the
replacement of a draining node, not holding nominated pods and not about to receive pending pods.
Budgets are per pool and reason and count nodes already disrupting; PDB allowances are consumed across
the run's decisions.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.disruption import consolidation, drift, emptiness, expiry, repair
from carpool.disruption.budgets import Budgets
from carpool.disruption.candidates import Candidate, ClusterView, node_initialized
from carpool.disruption.consolidation import Outcome, Simulator
from carpool.disruption.decision import Decision, Reason
from carpool.disruption.protection import PdbTracker
from carpool.scheduling import inputs as si

WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"


#: Karpenter's consolidation state (`state.Cluster.Consolidated`): a search that completed and found nothing
#: is not run again while what it saw is unchanged, except once this long has passed (for what the state
#: cannot show changing: spot prices, capacity coming back)
RECHECK_AFTER = timedelta(minutes=5)
#: how long the consolidation search may take in one run: multi-node, then multi- and single-node
#: together (Karpenter's are 1 and 3 minutes per method; carpool runs every minute, within its Lambda)
MULTI_SECONDS = 6.0
CONSOLIDATION_SECONDS = 12.0


@dataclass(frozen=True)
class Consolidated:
    """The last consolidation search that completed and found nothing: the state it saw, and when."""

    state: str
    at: datetime


@dataclass(frozen=True)
class Options:
    repair_after: timedelta = repair.DEFAULT_AFTER
    max_unhealthy: float = repair.MAX_UNHEALTHY
    spot_to_spot: bool = False
    max_multi: int = consolidation.MAX_MULTI
    multi_seconds: float = MULTI_SECONDS
    consolidation_seconds: float = CONSOLIDATION_SECONDS
    clock: Callable[[], float] = time.monotonic
    #: the previous run's search that found nothing (None: search)
    consolidated: Consolidated | None = None


@dataclass
class Inputs:
    """Everything a plan depends on (all of it plain data)."""

    view: ClusterView
    nodepools: Mapping[str, NodePool]
    nodeclasses: Mapping[str, EC2NodeClass]
    pool_specs: Sequence[si.PoolSpec]
    daemonsets: Sequence[si.PodSpec] = ()
    #: node -> the AMI the strict mapping gives its type now (None: none maps); absent: not checked
    expected_amis: Mapping[str, str | None] = field(default_factory=dict)
    #: instance type -> its catalog labels (requirement drift sees labels carpool does not put on nodes)
    type_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: a digest of everything else consolidation depends on (pods, nodes, claims, pools, catalog,
    #: offerings; `carpool.disruption.consolidation_state`); "" when unknown: the search always runs
    state: str = ""


@dataclass
class Plan:
    decisions: list[Decision] = field(default_factory=list)
    #: node -> why a rule applies to it but it is not disrupted now (budget, protection, PDB, no room)
    waiting: dict[str, str] = field(default_factory=dict)
    #: node -> why consolidation keeps it
    kept: dict[str, str] = field(default_factory=dict)
    #: the search that found nothing, for the next run's `Options.consolidated`: this run's when it
    #: completed and found nothing, the previous one when nothing changed since (None: search next run)
    consolidated: Consolidated | None = None


def plan(inputs: Inputs, now: datetime, options: Options | None = None) -> Plan:
    return _Planner(inputs, now, options or Options()).run()


class _Planner:
    def __init__(self, inputs: Inputs, now: datetime, options: Options) -> None:
        self.inp, self.now, self.opt = inputs, now, options
        self.out = Plan()
        cands = inputs.view.candidates
        totals: dict[str, int] = {}
        disrupting: dict[str, int] = {}
        for c in cands:
            # Karpenter counts only initialized nodes towards a budget's total: a replacement still booting
            # must not raise a percentage budget; an initialized node that went NotReady counts as disrupting
            if c.registered and node_initialized(c.labels):
                totals[c.pool] = totals.get(c.pool, 0) + 1
                if c.disrupting or not c.ready:
                    disrupting[c.pool] = disrupting.get(c.pool, 0) + 1
        self.budgets = Budgets(inputs.nodepools, totals, disrupting, now)
        self.pdbs = PdbTracker(inputs.view.pdb_allowed)
        self.sim = Simulator(inputs.view, inputs.pool_specs, inputs.daemonsets)
        self.decided: set[str] = set()
        self.ordered = sorted(cands, key=self._cost)

    def run(self) -> Plan:
        self._repair()
        self._empty()
        replaced = self._replaced_set()
        self._replace(Reason.DRIFTED, replaced)
        self._replace(Reason.EXPIRED, replaced)
        self._consolidate()
        return self.out

    # -- helpers ----------------------------------------------------------------------------------
    def _cost(self, c: Candidate) -> tuple[float, float, str]:
        """Disruption cost, then the less utilized node first (less to move), then the name."""
        pool = self.inp.nodepools.get(c.pool)
        life = expiry.lifetime_remaining(c, pool, self.now) if pool else 1.0
        return (round(c.eviction_cost * life, 9), round(c.utilization(), 9), c.node)

    def _voluntary(self) -> list[Candidate]:
        """Candidates any voluntary rule may consider now."""
        return [c for c in self.ordered
                if c.node not in self.decided and not c.disrupting and c.initialized and not c.reserved
                and c.node not in self.sim.touched]

    def _take(self, d: Decision, cands: Sequence[Candidate], outcome: Outcome | None) -> None:
        self.out.decisions.append(d)
        for c in cands:
            self.decided.add(c.node)
            self.budgets.take(c.pool)
            self.pdbs.consume(c.pdbs)
        self.sim.commit(cands, outcome.result if outcome else None, consolidation.pods_of(cands))

    def _blocked(self, c: Candidate) -> str | None:
        return c.protected or self.pdbs.blocker(c.pdbs)

    def _bounded_by_grace(self, c: Candidate) -> bool:
        """Karpenter's eventual disruption (drift, expiry): with the pool's `terminationGracePeriod` set,
        pods that block eviction (budgets, do-not-disrupt) do not keep the node; the drain deletes them at
        the deadline (`disruption.deadline`). A node annotated do-not-disrupt itself still waits."""
        pool = self.inp.nodepools.get(c.pool)
        return (pool is not None and pool.termination_grace_period_seconds() is not None
                and c.node_protected is None)

    def _wait(self, c: Candidate, why: str, blocked: str) -> None:
        """Record why a node waits; the first (highest-priority) rule's reason is kept."""
        self.out.waiting.setdefault(c.node, f"{why}; waiting: {blocked}")

    # -- rules --------------------------------------------------------------------------------------
    def _repair(self) -> None:
        by_pool: dict[str, list[Candidate]] = {}
        for c in self.ordered:
            by_pool.setdefault(c.pool, []).append(c)
        for pool in sorted(by_pool):
            sick = [(c, why) for c in by_pool[pool] if not c.disrupting
                    and (why := repair.unhealthy(c, self.now, self.opt.repair_after))]
            if not sick:
                continue
            capped = repair.repairable(by_pool[pool], [c for c, _ in sick], self.opt.max_unhealthy)
            for c, why in sick:
                if capped:
                    self._wait(c, why, capped)
                else:
                    self._take(repair.decide(c, why), [c], None)

    def _empty(self) -> None:
        for c in self._voluntary():
            pool = self.inp.nodepools.get(c.pool)
            if pool is None or not c.empty:
                continue
            why = emptiness.why_not_empty(c, pool, self.now)
            if why:
                if c.protected:
                    self._wait(c, "empty", why)
                continue
            if self.budgets.remaining(c.pool, Reason.EMPTY) <= 0:
                self._wait(c, "empty", self.budgets.describe(c.pool, Reason.EMPTY))
                continue
            self._take(emptiness.decide(c), [c], None)

    def _why(self, c: Candidate, reason: Reason) -> str | None:
        pool = self.inp.nodepools.get(c.pool)
        if reason == Reason.DRIFTED:
            return drift.drifted(c, pool, self.inp.nodeclasses.get(c.nodeclass), self.inp.expected_amis,
                                 self.inp.type_labels.get(c.instance_type))
        return expiry.expired(c, pool, self.now) if pool else None

    def _replaced_set(self) -> set[str]:
        """Nodes drift or expiry will replace: not room for the pods of the others."""
        return {c.node for c in self._voluntary()
                if self._why(c, Reason.DRIFTED) or self._why(c, Reason.EXPIRED)}

    def _fresh(self, c: Candidate) -> bool:
        """Still untouched by this run's earlier decisions (a node that just received pods is not)."""
        return c.node not in self.decided and c.node not in self.sim.touched

    def _replace(self, reason: Reason, replaced: set[str]) -> None:
        for c in self._voluntary():
            if not self._fresh(c):
                continue
            why = self._why(c, reason)
            if not why:
                continue
            blocked = None if self._bounded_by_grace(c) else self._blocked(c)
            if blocked:
                self._wait(c, why, blocked)
                continue
            if self.budgets.remaining(c.pool, reason) <= 0:
                self._wait(c, why, self.budgets.describe(c.pool, reason))
                continue
            outcome = consolidation.relocate(c, self.sim, reason, why, exclude=replaced - {c.node})
            if outcome.decision is None:
                self.out.waiting.setdefault(c.node, outcome.why_not)
                continue
            self._take(outcome.decision, [c], outcome)

    def _consolidatable(self) -> list[Candidate]:
        out = []
        for c in self._voluntary():
            pool = self.inp.nodepools.get(c.pool)
            if pool is None or c.empty or pool.spec.disruption.consolidation_policy != WHEN_EMPTY_OR_UNDERUTILIZED:
                continue
            why = emptiness.quiet_enough(c, pool, self.now) or self._blocked(c)
            if why:
                self.out.kept[c.node] = why
                continue
            out.append(c)
        return out

    def _consolidate(self) -> None:
        cands = self._consolidatable()
        pending = consolidation.blocked_by_pending(self.sim)
        if pending:
            # no search either: the next run looks again (not recorded as a search that found nothing)
            self.out.kept.update(dict.fromkeys((c.node for c in cands), pending))
            return
        state = self._state(cands)
        last = self.opt.consolidated
        if state and last is not None and last.state == state and self.now - last.at < RECHECK_AFTER:
            self.out.consolidated = last  # nothing changed since a search found nothing: Karpenter skips too
            return
        started, before, complete = self.opt.clock(), len(self.out.decisions), True
        self._multi(cands, lambda: self.opt.clock() - started >= self.opt.multi_seconds)
        for c in self._consolidatable():
            if not self._fresh(c):
                continue
            if self.opt.clock() - started >= self.opt.consolidation_seconds:
                # Karpenter's single-node timeout: the rest is looked at in a later run
                self.out.kept[c.node] = (f"not evaluated in this run: the consolidation search took its "
                                         f"{self.opt.consolidation_seconds:.0f} s")
                complete = False
                continue
            if self.budgets.remaining(c.pool, Reason.UNDERUTILIZED) <= 0:
                self._wait(c, "underutilized", self.budgets.describe(c.pool, Reason.UNDERUTILIZED))
                continue
            outcome = self._single(c)
            if outcome.decision is None:
                self.out.kept[c.node] = outcome.why_not
                continue
            self._take(outcome.decision, [c], outcome)
        if state and complete and len(self.out.decisions) == before:
            self.out.consolidated = Consolidated(state, self.now)

    def _state(self, cands: Sequence[Candidate]) -> str:
        """What a consolidation search depends on: the caller's digest, the candidates it may consider now
        (consolidateAfter passing changes them) and the budgets their pools have left (schedules open)."""
        if not self.inp.state:
            return ""
        pools = sorted({c.pool for c in cands})
        budgets = [(p, self.budgets.remaining(p, Reason.UNDERUTILIZED)) for p in pools]
        return digest(self.inp.state, [c.node for c in cands], budgets)

    def _single(self, c: Candidate) -> Outcome:
        return consolidation.evaluate([c], self.sim, spot_to_spot=self.opt.spot_to_spot)

    def _multi(self, cands: list[Candidate], out_of_time: Callable[[], bool]) -> None:
        within = _within_budgets(cands, lambda pool: self.budgets.remaining(pool, Reason.UNDERUTILIZED))
        if len(within) < 2:
            return
        outcome = consolidation.multi(within, self.sim, spot_to_spot=self.opt.spot_to_spot,
                                      max_nodes=self.opt.max_multi, out_of_time=out_of_time)
        d = outcome.decision
        if d is None or len(d.nodes) < 2:
            return
        chosen = [c for c in within if c.node in d.nodes]
        if d.savings > self._best_single(chosen, d.savings):
            self._take(d, chosen, outcome)

    def _best_single(self, chosen: list[Candidate], to_beat: float) -> float:
        """The most one of `chosen` saves alone, as far as it matters against `to_beat`: a node saves at
        most its own price (deleted), so only nodes priced at or above `to_beat` are simulated (none when
        the multi-node decision deletes: it saves the sum of the prices)."""
        best = 0.0
        for c in chosen:
            if c.price is not None and c.price < to_beat:
                continue
            single = self._single(c)
            if single.decision is not None:
                best = max(best, single.decision.savings)
        return best


def digest(*parts: object) -> str:
    """A short digest of plain values (their `repr`)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def _within_budgets(cands: Sequence[Candidate], remaining: Callable[[str], int]) -> list[Candidate]:
    """Candidates in order, each pool's list cut at its remaining budget (Karpenter pre-filters the same
    way so multi-node consolidation never proposes more than a budget allows)."""
    left: dict[str, int] = {}
    out = []
    for c in cands:
        if c.pool not in left:
            left[c.pool] = remaining(c.pool)
        if left[c.pool] > 0:
            out.append(c)
            left[c.pool] -= 1
    return out
