"""One object the simulated API server holds, as its stores keep it (`SimulatedCluster`, and the
Karpenter objects of `carpool.sim.cluster.objects`, which share its change log)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from carpool import resources as res
from carpool.disruption.podview import PodView


@dataclass
class Record:
    """One object: its JSON, the resource version of its last change, and values derived from it."""

    raw: dict[str, Any]
    rv: int
    model: Any = None
    #: the pod's `PodView` as of `rv` (disruption reads every pod, most of them unchanged since last time)
    view: PodView | None = None
    requests: res.Resources | None = None
    signature: str | None = None
    created_at: float = 0.0
    controller: str | None = None
    #: (rv, id of raw, JSON) of the last encoding, for the HTTP API server's lists
    encoding: tuple[int, int, bytes] | None = None


__all__ = ["Record"]
