"""Runtime settings, read once from the environment the CDK stack (or the simulation) sets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from carpool import environment


@dataclass(frozen=True)
class Settings:
    cluster_name: str
    region: str = "us-east-1"
    cluster_version: str = "1.32"
    cluster_endpoint: str = ""
    cluster_ca: str = ""
    cluster_cidr: str = "10.100.0.0/16"
    cluster_dns: str = "10.100.0.10"
    table: str = ""
    idempotency_table: str = ""
    event_bus: str = ""
    config_parameter: str = ""
    node_role: str = ""
    instance_profile: str = ""
    #: how long a claim's pod nominations hold before the pods may be provisioned again
    nomination_ttl_seconds: int = 900
    #: a claim never registered after this long is terminated (node repair / launch failure)
    registration_timeout_seconds: int = 900
    #: an instance with carpool's tags but no claim is terminated after this grace period
    orphan_grace_seconds: int = 300
    #: a claim reserved this long ago without an instance is released (its pods provisioned again), unless
    #: EC2 has an instance tagged with its name; longer than the provisioner Lambda's timeout (120 s), so
    #: no invocation that could still launch for it is running
    launch_deadline_seconds: int = 180
    #: capacity errors make an offering unavailable for this long (Karpenter: 3 minutes)
    unavailable_seconds: int = 180
    #: at most this many instance types go to one CreateFleet call (the AWS provider sends 60)
    max_fleet_types: int = 60
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """From `env`, else the running function's environment (`carpool.environment`)."""
        e = dict(environment.current() if env is None else env)
        return cls(
            cluster_name=e.get("CARPOOL_CLUSTER_NAME", "demo"),
            region=e.get("AWS_REGION", e.get("AWS_DEFAULT_REGION", "us-east-1")),
            cluster_version=e.get("CARPOOL_CLUSTER_VERSION", "1.32"),
            cluster_endpoint=e.get("CARPOOL_CLUSTER_ENDPOINT", ""),
            cluster_ca=e.get("CARPOOL_CLUSTER_CA", ""),
            cluster_cidr=e.get("CARPOOL_CLUSTER_CIDR", "10.100.0.0/16"),
            cluster_dns=e.get("CARPOOL_CLUSTER_DNS", "10.100.0.10"),
            table=e.get("CARPOOL_TABLE", ""),
            idempotency_table=e.get("CARPOOL_IDEMPOTENCY_TABLE", ""),
            event_bus=e.get("CARPOOL_EVENT_BUS", ""),
            config_parameter=e.get("CARPOOL_CONFIG_PARAMETER", ""),
            node_role=e.get("CARPOOL_NODE_ROLE_ARN", ""),
            instance_profile=e.get("CARPOOL_INSTANCE_PROFILE", ""),
        )
