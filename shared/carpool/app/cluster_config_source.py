"""The config the functions use: the cluster's NodePools and EC2NodeClasses, listed and judged.

Why from the cluster: that is where Karpenter's users keep them (`kubectl apply`, GitOps, a file per team),
so an edit takes effect within seconds with no deploy, and there is one place the config lives. Why a list
cached by resourceVersion and not a watch: a function lives for minutes and most of its invocations need
the config once; two lists (NodePools, EC2NodeClasses) cost a few milliseconds at a cold start, and a warm
environment lists again at most every `CONFIG_RECHECK_SECONDS`, by the dependencies' clock
(`carpool.clocks.FollowsClock`: in a simulation, simulated seconds). The objects are judged again only
when their (name, resourceVersion) set changed (`carpool.api.cluster_config.judge`, each object on its own,
as Karpenter does). The watcher, which watches both kinds, asks for a fresh list at once on a change
(`invalidate`).

A cluster with no valid NodePool is a config that launches nothing, not an error: the functions run and
say so in the log, once per change. A cluster without Karpenter's CRDs is an error (`KindNotServed`, whose
text names the fix): nothing can be known about the user's pools, so the functions do nothing
(`carpool.app.config_guard`). A list that fails on a warm environment keeps the config it had (said in the
log, listed again on the next call); on a cold start it raises.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Final

from carpool import clocks
from carpool.api.cluster_config import ClusterConfig, judge
from carpool.api.loader import Manifests
from carpool.karpenter_objects import EC2NODECLASS, NODEPOOL, KarpenterObjects, KindNotServed, ObjectList

log = logging.getLogger(__name__)

#: how long a warm environment serves the config it listed before it lists again
CONFIG_RECHECK_SECONDS: Final = 5.0

#: what a listing is judged by: each kind's (name, resourceVersion) pairs
_Versions = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


class ClusterConfigSource:
    """`ConfigSource` over Karpenter's objects in the cluster (see the module docstring)."""

    def __init__(self, objects: KarpenterObjects, *, recheck_seconds: float = CONFIG_RECHECK_SECONDS,
                 clock: clocks.Clock = clocks.utc_now) -> None:
        self._objects = objects
        self._recheck = timedelta(seconds=recheck_seconds)
        self._clock = clock
        self._config: ClusterConfig | None = None
        self._versions: _Versions | None = None
        #: the lists' resourceVersions, to watch from (`resource_versions`)
        self._list_versions: dict[str, str] = {}
        self._listed_at: datetime | None = None
        #: the last summary logged: said again only when it changes
        self._said = ""

    def follow_clock(self, clock: clocks.Clock) -> None:
        """List again by `clock` from now on (the dependencies'); what was listed is listed again."""
        if clock is not self._clock:
            self._clock, self._listed_at = clock, None

    def load(self) -> Manifests:
        """The valid NodePools and EC2NodeClasses (`ConfigSource`)."""
        return self.current().manifests

    def current(self) -> ClusterConfig:
        """The cluster's config as listed at most `CONFIG_RECHECK_SECONDS` ago. Raises `KindNotServed` when
        Karpenter's CRDs are not installed, and a cold start's failed list."""
        now = self._clock()
        if self._config is None or self._listed_at is None or now - self._listed_at >= self._recheck:
            self._list(now)
        assert self._config is not None
        return self._config

    def invalidate(self) -> None:
        """List again on the next `current` (the watcher saw a NodePool or EC2NodeClass change)."""
        self._listed_at = None

    def resource_versions(self) -> dict[str, str]:
        """The last lists' resourceVersions by kind (`NodePool`, `EC2NodeClass`): where a watch of the two
        starts so that it misses no change after the config in hand."""
        return dict(self._list_versions)

    def _list(self, now: datetime) -> None:
        try:
            pools, classes = self._objects.list_objects(NODEPOOL), self._objects.list_objects(EC2NODECLASS)
        except KindNotServed:
            raise
        except Exception as exc:
            if self._config is None:
                raise
            log.warning("cannot list NodePools and EC2NodeClasses (%s: %s); using the config listed before",
                        type(exc).__name__, exc)
            return  # `_listed_at` unchanged: the next call lists again
        self._listed_at = now
        self._list_versions = {NODEPOOL.kind: pools.resource_version, EC2NODECLASS.kind: classes.resource_version}
        versions = (_versions_of(pools), _versions_of(classes))
        if self._config is not None and versions == self._versions:
            return
        self._config, self._versions = judge(pools.items, classes.items), versions
        self._say(self._config)

    def _say(self, config: ClusterConfig) -> None:
        """One line per change of what is served: info when every object is served, a warning naming each
        object kept out (and when no NodePool is served, that nothing will be launched)."""
        line = config.summary()
        if line == self._said:
            return
        self._said = line
        if not config.manifests.nodepools:
            log.warning("cluster config: %s; no NodePool can be served, so no node is launched until one is "
                        "applied (kubectl apply -f nodepool.yaml)", line)
        elif config.refused():
            log.warning("cluster config: %s", line)
        else:
            log.info("cluster config: %s", line)


def _versions_of(listed: ObjectList) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(o.get("metadata", {}).get("name", "")),
                         str(o.get("metadata", {}).get("resourceVersion", ""))) for o in listed.items))
