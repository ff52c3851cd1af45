"""What one run of the disruption function did, as its handler returns it.

A module of its own because both halves of the run write into it, the clean-up
(`carpool.app.cleanup`) and the disruption executor (`carpool.app.disruption_executor`), and the run
(`carpool.app.disrupt`) that calls both returns it: here each of them can import it without importing the
others.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DisruptSummary:
    timed_out: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    #: claims charged resources their node has and they never held (reserved before every one was)
    charged: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    #: NodePools whose usage had drifted from their claims and was set to what they hold
    reconciled: list[str] = field(default_factory=list)
    #: instances whose node is being drained before they are terminated
    draining: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    launch_templates_deleted: list[str] = field(default_factory=list)
    instance_profiles_deleted: list[str] = field(default_factory=list)
    #: seconds per stage of the executor's run (observe, advance, plan, start)
    stages: dict[str, float] = field(default_factory=dict)
    #: NodePools and EC2NodeClasses whose status this run wrote (`carpool.app.karpenter_status`)
    statuses_written: list[str] = field(default_factory=list)
    #: actions that failed in this run (each its own failure unit: `carpool.app.isolation`)
    failures: list[str] = field(default_factory=list)
    #: why the run did nothing at all (Karpenter's controller is active: `carpool.app.standstill`); "" else
    stood_still: str = ""
