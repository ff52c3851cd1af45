"""Every unfinished pod of the cluster as the disruption pass sees it, kept between the runs of one warm
Lambda environment and brought up to date from the API server's watch: Karpenter's informer cache, for a
function that runs once a minute instead of all the time.

Why: listing every pod each minute is most of what the pass costs (at 1,000 nodes, 31,000 pods and about
185 MB of JSON a run, `bench/scale.py`), and carpool's own bill is billed by the second. A scheduled
function's environment is reused from one run to the next (Lambda freezes it between invocations), so
the views listed once are still there a minute later; the run asks the API server only for what changed
since the version it reached (`Cluster.pod_view_changes`: one watch request, read while the server sends
what it holds). The first run of an environment lists; so does a run whose version the API server no longer
holds (410: its watch cache keeps at least 75 s of changes, and runs are 60 s apart) and a run whose watch
failed (logged). A snapshot is always the cluster at one resource version (changes are applied in
order), possibly a few moments old, like any list: the executor validates a decision against the API
server again before it acts (`carpool.app.disruption_executor`).

`generation` counts the reads that found something changed (a relist counts), so the consolidation gate
(`carpool.disruption.consolidated`) can tell whether the pods are what its last search saw without
comparing 31,000 of them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from carpool.app.wiring import Dependencies
from carpool.disruption.podview import PodView
from carpool.ports import PodViewChanges, ResourceVersionExpired

log = logging.getLogger(__name__)

#: where a warm environment keeps the snapshot (`Dependencies.cache`: one per Lambda environment)
CACHE_KEY = "disruption.pod_snapshot"


@dataclass
class PodSnapshot:
    """The unfinished pods by key, the resource version they are at, and how many reads changed them."""

    views: dict[str, PodView]
    version: str
    generation: int = 0
    #: how this run got them: "listed" (a new environment, an expired version, a failed watch) or "watched"
    how: str = "listed"
    #: pods this run's watch changed or removed
    changed: int = 0

    def pods(self) -> list[PodView]:
        return list(self.views.values())

    def apply(self, delta: PodViewChanges) -> None:
        for change in delta.changes:
            if change.view is None:
                self.views.pop(change.key, None)
            else:
                self.views[change.key] = change.view
        self.version = delta.resource_version
        self.changed = len(delta.changes)
        self.how = "watched"
        if delta.changes:
            self.generation += 1


def read(deps: Dependencies) -> PodSnapshot:
    """The unfinished pods now: the warm environment's snapshot brought up to date, or a new list."""
    kept: PodSnapshot | None = deps.cache.get(CACHE_KEY)
    if kept is not None:
        try:
            kept.apply(deps.cluster.pod_view_changes(kept.version))
            return kept
        except ResourceVersionExpired as e:
            log.info("pods: %s; listing every pod again", e)
        except Exception as e:  # noqa: BLE001 - a watch that fails costs a list, not the run
            log.warning("pods: the watch from version %s failed (%s: %s); listing every pod again",
                        kept.version, type(e).__name__, e)
    views, version = deps.cluster.pod_views_versioned()
    snapshot = PodSnapshot({v.key: v for v in views}, version,
                           generation=(kept.generation + 1) if kept is not None else 0, changed=len(views))
    deps.cache[CACHE_KEY] = snapshot
    return snapshot
