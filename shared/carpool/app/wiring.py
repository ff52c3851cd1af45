"""Builds the use cases' collaborators once per process, and lets the simulation and tests swap them.

Handlers call `get()`; on a cold start it builds the AWS/EKS adapters from the environment. The
simulation calls `use(deps)` with a simulated cluster and a simulated clock but the same local-AWS
adapters, so the handlers it drives run the production code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from carpool.app.settings import Settings

if TYPE_CHECKING:  # annotations only: sources pulls in the YAML loader and the catalog
    from carpool.app.sources import CatalogSource, ConfigSource
    from carpool.ports import Cluster, Compute, EventPublisher
    from carpool.state.ports import CapacityCache, ClaimLedger, OfferingAvailability


def utc_now() -> datetime:
    return datetime.now(UTC)


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
    #: per-process caches the use cases may keep (AMI resolutions, subnets)
    cache: dict[str, Any] = field(default_factory=dict)


_current: Dependencies | None = None


def use(deps: Dependencies | None) -> None:
    """Install `deps` for every subsequent `get()` (None: rebuild from the environment next time)."""
    global _current
    _current = deps


def get() -> Dependencies:
    global _current
    if _current is None:
        _current = build_from_env()
    return _current


def build_from_env(settings: Settings | None = None, cluster: Cluster | None = None) -> Dependencies:
    """The production wiring: boto3 adapters for AWS, lightkube for the cluster."""
    from carpool.adapters.aws import wiring as aws

    settings = settings or Settings.from_env()
    return aws.build(settings, cluster=cluster)
