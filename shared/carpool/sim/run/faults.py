"""Fault injection for local EC2: capacity errors, lost CreateFleet answers, and Lambda invocations killed
around CreateFleet.

moto launches whatever it is asked for, so on its own it can never show carpool falling back from an
offering without capacity. These botocore event hooks, registered on the provisioner's EC2 client, play
the scenario's `capacity` section: overrides of a CreateFleet request that fail at the current simulated
time are taken out of the request and reported back in the response's `Errors`, exactly as EC2 reports
an `InsufficientInstanceCapacity`. When every override fails no request is sent at all and the response
has no instances, only errors.

Three hooks share the request's `context` dict:
- `before-parameter-build` decides which overrides fail and strips them from the parameters;
- `before-call` answers in EC2's place when nothing is left to launch;
- `after-call` adds the errors to a real response when some overrides were launched.

`CrashFaults` plays the scenario's `crashes` section: a Lambda that dies (timeout, out of memory) just
before CreateFleet is sent, or just after it returned and before anything was written about it; or a
CreateFleet that launched but whose answer was lost (`answer-lost-after-create-fleet`: botocore's
`ReadTimeoutError` once its retries, idempotent on the request's ClientToken, are spent; `LostAnswers`). The hook
raises `InvocationKilled`, a `BaseException` so that no `except Exception` in carpool can catch it and
carry on (a dead process runs nothing more); `CrashFaults.guard` turns it into the failed invocation the
Lambda service sees, so the SQS batch is redelivered after its visibility timeout.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from carpool.sim.run.scenario import CapacityFailure, Crash, TerminationDenial

_KEY = "carpool_sim_capacity_errors"
_ALL_FAILED = "carpool_sim_all_failed"
_DENIED = "carpool_sim_termination_denied"

_MESSAGES = {
    "InsufficientInstanceCapacity": "We currently do not have sufficient {type} capacity in the "
    "Availability Zone you requested ({zone}). (simulated)",
}


@dataclass
class CapacityFaults:
    """Decides, at a simulated time, which (instance type, zone, capacity type) offerings fail.

    `elapsed` returns seconds since the start of the run; `zone_of_subnet` maps a SubnetId to its zone
    (overrides name subnets, the scenario names zones).
    """

    failures: list[CapacityFailure]
    elapsed: Callable[[], float]
    zone_of_subnet: Callable[[str], str | None] = lambda _subnet: None
    #: every error injected so far, for the result and the report
    injected: list[dict[str, Any]] = field(default_factory=list)
    _fleet_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def failure_for(self, instance_type: str, zone: str | None, capacity_type: str | None) -> CapacityFailure | None:
        at = self.elapsed()
        for f in self.failures:
            if f.matches(instance_type, zone, capacity_type, at):
                return f
        return None

    # -- botocore hooks ---------------------------------------------------------------------------
    def register(self, client: Any) -> None:
        """Attach to a boto3 EC2 client (`deps.compute.client`)."""
        events = client.meta.events
        events.register("before-parameter-build.ec2.CreateFleet", self.before_parameter_build)
        events.register("before-call.ec2.CreateFleet", self.before_call)
        events.register("after-call.ec2.CreateFleet", self.after_call)

    def unregister(self, client: Any) -> None:
        events = client.meta.events
        events.unregister("before-parameter-build.ec2.CreateFleet", self.before_parameter_build)
        events.unregister("before-call.ec2.CreateFleet", self.before_call)
        events.unregister("after-call.ec2.CreateFleet", self.after_call)

    def before_parameter_build(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Strip failing overrides from the request (in place) and remember their errors."""
        lifecycle = _capacity_type(params)
        errors: list[dict[str, Any]] = []
        kept_configs = []
        for config in params.get("LaunchTemplateConfigs", []):
            kept, failed = self._split(config, lifecycle)
            errors.extend(failed)
            if kept is not None:
                kept_configs.append(kept)
        if not errors:
            return
        context[_KEY] = errors
        context[_ALL_FAILED] = not kept_configs
        if kept_configs:
            params["LaunchTemplateConfigs"] = kept_configs
        self.injected.extend({"at": self.elapsed(), **e} for e in errors)

    def _split(self, config: Mapping[str, Any], lifecycle: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        overrides = config.get("Overrides") or []
        kept, errors = [], []
        for override in overrides:
            itype = override.get("InstanceType")
            zone = override.get("AvailabilityZone") or self.zone_of_subnet(override.get("SubnetId", ""))
            failure = self.failure_for(itype, zone, lifecycle) if itype else None
            if failure is None:
                kept.append(override)
            else:
                errors.append(_error(config, override, itype, zone, lifecycle, failure.error))
        if not overrides:
            return dict(config), []
        if not kept:
            return None, errors
        out = dict(config)
        out["Overrides"] = kept
        return out, errors

    def before_call(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        """When every override failed, answer like EC2 would: no instances, one error per override."""
        if not context.get(_ALL_FAILED):
            return None
        fleet_id = f"fleet-{next(self._fleet_ids):08x}-0000-4000-8000-000000000000"
        parsed = {
            "FleetId": fleet_id,
            "Errors": copy.deepcopy(context[_KEY]),
            "Instances": [],
            "ResponseMetadata": {"HTTPStatusCode": 200, "RequestId": "carpool-sim", "HTTPHeaders": {}},
        }
        return AWSResponse("https://ec2.local/", 200, {}, None), parsed

    def after_call(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Partly failed requests: the launched instances stay, the failing overrides are reported."""
        if context.get(_KEY) and not context.get(_ALL_FAILED):
            parsed.setdefault("Errors", []).extend(copy.deepcopy(context[_KEY]))


def _capacity_type(params: Mapping[str, Any]) -> str:
    spec = params.get("TargetCapacitySpecification") or {}
    return str(spec.get("DefaultTargetCapacityType") or "on-demand")


def _error(config: Mapping[str, Any], override: Mapping[str, Any], itype: str, zone: str | None,
           lifecycle: str, code: str) -> dict[str, Any]:
    template = _MESSAGES.get(code, "{type} in {zone}: " + code + " (simulated)")
    overrides = dict(override)
    if zone and "AvailabilityZone" not in overrides:
        overrides["AvailabilityZone"] = zone
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": dict(config.get("LaunchTemplateSpecification") or {}),
            "Overrides": overrides,
        },
        "Lifecycle": lifecycle,
        "ErrorCode": code,
        "ErrorMessage": template.format(type=itype, zone=zone or "?"),
    }


@dataclass
class LostAnswers:
    """CreateFleet answers lost after EC2 acted on them: the request reaches EC2, which launches, and the
    answer never comes back (a read timeout; botocore's retries carry the same ClientToken, on which EC2
    is idempotent, so they launch nothing more and time out the same way). The caller sees the
    `ReadTimeoutError` botocore raises once its retries are spent, while the instances boot. The first
    `times` calls are lost (None: every call)."""

    times: int | None = None
    #: the instance ids of every launch whose answer was lost
    lost: list[list[str]] = field(default_factory=list)

    def register(self, client: Any) -> None:
        client.meta.events.register("after-call.ec2.CreateFleet", self.after_call)

    def unregister(self, client: Any) -> None:
        client.meta.events.unregister("after-call.ec2.CreateFleet", self.after_call)

    def after_call(self, parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        if self.times is not None and len(self.lost) >= self.times:
            return
        self.lost.append([i for group in (parsed or {}).get("Instances") or [] for i in group.get("InstanceIds") or []])
        raise ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/ (simulated)")


class InvocationKilled(BaseException):
    """The Lambda's process died at this point (raised from inside a boto3 call by `CrashFaults`)."""


class InvocationFailed(Exception):
    """What the Lambda service reports for an invocation whose process died: the whole batch failed."""


@dataclass
class CrashFaults:
    """Kills the invocation of `crash.function` the next `crash.times` times it reaches `crash.point`,
    once the run is `crash.at` seconds in. `running` names the function being invoked right now."""

    crashes: list[Crash]
    elapsed: Callable[[], float]
    running: Callable[[], str]
    #: every crash played so far: {"at", "point", "function"}
    fired: list[dict[str, Any]] = field(default_factory=list)
    _left: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._left = {i: c.times for i, c in enumerate(self.crashes)}

    # -- botocore hooks ---------------------------------------------------------------------------
    def register(self, client: Any) -> None:
        """Attach to a boto3 EC2 client. The before-call hook goes first: a process that died before the
        call never reaches the capacity faults' simulated answer either."""
        events = client.meta.events
        events.register_first("before-call.ec2.CreateFleet", self.before_call)
        events.register("after-call.ec2.CreateFleet", self.after_call)

    def unregister(self, client: Any) -> None:
        events = client.meta.events
        events.unregister("before-call.ec2.CreateFleet", self.before_call)
        events.unregister("after-call.ec2.CreateFleet", self.after_call)

    def before_call(self, **_: Any) -> None:
        self._maybe_die("before-create-fleet", "before CreateFleet was sent")

    def after_call(self, parsed: Mapping[str, Any] | None = None, **_: Any) -> None:
        launched = [i for group in (parsed or {}).get("Instances") or [] for i in group.get("InstanceIds") or []]
        where = f"after CreateFleet launched {', '.join(launched) or 'nothing'}"
        if self._fires("answer-lost-after-create-fleet"):  # as `LostAnswers` plays it
            raise ReadTimeoutError(endpoint_url=f"https://ec2.amazonaws.com/: answer lost {where} (simulated)")
        self._maybe_die("after-create-fleet", where)

    def _fires(self, point: str) -> bool:
        """Whether a crash of `point` is due now (and count it)."""
        function, at = self.running(), self.elapsed()
        for i, crash in enumerate(self.crashes):
            if crash.point != point or crash.function != function or at < crash.at or self._left[i] <= 0:
                continue
            self._left[i] -= 1
            self.fired.append({"at": at, "point": point, "function": function})
            return True
        return False

    def _maybe_die(self, point: str, where: str) -> None:
        if self._fires(point):
            raise InvocationKilled(f"{self.running()} invocation killed {where} (simulated crash)")

    # -- the Lambda service's view ------------------------------------------------------------------
    def guard(self, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """`handler` as the Lambda service runs it: a killed invocation is a failed one, nothing more."""

        def invoke(event: Any, context: Any) -> Any:
            try:
                return handler(event, context)
            except InvocationKilled as killed:
                raise InvocationFailed(str(killed)) from None

        return invoke


@dataclass
class TerminationDenials:
    """Plays the scenario's `terminationDenials`: an explicit deny of `ec2:TerminateInstances` (a service
    control policy) on some of carpool's instances. EC2 authorizes a call for every resource it names and
    refuses the whole call when one is denied, with HTTP 403 `UnauthorizedOperation` and an encoded
    authorization message; nothing is terminated. moto enforces no IAM, so this `before-call` hook on
    carpool's EC2 client answers in EC2's place. `pool_of` gives an instance's NodePool (its tag)."""

    denials: list[TerminationDenial]
    elapsed: Callable[[], float]
    pool_of: Callable[[str], str]
    account: str = "123456789012"
    #: every call refused so far: {"at", "instances"}
    refused: list[dict[str, Any]] = field(default_factory=list)

    def register(self, client: Any) -> None:
        events = client.meta.events
        events.register("before-parameter-build.ec2.TerminateInstances", self.before_parameter_build)
        events.register_first("before-call.ec2.TerminateInstances", self.before_call)

    def unregister(self, client: Any) -> None:
        events = client.meta.events
        events.unregister("before-parameter-build.ec2.TerminateInstances", self.before_parameter_build)
        events.unregister("before-call.ec2.TerminateInstances", self.before_call)

    def before_parameter_build(self, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Decide, from the request's instance ids, whether a deny applies (kept in the call's context)."""
        at = self.elapsed()
        ids = [str(i) for i in params.get("InstanceIds") or []]
        denied = [i for i in ids if any(d.denies(self.pool_of(i), at) for d in self.denials)]
        if denied:
            context[_DENIED] = denied
            self.refused.append({"at": at, "instances": denied})

    def before_call(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        denied = context.get(_DENIED)
        if not denied:
            return None
        message = (f"You are not authorized to perform this operation. User: arn:aws:sts::{self.account}:assumed-role/"
                   f"carpool-disruption/carpool-disruption is not authorized to perform: ec2:TerminateInstances on "
                   f"resource: arn:aws:ec2:us-east-1:{self.account}:instance/{denied[0]} with an explicit deny in a "
                   "service control policy. Encoded authorization failure message: (simulated)")
        parsed = {"Error": {"Code": "UnauthorizedOperation", "Message": message},
                  "ResponseMetadata": {"HTTPStatusCode": 403, "RequestId": "carpool-sim", "HTTPHeaders": {}}}
        return AWSResponse("https://ec2.local/", 403, {}, None), parsed
