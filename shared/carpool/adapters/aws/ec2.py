"""`carpool.ports.Compute` on boto3 EC2: fleets, instances, launch templates, subnets, security groups.

Response shapes pass through unchanged; deciding what an error in a CreateFleet response means is
`carpool.launch.fleet`'s job. This adapter only makes the calls robust:
- CreateFleet throttling is retried with exponential backoff and full jitter. botocore's adaptive mode
  already retries throttles quickly inside one call; the extra, longer backoff here exists because
  CreateFleet's account-wide token bucket is small and a failed launch costs a whole provisioning round.
- Creating and deleting launch templates is idempotent (already exists / already gone are not errors),
  since two provisioners may build the same deterministic template name at the same time.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from carpool import labels
from carpool.adapters.aws import session
from carpool.ports import (
    LAUNCH_TEMPLATE_MISSING_CODES,
    LaunchTemplateMissing,
    OutcomeUnknown,
    TerminationRefused,
)

log = logging.getLogger(__name__)

THROTTLING_CODES = frozenset({"RequestLimitExceeded", "Throttling", "ThrottlingException"})
TEMPLATE_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"
#: "MissingParameter" is how moto answers DeleteLaunchTemplate for an unknown name; carpool always sends
#: the name, so from EC2 that code cannot mean anything but "no such template" either.
TEMPLATE_MISSING = frozenset(
    {"InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "MissingParameter"}
)
INSTANCE_MISSING = "InvalidInstanceID.NotFound"
#: TerminateInstances refused for good: termination protection, or IAM / an SCP denying the call
TERMINATION_REFUSED = frozenset({"OperationNotPermitted", "UnauthorizedOperation"})
#: TerminateInstances accepts at most this many ids per call.
TERMINATE_BATCH = 1000


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def backoff_delay(attempt: int, base: float, cap: float, rand: Callable[[], float]) -> float:
    """Full-jitter exponential backoff (AWS Architecture Blog): uniform in [0, min(cap, base * 2^n)]."""
    return rand() * min(cap, base * (2**attempt))


class Ec2Compute:
    """EC2 for the provisioner, interruption handler and disruption loop.

    `client` is public on purpose: the simulation registers botocore event hooks on it to inject capacity
    errors (`carpool.sim.run.faults`), so every call, CreateFleet included, must go through it.
    """

    def __init__(
        self,
        client: Any | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        fleet_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.client = client if client is not None else session.client("ec2")
        self._sleep = sleep
        self._fleet_attempts = fleet_attempts
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._rand = rand

    # -- fleets and instances -------------------------------------------------------------------------
    def create_fleet(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """CreateFleet (type instant), retrying only throttling; other errors propagate unchanged, but for
        an answer lost after the request was sent (botocore's retries, with the same ClientToken, all
        timed out): `OutcomeUnknown`, as the instances may well be booting; and for a launch template EC2
        does not have: `LaunchTemplateMissing`."""
        for attempt in range(self._fleet_attempts):
            try:
                return dict(self.client.create_fleet(**request))
            except (ReadTimeoutError, ConnectionClosedError) as e:
                raise OutcomeUnknown(f"CreateFleet sent, its answer lost: {e}") from e
            except ClientError as e:
                if error_code(e) in LAUNCH_TEMPLATE_MISSING_CODES:
                    raise LaunchTemplateMissing(str(e)) from e
                if error_code(e) not in THROTTLING_CODES or attempt == self._fleet_attempts - 1:
                    raise
                delay = backoff_delay(attempt, self._backoff_base, self._backoff_cap, self._rand)
                log.warning(
                    "CreateFleet throttled (%s), retry %d in %.2fs", error_code(e), attempt + 1, delay
                )
                self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def tag_instance(self, instance_id: str, tags: Mapping[str, str]) -> None:
        """CreateTags on one instance. The IAM policy allows it only on the cluster's own instances and
        only for the claim-name tag, so the tags of what carpool launched cannot be rewritten."""
        self.client.create_tags(Resources=[instance_id], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])

    def terminate_instances(self, instance_ids: Sequence[str]) -> None:
        """Terminate, tolerating ids that are already gone (termination is retried by several paths)."""
        ids = list(dict.fromkeys(instance_ids))
        for start in range(0, len(ids), TERMINATE_BATCH):
            self._terminate_batch(ids[start : start + TERMINATE_BATCH])

    def _terminate_batch(self, ids: list[str]) -> None:
        if not ids:
            return
        try:
            self.client.terminate_instances(InstanceIds=ids)
        except ClientError as e:
            if error_code(e) in TERMINATION_REFUSED:
                raise TerminationRefused(ids, error_code(e), str(e.response.get("Error", {}).get("Message", ""))) from e
            if error_code(e) != INSTANCE_MISSING:
                raise
            # One unknown id fails the whole call: terminate the others one by one.
            for instance_id in ids if len(ids) > 1 else ():
                self._terminate_batch([instance_id])

    def describe_instances(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Instances (not reservations) matching `filters`, every page."""
        pages = self.client.get_paginator("describe_instances").paginate(Filters=list(filters))
        return [i for page in pages for r in page.get("Reservations", []) for i in r.get("Instances", [])]

    # -- launch templates -------------------------------------------------------------------------------
    def ensure_launch_template(self, request: Mapping[str, Any]) -> str:
        """CreateLaunchTemplate unless the name exists. Names are deterministic hashes of the content
        (`carpool.launch.templates`), so an existing template of that name is the same template."""
        name = str(request["LaunchTemplateName"])
        try:
            self.client.create_launch_template(**request)
        except ClientError as e:
            if error_code(e) != TEMPLATE_EXISTS:
                raise
            log.debug("launch template %s already exists", name)
        return name

    def list_launch_templates(self, cluster: str) -> list[dict[str, Any]]:
        """Launch templates carpool created for `cluster` (tag `carpool.dev/cluster`)."""
        pages = self.client.get_paginator("describe_launch_templates").paginate(
            Filters=[{"Name": f"tag:{labels.TAG_MANAGED_BY}", "Values": [cluster]}]
        )
        return [t for page in pages for t in page.get("LaunchTemplates", [])]

    def delete_launch_template(self, name: str) -> None:
        try:
            self.client.delete_launch_template(LaunchTemplateName=name)
        except ClientError as e:
            if error_code(e) not in TEMPLATE_MISSING:
                raise

    # -- network discovery ------------------------------------------------------------------------------
    def describe_subnets(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        pages = self.client.get_paginator("describe_subnets").paginate(Filters=list(filters))
        return [s for page in pages for s in page.get("Subnets", [])]

    def describe_security_groups(self, filters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        pages = self.client.get_paginator("describe_security_groups").paginate(Filters=list(filters))
        return [g for page in pages for g in page.get("SecurityGroups", [])]
