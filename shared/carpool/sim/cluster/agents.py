"""Simulated DaemonSet agents: the only thing in the simulation that removes a node's startup taints.

A NodePool's `startupTaints` are there until some agent on the node says it is ready: Cilium's agent
removes `node.cilium.io/agent-not-ready`, the EBS CSI node driver `ebs.csi.aws.com/agent-not-ready`.
Neither the kubelet nor the autoscaler does it. A scenario declares its agents; each one, on every node
it selects, removes its own taint key `delaySeconds` after the node registered (agents tolerate every
taint, so their pod starts at once) or became Ready. An agent the scenario does not declare does not
exist, so a startup taint nobody removes stays, as it would on a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from carpool.sim.clock import reached
from carpool.sim.cluster.simulated import SimulatedCluster
from carpool.sim.cluster.specs import Agent


@dataclass(frozen=True)
class NodeFacts:
    """What a DaemonSet's node selection looks at."""

    name: str
    node_pool: str
    instance_type: str
    zone: str
    capacity_type: str


@dataclass
class Agents:
    cluster: SimulatedCluster
    agents: Sequence[Agent]
    elapsed: Callable[[], float]
    #: (due at, node name, agent) for taint removals not done yet
    _due: list[tuple[float, str, Agent]] = field(default_factory=list)
    #: (at, node name, agent name, taint key) of every removal, for the decision log and tests
    removed: list[tuple[float, str, str, str]] = field(default_factory=list)

    def node_registered(self, node: NodeFacts) -> None:
        self._schedule(node, "registered")

    def node_ready(self, node: NodeFacts) -> None:
        self._schedule(node, "ready")

    def _schedule(self, node: NodeFacts, event: str) -> None:
        now = self.elapsed()
        for agent in self.agents:
            if agent.after == event and agent.nodes.matches(node.node_pool, node.instance_type, node.zone,
                                                            node.capacity_type):
                self._due.append((now + agent.delay_seconds, node.name, agent))

    def tick(self) -> list[tuple[str, str, str]]:
        """Remove the taints that are due; returns (node, agent, taint key) for each taint removed."""
        now = self.elapsed()
        due = [d for d in self._due if reached(now, d[0])]
        self._due = [d for d in self._due if not reached(now, d[0])]
        done = []
        for _at, node_name, agent in due:
            if self._remove(node_name, agent.removes_taint):
                self.removed.append((now, node_name, agent.name, agent.removes_taint))
                done.append((node_name, agent.name, agent.removes_taint))
        return done

    def next_due(self) -> float | None:
        """The simulated time of the next taint removal, if any."""
        return min((d[0] for d in self._due), default=None)

    def _remove(self, node_name: str, key: str) -> bool:
        changed = False

        def drop(node: dict[str, Any]) -> bool:
            nonlocal changed
            taints = (node.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != key]
            changed = len(kept) != len(taints)
            if changed:
                node["spec"]["taints"] = kept
            return changed

        self.cluster.update_node(node_name, drop)
        return changed

    def forget(self, node_name: str) -> None:
        """The node is gone: its agent pods are too."""
        self._due = [d for d in self._due if d[1] != node_name]
