"""Every AWS request carpool's handlers make in a simulation, and what IAM checks for each of them.

Local AWS (moto) enforces no IAM, so a policy that refuses carpool's own launches would pass every other
test. This module closes that gap in two steps:

1. `RequestRecorder` hooks botocore's `before-parameter-build` event on the session carpool's adapters
   build their clients from (`carpool.adapters.aws.session`), so any request a handler makes is seen,
   including APIs added later, without a list to maintain. Requests are attributed to the function being
   invoked; the simulation's own calls (kubelets polling EC2, reclaiming spot instances) happen between
   invocations and are not recorded. For resources a request names (instances to terminate, launch
   templates to launch from or delete, subnets, images), the tags they carry *at that moment* are read
   from local EC2 with a separate client, since IAM evaluates `aws:ResourceTag` against the stored tags.
2. `authorizations()` turns a recorded call into what AWS authorizes for it, following EC2's documented
   model: RunInstances/CreateFleet are authorized once per resource they create (with the tags requested
   for that resource type: the request's tag specifications over the launch template's) and once per
   existing resource they use (with that resource's own tags); tags given on create are also authorized
   as `ec2:CreateTags` with `ec2:CreateAction`; a launch template naming an instance profile implies
   `iam:PassRole` of its role to `ec2.amazonaws.com`, and a volume encrypted with a customer-managed KMS
   key the key actions EBS documents for the launching identity (`EBS_KMS_ACTIONS`). DynamoDB transactions are authorized per item
   action, EventBridge per bus, SSM per parameter.

Each function also gets its own process-level caches (`isolate`): in Lambda every function is a separate
process that fills its own catalog, AMI and subnet caches, so a request one function makes must not be
saved by another function's cache, or the recorded requests would under-state what that function needs.

`python -m carpool.sim.run.record SCENARIO.yaml --out FILE` runs one scenario and writes its requests, plus
the production requests that never reach local AWS (`production_only_calls`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from carpool import environment
from carpool.sim.localaws import lambda_runtime

#: The EC2 resource types an ID prefix names (CreateTags/DeleteTags take bare IDs).
_ID_TYPES = {
    "i": "instance", "lt": "launch-template", "vol": "volume", "eni": "network-interface", "fleet": "fleet",
    "sir": "spot-instances-request", "subnet": "subnet", "sg": "security-group", "ami": "image",
    "snap": "snapshot", "vpc": "vpc",
}  # fmt: skip
#: Resource types whose ARN carries no account (public images and their snapshots).
_ACCOUNTLESS = {"image", "snapshot"}
#: What a launch creates besides the fleet; a spot request only when the capacity is spot.
_LAUNCHED = ("instance", "volume", "network-interface")
SPOT_REQUEST = "spot-instances-request"
#: What the identity launching a volume encrypted with a customer-managed key must be allowed on the key
#: (Amazon EBS User Guide, "Requirements for Amazon EBS encryption"): EC2 creates a grant for the volume
#: (`kms:GrantIsForAWSResource`) and uses the key on the caller's behalf (`kms:ViaService`).
EBS_KMS_ACTIONS = ("kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
                   "kms:ReEncryptTo")
#: DynamoDB transaction parts and the IAM action each is authorized as.
_TRANSACT_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
#: Requests IAM never denies (they reveal only the caller's own identity).
_UNAUTHORIZED = {("sts", "GetCallerIdentity")}
_HOOK_ID = "carpool-sim-requests"


class Check(BaseModel):
    """One authorization IAM makes for a request: an action on one resource with its context keys."""

    action: str
    resource: str
    context: dict[str, list[str]] = Field(default_factory=dict)


class AwsCall(BaseModel):
    """One distinct request of one function, with what local AWS said about the resources it names."""

    function: str
    service: str
    operation: str
    region: str
    account: str = lambda_runtime.ACCOUNT
    params: dict[str, Any] = Field(default_factory=dict)
    facts: dict[str, Any] = Field(default_factory=dict)
    count: int = 1


class Recording(BaseModel):
    """The requests of one simulation run, and the names of the resources the stack would have created."""

    scenario: str
    cluster: str
    region: str
    account: str = lambda_runtime.ACCOUNT
    environment: dict[str, str] = Field(default_factory=dict)
    calls: list[AwsCall] = Field(default_factory=list)

    def functions(self) -> set[str]:
        return {c.function for c in self.calls}


# -- authorization model --------------------------------------------------------------------------------
def ec2_arn(region: str, account: str, rtype: str, rid: str) -> str:
    owner = "" if rtype in _ACCOUNTLESS else account
    return f"arn:aws:ec2:{region}:{owner}:{rtype}/{rid}"


def _tag_context(prefix: str, tags: Mapping[str, str]) -> dict[str, list[str]]:
    return {f"{prefix}/{k}": [v] for k, v in tags.items()}


def _existing(action: str, resource: Mapping[str, Any], base: Mapping[str, list[str]]) -> Check:
    """An existing resource: its own tags as `aws:ResourceTag` (and EC2's `ec2:ResourceTag` alias)."""
    tags = resource.get("tags") or {}
    context = {**base, **_tag_context("aws:ResourceTag", tags), **_tag_context("ec2:ResourceTag", tags)}
    return Check(action=action, resource=str(resource["arn"]), context=context)


def _created(action: str, arn: str, tags: Mapping[str, str], base: Mapping[str, list[str]]) -> Check:
    """A resource the request creates: the tags requested for it as `aws:RequestTag` and `aws:TagKeys`."""
    context = dict(base)
    if tags:
        context.update(_tag_context("aws:RequestTag", tags))
        context["aws:TagKeys"] = sorted(tags)
    return Check(action=action, resource=arn, context=context)


def tag_specifications(specs: Any) -> dict[str, dict[str, str]]:
    """TagSpecifications (request or launch-template shape) as resource type -> tags."""
    out: dict[str, dict[str, str]] = {}
    for spec in specs or []:
        tags = out.setdefault(str(spec.get("ResourceType")), {})
        tags.update({str(t["Key"]): str(t["Value"]) for t in spec.get("Tags") or []})
    return out


def authorizations(call: AwsCall) -> list[Check]:
    """What IAM authorizes for `call` (see the module docstring for the model)."""
    if (call.service, call.operation) in _UNAUTHORIZED:
        return []
    base = {"aws:RequestedRegion": [call.region]}
    model = _MODELS.get((call.service, call.operation))
    if model is not None:
        return model(call, base)
    if call.service == "dynamodb":
        return _dynamodb(call, base)
    named = call.facts.get("resources")
    if named:  # an API naming resources by ID, each checked with its own tags
        return [_existing(f"{call.service}:{call.operation}", r, base) for r in named]
    return [Check(action=f"{call.service}:{call.operation}", resource=call.facts.get("arn", "*"), context=base)]


def _create_fleet(call: AwsCall, base: Mapping[str, list[str]]) -> list[Check]:
    p, f = call.params, call.facts
    spot = (p.get("TargetCapacitySpecification") or {}).get("DefaultTargetCapacityType") == "spot"
    created = [*_LAUNCHED, *([SPOT_REQUEST] if spot else [])]
    requested = tag_specifications(p.get("TagSpecifications"))
    checks: list[Check] = []
    arn = lambda rtype: ec2_arn(call.region, call.account, rtype, "*")  # noqa: E731
    fleet_tags = requested.get("fleet", {})
    checks.append(_created("ec2:CreateFleet", arn("fleet"), fleet_tags, base))
    if fleet_tags:
        checks.append(_created("ec2:CreateTags", arn("fleet"), fleet_tags, {**base, "ec2:CreateAction": ["CreateFleet"]}))
    # An instant fleet launches with the caller's own permissions: every launch is a RunInstances too.
    for template in f.get("launchTemplates", {}).values():
        from_template = tag_specifications(template.get("tagSpecifications"))
        inputs = [template, *template.get("inputs", [])]
        for rtype in created:
            tags = {**from_template.get(rtype, {}), **requested.get(rtype, {})}
            checks += [_created(action, arn(rtype), tags, base) for action in ("ec2:CreateFleet", "ec2:RunInstances")]
            if tags:  # which create action EC2 names for these is not documented: both must be allowed
                checks += [_created("ec2:CreateTags", arn(rtype), tags, {**base, "ec2:CreateAction": [create]})
                           for create in ("CreateFleet", "RunInstances")]
        for action in ("ec2:CreateFleet", "ec2:RunInstances"):
            checks += [_existing(action, r, base) for r in [*inputs, *f.get("subnets", [])]]
        role = template.get("role")
        if role:
            checks.append(Check(action="iam:PassRole", resource=role,
                                context={**base, "iam:PassedToService": ["ec2.amazonaws.com"]}))
        checks += _ebs_kms(template.get("kmsKeys") or [], call.region, base)
    return checks


def _ebs_kms(keys: list[str], region: str, base: Mapping[str, list[str]]) -> list[Check]:
    """A launch's volumes encrypted with these keys (ARNs): the grant EC2 creates, and its use of the keys."""
    checks = []
    for key in keys:
        checks.append(Check(action="kms:CreateGrant", resource=key,
                            context={**base, "kms:GrantIsForAWSResource": ["true"]}))
        via = {**base, "kms:ViaService": [f"ec2.{region}.amazonaws.com"]}
        checks += [Check(action=action, resource=key, context=via) for action in EBS_KMS_ACTIONS]
    return checks


def kms_key_arn(key: str, region: str, account: str) -> str:
    """A `KmsKeyId` as EC2 takes it (a key ARN, or a bare key id of the caller's account) as a key ARN."""
    return key if key.startswith("arn:") else f"arn:aws:kms:{region}:{account}:key/{key}"


def _create_launch_template(call: AwsCall, base: Mapping[str, list[str]]) -> list[Check]:
    tags = tag_specifications(call.params.get("TagSpecifications")).get("launch-template", {})
    arn = ec2_arn(call.region, call.account, "launch-template", "*")
    checks = [_created("ec2:CreateLaunchTemplate", arn, tags, base)]
    if tags:
        checks.append(_created("ec2:CreateTags", arn, tags, {**base, "ec2:CreateAction": ["CreateLaunchTemplate"]}))
    return checks


def _tagging(call: AwsCall, base: Mapping[str, list[str]]) -> list[Check]:
    """CreateTags/DeleteTags on existing resources: their tags, plus the tags being written."""
    tags = {str(t["Key"]): str(t.get("Value", "")) for t in call.params.get("Tags") or []}
    request = {**base, **_tag_context("aws:RequestTag", tags), "aws:TagKeys": sorted(tags)} if tags else dict(base)
    return [_existing(f"ec2:{call.operation}", r, request) for r in call.facts.get("resources", [])]


def _put_events(call: AwsCall, base: Mapping[str, list[str]]) -> list[Check]:
    return [Check(action="events:PutEvents", resource=arn, context=dict(base)) for arn in call.facts.get("buses", [])]


def _dynamodb(call: AwsCall, base: Mapping[str, list[str]]) -> list[Check]:
    return [Check(action=f"dynamodb:{action}", resource=arn, context=dict(base))
            for action, arn in call.facts.get("items", [])]


_MODELS: dict[tuple[str, str], Callable[[AwsCall, Mapping[str, list[str]]], list[Check]]] = {
    ("ec2", "CreateFleet"): _create_fleet,
    ("ec2", "CreateLaunchTemplate"): _create_launch_template,
    ("ec2", "CreateTags"): _tagging,
    ("ec2", "DeleteTags"): _tagging,
    ("events", "PutEvents"): _put_events,
}


# -- recording ------------------------------------------------------------------------------------------
RECORD_ENV = "CARPOOL_RECORD_REQUESTS"


def recording_wanted() -> bool:
    """Whether a simulation that was not told records requests. Recording is for the IAM check
    (`carpool.sim.run.record` asks for it; e2e runs with `CARPOOL_REQUESTS_DIR` or `CARPOOL_RECORD_REQUESTS`
    set in the process environment record too): it reads local EC2 for every request and gives each
    function its own dependencies, which costs a simulation a large share of its time, so other runs skip
    it."""
    return bool(os.environ.get(RECORD_ENV) or os.environ.get("CARPOOL_REQUESTS_DIR"))


class RequestRecorder:
    """Records carpool's AWS requests per function during a simulation (see the module docstring).

    Disabled (`enabled=False`), it records nothing and the functions share one set of dependencies."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.function: str | None = None
        self.calls: dict[str, AwsCall] = {}
        self._facts: _LocalFacts | None = None
        self._deps_factory: Callable[[], Any] | None = None
        self._deps: dict[tuple[str, int], Any] = {}
        self._sessions: list[Any] = []
        #: the account local AWS serves the run in (resource ARNs name it)
        self.account = lambda_runtime.ACCOUNT
        #: the recording `finish` closed the run with
        self.finished: Recording | None = None

    def install(self, account: str = lambda_runtime.ACCOUNT) -> None:
        """Hook the session carpool's adapters build clients from in the running function's environment,
        and any client it already built."""
        self.account = account
        if not self.enabled:
            return
        from carpool.adapters.aws import session

        sess = session.session()
        sess.events.register("before-parameter-build", self._on_request, unique_id=_HOOK_ID)
        for client in session.clients():
            client.meta.events.register("before-parameter-build", self._on_request, unique_id=_HOOK_ID)
        self._sessions.append(sess)
        self._facts = _LocalFacts(environment.current())

    def isolate(self, factory: Callable[[], Any]) -> None:
        """Give each function its own dependencies (and so its own caches), built by `factory`."""
        if self.enabled:
            self._deps_factory = factory

    @contextlib.contextmanager
    def invocation(self, function: str, environment: int = 0) -> Iterator[None]:
        """Attribute requests to `function` while its handler runs, with the dependencies of the execution
        environment running it (built on its first invocation, as a cold start builds them; a new
        environment starts with none of the caches an earlier one filled)."""
        from carpool.app import wiring

        previous = wiring.installed()
        if self._deps_factory is not None:
            key = (function, environment)
            if key not in self._deps:
                self._deps[key] = self._deps_factory()
            wiring.use(self._deps[key])
        self.function = function
        try:
            yield
        finally:
            self.function = None
            if self._deps_factory is not None:
                wiring.use(previous)

    def recording(self, scenario: str, cluster: str, region: str) -> Recording:
        """What was recorded so far, with the names the simulation gave the stack's resources (from the
        running function's environment)."""
        keys = ("CARPOOL_TABLE", "CARPOOL_IDEMPOTENCY_TABLE", "CARPOOL_EVENT_BUS",
                "CARPOOL_NODE_ROLE_ARN", "CARPOOL_INSTANCE_PROFILE")
        env = environment.current()
        return Recording(scenario=scenario, cluster=cluster, region=region, account=self.account,
                         environment={k: env[k] for k in keys if env.get(k)}, calls=list(self.calls.values()))

    def finish(self, scenario: str, cluster: str, region: str, account: str | None = None) -> Recording:
        """Close the run: keep its recording for `recordings()` and stop attributing requests."""
        self.account = account or self.account
        recording = self.finished = self.recording(scenario, cluster, region)
        if self.enabled:
            _FINISHED.append(recording)
        for sess in self._sessions:
            sess.events.unregister("before-parameter-build", unique_id=_HOOK_ID)
        self._sessions.clear()
        self.function = None
        return recording

    # -- the hook ---------------------------------------------------------------------------------------
    def _on_request(self, params: Mapping[str, Any], model: Any, context: Mapping[str, Any] | None = None,
                    **_: Any) -> None:
        function = self.function
        if function is None or self._facts is None:
            return
        service = str(model.service_model.signing_name)
        region = str((context or {}).get("client_region") or environment.get("AWS_REGION", "us-east-1"))
        call = AwsCall(function=function, service=service, operation=str(model.name), region=region,
                       account=self.account)
        self._facts.describe(call, params)
        key = json.dumps([function, service, call.operation,
                          [c.model_dump() for c in authorizations(call)]], sort_keys=True)
        if key in self.calls:
            self.calls[key].count += 1
        else:
            self.calls[key] = call


class _LocalFacts:
    """Fills a call's `params` (what authorization depends on) and `facts` (the named resources, read from
    local AWS with plain clients that are not recorded)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._clients: dict[tuple[str, str], Any] = {}

    def _client(self, service: str, region: str) -> Any:
        """A plain client on the local AWS (endpoint and credentials) of the functions' environment."""
        import boto3

        key = (service, region)
        if key not in self._clients:
            env = self._env
            self._clients[key] = boto3.client(  # type: ignore[call-overload]
                service, region_name=region, endpoint_url=env.get("AWS_ENDPOINT_URL"),
                aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"), aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
                aws_session_token=env.get("AWS_SESSION_TOKEN"))
        return self._clients[key]

    def describe(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        handler = getattr(self, f"_{call.service}_{call.operation}", None) or getattr(self, f"_{call.service}", None)
        if handler is not None:
            handler(call, params)

    # -- EC2 ----------------------------------------------------------------------------------------------
    def _ec2(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        """Describe* and other calls: no resource-level permissions to model."""
        call.params = {k: v for k, v in params.items() if k in ("Filters", "MaxResults")}

    def _ec2_CreateFleet(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        configs = params.get("LaunchTemplateConfigs") or []
        subnets = sorted({o["SubnetId"] for c in configs for o in c.get("Overrides") or [] if o.get("SubnetId")})
        call.params = {
            "Type": params.get("Type"),
            "TargetCapacitySpecification": params.get("TargetCapacitySpecification"),
            "TagSpecifications": params.get("TagSpecifications") or [],
            "LaunchTemplates": [c["LaunchTemplateSpecification"] for c in configs],
            "SubnetIds": subnets,
        }
        templates = {}
        for config in configs:
            spec = config["LaunchTemplateSpecification"]
            name = spec.get("LaunchTemplateName") or spec.get("LaunchTemplateId")
            templates[name] = self._launch_template(call, spec)
        call.facts = {"launchTemplates": templates,
                      "subnets": [self._tagged(call, "subnet", s) for s in subnets]}

    def _ec2_CreateLaunchTemplate(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        data = {k: v for k, v in (params.get("LaunchTemplateData") or {}).items() if k != "UserData"}
        call.params = {"LaunchTemplateName": params.get("LaunchTemplateName"), "LaunchTemplateData": data,
                       "TagSpecifications": params.get("TagSpecifications") or []}

    def _ec2_DeleteLaunchTemplate(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        call.params = {k: params[k] for k in ("LaunchTemplateName", "LaunchTemplateId") if k in params}
        found = self._find_template(call.region, params)
        rid = found["LaunchTemplateId"] if found else str(params.get("LaunchTemplateId") or "unknown")
        tags = _tags(found.get("Tags")) if found else {}
        call.facts = {"resources": [{"arn": ec2_arn(call.region, call.account, "launch-template", rid),
                                     "tags": tags}]}

    def _ec2_TerminateInstances(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        ids = [str(i) for i in params.get("InstanceIds") or []]
        call.params = {"InstanceIds": ids}
        call.facts = {"resources": [self._tagged(call, "instance", i) for i in ids]}

    def _ec2_CreateTags(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        ids = [str(i) for i in params.get("Resources") or []]
        call.params = {"Resources": ids, "Tags": list(params.get("Tags") or [])}
        call.facts = {"resources": [self._tagged(call, _ID_TYPES.get(i.split("-")[0], "unknown"), i) for i in ids]}

    _ec2_DeleteTags = _ec2_CreateTags

    def _launch_template(self, call: AwsCall, spec: Mapping[str, Any]) -> dict[str, Any]:
        found = self._find_template(call.region, spec)
        if not found:
            rid = spec.get("LaunchTemplateId") or "unknown"
            return {"arn": ec2_arn(call.region, call.account, "launch-template", rid), "tags": {}}
        ec2 = self._client("ec2", call.region)
        version = ec2.describe_launch_template_versions(
            LaunchTemplateId=found["LaunchTemplateId"], Versions=[str(spec.get("Version") or "$Latest")]
        )["LaunchTemplateVersions"][0]
        data = version.get("LaunchTemplateData") or {}
        # security groups sit on the network interface when the template has one (associatePublicIPAddress)
        groups = [*(data.get("SecurityGroupIds") or []),
                  *(g for ni in data.get("NetworkInterfaces") or [] for g in ni.get("Groups") or [])]
        inputs = [self._tagged(call, "security-group", g) for g in groups]
        image = data.get("ImageId")
        if image:
            inputs += [self._tagged(call, "image", image),
                       *[self._tagged(call, "snapshot", s) for s in self._snapshots(call.region, image)]]
        profile = (data.get("IamInstanceProfile") or {}).get("Name") or (data.get("IamInstanceProfile") or {}).get("Arn")
        return {
            "arn": ec2_arn(call.region, call.account, "launch-template", found["LaunchTemplateId"]),
            "tags": _tags(found.get("Tags")),
            "tagSpecifications": data.get("TagSpecifications") or [],
            "inputs": inputs,
            "role": self._role_of_profile(call, profile) if profile else None,
            "kmsKeys": sorted({kms_key_arn(str(m["Ebs"]["KmsKeyId"]), call.region, call.account)
                               for m in data.get("BlockDeviceMappings") or [] if (m.get("Ebs") or {}).get("KmsKeyId")}),
        }

    def _role_of_profile(self, call: AwsCall, profile: str) -> str:
        """The role an instance profile holds, as EC2 passes it: the stack's profile holds the node role of
        `CARPOOL_NODE_ROLE_ARN`; any other (one made for a node class's `role`, or a user's) is looked up in
        local IAM, and one that does not exist passes a role no policy grants."""
        name = profile.rsplit("/", 1)[-1]
        role = environment.get("CARPOOL_NODE_ROLE_ARN")
        if name == environment.get("CARPOOL_INSTANCE_PROFILE") and role:
            return role
        try:
            found = self._client("iam", call.region).get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        except Exception:  # no such profile (NoSuchEntity) in local IAM
            found = {}
        roles = found.get("Roles") or []
        return str(roles[0]["Arn"]) if roles else f"arn:aws:iam::{lambda_runtime.ACCOUNT}:role/unknown-role-of-profile-{name}"

    def _find_template(self, region: str, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        ec2 = self._client("ec2", region)
        try:
            if spec.get("LaunchTemplateId"):
                found = ec2.describe_launch_templates(LaunchTemplateIds=[spec["LaunchTemplateId"]])
            else:
                found = ec2.describe_launch_templates(LaunchTemplateNames=[spec["LaunchTemplateName"]])
        except Exception:  # gone already: nothing to read, authorized without tags
            return None
        templates = found.get("LaunchTemplates") or []
        return dict(templates[0]) if templates else None

    def _snapshots(self, region: str, image_id: str) -> list[str]:
        try:
            images = self._client("ec2", region).describe_images(ImageIds=[image_id]).get("Images") or []
        except Exception:
            return []
        return [str(m["Ebs"]["SnapshotId"]) for i in images for m in i.get("BlockDeviceMappings") or []
                if (m.get("Ebs") or {}).get("SnapshotId")]

    def _tagged(self, call: AwsCall, rtype: str, rid: str) -> dict[str, Any]:
        """The resource's ARN and the tags local EC2 holds for it now (none when it does not exist)."""
        try:
            answer = self._client("ec2", call.region).describe_tags(Filters=[{"Name": "resource-id", "Values": [rid]}])
            tags = _tags(answer.get("Tags"))
        except Exception:
            tags = {}
        return {"arn": ec2_arn(call.region, call.account, rtype, rid), "tags": tags}

    # -- other services -------------------------------------------------------------------------------------
    def _dynamodb(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        def table(name: str) -> str:
            return f"arn:aws:dynamodb:{call.region}:{call.account}:table/{name}"

        items: list[tuple[str, str]] = []
        if call.operation == "TransactWriteItems":
            for item in params.get("TransactItems") or []:
                for part, action in _TRANSACT_ACTIONS.items():
                    if part in item:
                        items.append((action, table(item[part]["TableName"])))
        elif call.operation == "TransactGetItems":
            items += [("GetItem", table(i["Get"]["TableName"])) for i in params.get("TransactItems") or []]
        elif call.operation in ("BatchGetItem", "BatchWriteItem"):
            items += [(call.operation, table(name)) for name in params.get("RequestItems") or {}]
        elif params.get("TableName"):
            arn = table(params["TableName"])
            if params.get("IndexName"):
                arn += f"/index/{params['IndexName']}"
            items.append((call.operation, arn))
        else:
            items.append((call.operation, "*"))
        call.params = {"items": sorted(set(items))}
        call.facts = {"items": sorted(set(items))}

    def _events_PutEvents(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        buses = set()
        for entry in params.get("Entries") or []:
            bus = str(entry.get("EventBusName") or "default")
            buses.add(bus if bus.startswith("arn:") else f"arn:aws:events:{call.region}:{call.account}:event-bus/{bus}")
        call.params = {"EventBusNames": sorted(buses)}
        call.facts = {"buses": sorted(buses)}

    def _ssm(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        names = [params["Name"]] if "Name" in params else list(params.get("Names") or [])
        if "Path" in params:
            names.append(params["Path"])
        call.params = {"Names": names}
        arns = [_parameter_arn(call.region, call.account, str(n)) for n in names]
        call.facts = {"resources": [{"arn": a, "tags": {}} for a in arns]} if arns else {}

    def _eks(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        call.params = {k: params[k] for k in ("name",) if k in params}
        if "name" in params:
            call.facts = {"arn": f"arn:aws:eks:{call.region}:{call.account}:cluster/{params['name']}"}

    def _sqs(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        url = str(params.get("QueueUrl") or "")
        call.params = {"QueueUrl": url}
        if url:
            name = urlparse(url).path.rstrip("/").rsplit("/", 1)[-1]
            call.facts = {"arn": f"arn:aws:sqs:{call.region}:{call.account}:{name}"}

    def _pricing(self, call: AwsCall, params: Mapping[str, Any]) -> None:
        call.params = {k: params[k] for k in ("ServiceCode",) if k in params}


def _tags(tags: Any) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags or []}


def _parameter_arn(region: str, account: str, name: str) -> str:
    """Parameter ARNs drop the name's leading slash; AWS's public parameters have no account."""
    if name.startswith("arn:"):
        return name
    owner = "" if name.startswith("/aws/service/") else account
    return f"arn:aws:ssm:{region}:{owner}:parameter/{name.lstrip('/')}"


# -- runs -----------------------------------------------------------------------------------------------
_FINISHED: list[Recording] = []


def recordings() -> list[Recording]:
    """The recordings of every simulation finished in this process, oldest first."""
    return list(_FINISHED)


def production_only_calls(cluster: str, region: str, catalog_builders: set[str],
                          account: str | None = None) -> list[AwsCall]:
    """The requests the simulation cannot see because they never leave the process against local AWS,
    made here by the same production code against a fresh local AWS:

    - every function's cold start without a configured endpoint and CA describes the cluster
      (`carpool.adapters.aws.eks.complete`; the simulation hands its simulated cluster in instead);
    - every function that builds the instance-type catalog asks the Pricing API for on-demand prices
      (`carpool.adapters.aws.pricing`, which skips the call when every client points at local AWS, as it
      has no Pricing API; here it is pointed there explicitly, the request fails and the code falls back).
    """
    from carpool.adapters.aws import eks, session
    from carpool.adapters.aws.pricing import OnDemandPrices
    from carpool.app.settings import Settings
    from carpool.sim.localaws.server import LocalAws

    recorder = RequestRecorder()
    with LocalAws(cluster=cluster, region=region, account=account, export=False) as aws:
        env = ChainMap({"AWS_ENDPOINT_URL_PRICING": aws.endpoint}, aws.env)
        with environment.using(env):
            # the account has the cluster, as a deployed one does: DescribeCluster answers (not recorded)
            aws.client("eks").create_cluster(name=cluster, roleArn=f"arn:aws:iam::{aws.account_id}:role/eks",
                                             resourcesVpcConfig={"subnetIds": []})
            try:
                recorder.install(aws.account)
                settings = dataclasses.replace(Settings.from_env(), cluster_name=cluster, cluster_endpoint="",
                                               cluster_ca="")
                for name in lambda_runtime.HANDLERS:
                    with recorder.invocation(name), _quiet("carpool"):
                        eks.complete(settings)
                        if name in catalog_builders:
                            OnDemandPrices(region=region).prices()
                calls = list(recorder.calls.values())
            finally:
                for sess in recorder._sessions:
                    sess.events.unregister("before-parameter-build", unique_id=_HOOK_ID)
                session.reset(env)
    return calls


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    import logging

    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)
