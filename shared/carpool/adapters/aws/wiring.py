"""Production wiring: every port backed by boto3 (and lightkube for the cluster).

The handlers provide `build_from_env` to `carpool.app.wiring` (it builds on their cold start). The
simulation calls it too, passing its own simulated cluster and clock but keeping these adapters pointed at
the local AWS endpoint, so the handlers it drives run the same code as in Lambda.

The instance-type catalog comes from the state table (`catalog_store`), kept warm by the disruption
function's refresh (`carpool.app.sources.StoredCatalogSource`); the live EC2 reads behind that refresh
are made only when it is due, never on a request's path.

The config is the cluster's NodePools and EC2NodeClasses (`carpool.app.cluster_config_source`), listed
through the same client as the cluster. Every cache here (the config's list, AMI parameters and images) expires by the dependencies' clock, which
`Dependencies` hands them when it is made (`carpool.clocks`), so a simulation that swaps the clock moves
them too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from carpool.amis import CachedAmiSource
from carpool.app.cluster_config_source import ClusterConfigSource
from carpool.app.settings import Settings
from carpool.app.sources import StoredCatalogSource
from carpool.app.wiring import Dependencies, utc_now
from carpool.catalog import Catalog
from carpool.launch.profiles import ExistingProfile, ProfileRequest
from carpool.ports import Cluster, EventPublisher, InstanceProfiles

if TYPE_CHECKING:
    from carpool.karpenter_objects import KarpenterObjects

AMI_TTL_SECONDS = 300


class NoClusterConfig(ValueError):
    """`build` was given a cluster of its own but no `karpenter` to list the config from."""


def build_from_env(settings: Settings | None = None, cluster: Cluster | None = None,
                   karpenter: KarpenterObjects | None = None) -> Dependencies:
    """The production dependencies from the environment (`carpool.app.wiring.provide` takes this)."""
    return build(settings or Settings.from_env(), cluster=cluster, karpenter=karpenter)


def build(
    settings: Settings,
    cluster: Cluster | None = None,
    clock: Callable[[], datetime] = utc_now,
    karpenter: KarpenterObjects | None = None,
) -> Dependencies:
    """The production set. Without `cluster`, the lightkube cluster and Karpenter's objects on its client
    (the same endpoint, CA and EKS token; nothing is requested until first used); a caller that passes its
    own cluster (the simulation) passes its `karpenter` too. The config is the cluster's NodePools and
    EC2NodeClasses (`ClusterConfigSource`), so there is none without `karpenter` (`NoClusterConfig`)."""
    from carpool.adapters.aws.catalog_store import DynamoCatalogStore
    from carpool.adapters.aws.dynamodb.learned_capacity import DynamoCapacityCache
    from carpool.adapters.aws.dynamodb.ledger import DynamoLedger
    from carpool.adapters.aws.dynamodb.not_ready import DynamoNotReady
    from carpool.adapters.aws.dynamodb.offerings import DynamoOfferings
    from carpool.adapters.aws.dynamodb.reasons import DynamoPodReasons
    from carpool.adapters.aws.ec2 import Ec2Compute
    from carpool.adapters.aws.events import EventBridgePublisher
    from carpool.adapters.aws.images import AwsAmiSource

    if cluster is None:
        from carpool.adapters.aws.eks import complete
        from carpool.adapters.k8s.cluster import LightkubeCluster
        from carpool.adapters.k8s.karpenter_objects import LightkubeKarpenterObjects

        settings = complete(settings)
        lightkube = LightkubeCluster.from_settings(settings)
        cluster, karpenter = lightkube, karpenter or LightkubeKarpenterObjects(lightkube.client)
    if karpenter is None:
        raise NoClusterConfig("no KarpenterObjects to read the config from: pass the cluster's `karpenter` too")
    region = settings.region
    return Dependencies(
        settings=settings,
        cluster=cluster,
        compute=Ec2Compute(fleet_attempts=1),  # botocore's retries are the only layer (see session.py)
        ledger=DynamoLedger(settings.table),
        offerings=DynamoOfferings(settings.table),
        capacity=DynamoCapacityCache(settings.table),
        publisher=_OnFirstUse(lambda: EventBridgePublisher(settings.event_bus)),
        ami_source=CachedAmiSource(AwsAmiSource(), AMI_TTL_SECONDS),
        config=ClusterConfigSource(karpenter),
        catalog=StoredCatalogSource(DynamoCatalogStore(settings.table), region, lambda now: _live_catalog(now, region)),
        clock=clock,
        instance_profiles=_OnFirstUseProfiles(),
        reasons=DynamoPodReasons(settings.table),
        not_ready=DynamoNotReady(settings.table),
        karpenter=karpenter,
    )


def _live_catalog(now: datetime, region: str) -> Catalog:
    """Built from EC2 by the scheduled refresh only: its adapters (Pricing, paginated EC2 reads, the
    builder) are imported then, not on every cold start."""
    from carpool.adapters.aws.catalog import live_catalog

    return live_catalog(now, region)


class _OnFirstUseProfiles:
    """`IamInstanceProfiles` made when first used: only node classes naming a role other than the stack's
    need IAM, and an IAM client costs every cold start tens of milliseconds."""

    def __init__(self) -> None:
        self._profiles: InstanceProfiles | None = None

    def _made(self) -> InstanceProfiles:
        if self._profiles is None:
            from carpool.adapters.aws.iam import IamInstanceProfiles

            self._profiles = IamInstanceProfiles()
        return self._profiles

    def ensure(self, request: ProfileRequest) -> None:
        self._made().ensure(request)

    def list_profiles(self, path: str) -> list[ExistingProfile]:
        return self._made().list_profiles(path)

    def delete(self, name: str) -> None:
        self._made().delete(name)


class _OnFirstUse:
    """An `EventPublisher` made when first used: only the watcher publishes, and an EventBridge client costs
    every other function's cold start tens of milliseconds (its service model is loaded on creation)."""

    def __init__(self, make: Callable[[], EventPublisher]) -> None:
        self._make = make
        self._publisher: EventPublisher | None = None

    def put_events(self, entries: Iterable[Mapping[str, Any]]) -> int:
        if self._publisher is None:
            self._publisher = self._make()
        return self._publisher.put_events(entries)
