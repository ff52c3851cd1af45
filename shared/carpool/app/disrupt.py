"""The disruption function's run (scheduled, every minute): first the clean-up that keeps carpool's
claims, instances and launch templates in step, then the NodePools' and EC2NodeClasses' status, then
voluntary disruption.

Karpenter splits the same work between its NodeClaim garbage collection and its disruption controller;
here one scheduled Lambda does both, in this order, so the executor plans on claims the clean-up has
already repaired or released.
"""

from __future__ import annotations

from carpool.api.k8s import Node
from carpool.app import adopt, cleanup, config_guard, disruption_executor, karpenter_status, nodeclaims, standstill
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.isolation import isolated
from carpool.app.wiring import Dependencies
from carpool.state.models import Claim


def run(deps: Dependencies) -> DisruptSummary:
    summary = DisruptSummary()
    # while Karpenter's controller runs, its garbage collection and carpool's would fight: nothing is done
    summary.stood_still = standstill.karpenter_active(deps, "disruption")
    # without the config every node would look drifted or orphaned: nothing is done either
    summary.stood_still = summary.stood_still or config_guard.unusable_config(deps, "disruption")
    if summary.stood_still:
        return summary
    now = deps.clock()
    # Karpenter's NodeClaims become carpool's claims before the orphan sweep could take their instances
    listed = adopt.run(deps, now, summary)
    claims: list[Claim] = []
    seen: list[tuple[list[Node], set[str]]] = []
    decisions = cleanup.clean_up(deps, now, summary, read=claims.extend, seen=lambda *read: seen.append(read),
                                 nodes=listed)
    # The claims clean_up read are still the ledger's when it changed none of them (a provisioner's claim
    # created since is covered by the templates' grace period, as it would be between two reads).
    unchanged = None if cleanup.changed_claims(decisions) else claims
    cleanup.collect_launch_templates(deps, now, summary, unchanged)
    cleanup.collect_instance_profiles(deps, now, summary)
    # the claims' public faces, from what the clean-up read (its releases left out)
    nodes, running = seen[0] if seen else ([], set())
    nodeclaims.reconcile(deps, now, claims, nodes, running, cleanup.released_claims(decisions), summary)
    # what the clean-up found is what the objects' status says (each object is its own failure unit inside)
    isolated(summary, karpenter_status.ACTION, "NodePools and EC2NodeClasses",
             lambda: karpenter_status.write(deps, now, summary, claims, decisions))
    disruption_executor.run(deps, now, summary)
    return summary
