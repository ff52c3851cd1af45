"""What the use cases need (`Dependencies`), held once per process; the simulation and tests swap it.

This module only declares and holds: the adapters' wiring (`carpool.adapters.aws.wiring`) builds the
production set and nothing here imports it back. A handler names its builder with `provide` when it is
imported, and calls `get()`, which builds on the cold start. The simulation calls `use(deps)` with a
simulated cluster and a simulated clock but the same local-AWS adapters, so the handlers it drives run
the production code path.

The dependencies are held in a `contextvars.ContextVar`: in Lambda the runtime invokes the handler on its
main thread, so what the cold start built serves every later invocation of the container; in a
simulation each run installs its own on the thread it runs on, so runs at once in one process never use
each other's adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from carpool import clocks
from carpool.app.settings import Settings
from carpool.clocks import utc_now

if TYPE_CHECKING:  # annotations only: sources pulls in the YAML loader and the catalog
    from carpool.app.sources import CatalogSource, ConfigSource
    from carpool.karpenter_objects import KarpenterObjects
    from carpool.ports import Cluster, Compute, EventPublisher, InstanceProfiles
    from carpool.state.not_ready import NotReadyStore
    from carpool.state.ports import CapacityCache, ClaimLedger, OfferingAvailability
    from carpool.state.reasons import PodReasonStore


@dataclass
class Dependencies:
    settings: Settings
    cluster: Cluster
    compute: Compute
    ledger: ClaimLedger
    offerings: OfferingAvailability
    capacity: CapacityCache
    publisher: EventPublisher
    ami_source: Any
    config: ConfigSource
    catalog: CatalogSource
    clock: Callable[[], datetime] = utc_now
    #: per-process caches the use cases may keep (AMI resolutions, subnets), timed by `clock`
    cache: dict[str, Any] = field(default_factory=dict)
    #: IAM instance profiles for node classes naming a `role` other than the stack's (None: none can be
    #: made, and such a node class fails its launches with a line naming `spec.role`)
    instance_profiles: InstanceProfiles | None = None
    #: why each pod carpool could not serve is pending (None: not kept, not logged)
    reasons: PodReasonStore | None = None
    #: which node classes refused a launch and why (None: not kept)
    not_ready: NotReadyStore | None = None
    #: Karpenter's NodePools, EC2NodeClasses and NodeClaims in the cluster (None: a cluster without them,
    #: unit tests: no status is written and no NodeClaim kept)
    karpenter: KarpenterObjects | None = None

    def __post_init__(self) -> None:
        """Every part that caches by time keeps it by `clock` (`carpool.clocks.FollowsClock`). Here, not in
        the builder, because the simulation swaps the clock after building (`dataclasses.replace`, which
        makes a new `Dependencies`): the parts' caches then follow the simulated clock too."""
        for f in fields(self):
            if f.name not in ("clock", "settings", "cache"):
                clocks.follow(getattr(self, f.name), self.clock)


_current: ContextVar[Dependencies | None] = ContextVar("carpool_dependencies", default=None)
_factory: Callable[[], Dependencies] | None = None


class NotWired(RuntimeError):
    """`get()` was called with neither dependencies installed nor a builder provided."""


def provide(factory: Callable[[], Dependencies]) -> None:
    """Name how `get()` builds the dependencies on a cold start (a handler passes the production wiring)."""
    global _factory
    _factory = factory


def use(deps: Dependencies | None) -> None:
    """Install `deps` for every subsequent `get()` of this context (None: build with the provided factory
    next time)."""
    _current.set(deps)


def installed() -> Dependencies | None:
    """What `get()` would answer without building (None: nothing installed or built yet in this context)."""
    return _current.get()


def get() -> Dependencies:
    deps = _current.get()
    if deps is None:
        if _factory is None:
            raise NotWired("no dependencies installed (wiring.use) and no builder provided (wiring.provide)")
        deps = _factory()
        if not deps.settings.cluster_facts_error:  # unresolved cluster facts: asked again next invocation
            _current.set(deps)
    return deps
