"""The disruption function's run (scheduled, every minute): first the clean-up that keeps carpool's
claims, instances and launch templates in step, then voluntary disruption.

Karpenter splits the same work between its NodeClaim garbage collection and its disruption controller;
here one scheduled Lambda does both, in this order, so the executor plans on claims the clean-up has
already repaired or released. Before both, the NodeClaims Karpenter left are adopted (`carpool.app.adopt`),
so the orphan sweep never takes Karpenter's instances for orphans.
"""

from __future__ import annotations

from carpool.app import adopt, cleanup, disruption_executor, standstill
from carpool.app.disruption_summary import DisruptSummary
from carpool.app.wiring import Dependencies
from carpool.state.models import Claim


def run(deps: Dependencies) -> DisruptSummary:
    summary = DisruptSummary()
    # while Karpenter's controller runs, its garbage collection and carpool's would fight: nothing is done
    summary.stood_still = standstill.karpenter_active(deps, "disruption")
    if summary.stood_still:
        return summary
    now = deps.clock()
    nodes = adopt.run(deps, now, summary)
    claims: list[Claim] = []
    decisions = cleanup.clean_up(deps, now, summary, read=claims.extend, nodes=nodes)
    # The claims clean_up read are still the ledger's when it changed none of them (a provisioner's claim
    # created since is covered by the templates' grace period, as it would be between two reads).
    unchanged = None if cleanup.changed_claims(decisions) else claims
    cleanup.collect_launch_templates(deps, now, summary, unchanged)
    cleanup.collect_instance_profiles(deps, now, summary)
    disruption_executor.run(deps, now, summary)
    return summary
