"""Local AWS without its server, for tests and benchmarks that need moto inside their own process.

Everything outside `carpool.sim.localaws` reaches moto through here or through `LocalAws`
(`carpool.sim.localaws.server`), so that what a moto upgrade can break is in one package: moto's
in-process mock, the instance-type records local EC2 answers from, and the handler that serves
EventBridge's PutEvents (for a benchmark that times it). moto is imported when called, not with this
module: importing it takes about a second.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any


@contextlib.contextmanager
def moto_in_process(*, fleets_as_ec2: bool = False) -> Iterator[None]:
    """moto answering every AWS client of this process (`mock_aws`) until the block ends; no server. With
    `fleets_as_ec2`, CreateFleet allocates and tags its instances as local AWS's server has them
    (`FLEET_PATCHES`), for tests of what reads the instances a fleet launched."""
    from moto import mock_aws

    from carpool.sim.localaws.moto_patches import installed
    from carpool.sim.localaws.server import FLEET_PATCHES

    with mock_aws(), installed(*(FLEET_PATCHES if fleets_as_ec2 else ())):
        yield


def ec2_instance_types() -> Mapping[str, dict[str, Any]]:
    """The instance types local EC2 describes, by name, each as moto keeps its DescribeInstanceTypes record."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    return INSTANCE_TYPES


def assumed_role_secret(account: str, access_key_id: str) -> str | None:
    """The secret key of credentials local STS issued by AssumeRole in `account` (what a verifier of their
    SigV4 signatures, such as the real-cluster tier's token webhook, needs), or None for an unknown key."""
    from moto.sts.models import sts_backends

    role = sts_backends[account]["aws"].get_assumed_role_from_access_key(access_key_id)
    return None if role is None else str(role.secret_access_key)


def eventbridge_request_handler() -> type:
    """The class whose `put_events` serves local EventBridge's PutEvents."""
    from moto.events.responses import EventsHandler

    return EventsHandler
