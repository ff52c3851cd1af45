"""EventBridge PutEvents delivered to SQS targets without moto's per-rule re-encodings, same messages.

For every entry and every rule of the bus, moto's `EventsBackend.put_events` decodes the entry's
`Detail` again, deep-copies a base message, and `Rule.send_to_targets` then encodes and decodes the whole
event to match the rule's pattern (flattening every field of it), renders the default input template
(the detail encoded, substituted into a template string, the result decoded again) and encodes it once
more as the SQS message body: about ten passes over each pod's detail, ~0.8 ms of CPU an entry, the
largest share of a 10,000-pod burst's local AWS time.

`DirectSqsDelivery` decodes and encodes the detail once per entry. A rule's pattern is evaluated by
moto's own matcher (`EventPattern._does_event_match`) over a view of the event that looks up only the
flattened keys the pattern names, instead of a flattened copy of all of it. A matching rule whose
targets are all SQS queues without an input transformer gets the message body moto would send, built
as the concatenation `json.dumps` produces for the templated event's keys in the template's order.

That body equals moto's only where moto's template rendering is an exact round trip, so the shortcut
is taken only then, and every other (entry, rule) goes through moto's own code exactly as before:

- id, detail-type, source, region and account are non-empty strings without `"`, `\\`, `<` or control
  characters (moto pastes them unescaped into a JSON template and would otherwise fail, or leave a
  placeholder, or replace a placeholder inside them);
- the time is a finite number (moto leaves anything else as unparseable template text);
- resources are strings without `<`, the detail is an object whose JSON has no `<` (moto's later
  placeholder replacements could otherwise reach into it);
- a flattened key the pattern names is reached by exactly one path through the event (keys holding dots
  could make two paths collide; moto's flattening then keeps the later one).

What the entries of one call share is worked out once per call (`_Call`): each rule's targets, the
time as moto converts it, the JSON spelling of the envelope's strings, and, for a rule whose pattern reads
nothing but the envelope (source, detail-type, account, region, version: top-level keys, one path each),
its answer per (source, detail-type), which is all such a match depends on. Ten pod events on a bus of
two rules are then two matches, not twenty (~35 µs of the ~110 µs an entry cost).

The events built here are JSON values by construction (decoded from the request, plus moto's numbers and
strings), so moto's encode-decode of the event before matching changes nothing the matcher reads. The
random event and message ids are drawn in the same order; SQS `send_message` is moto's own.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from typing import Any

from carpool.sim.localaws.moto_patches import Internal, MotoInternalChanged, MotoPatch, Replaced

_MODELS = "moto.events.models"
_UTILS = "moto.events.utils"
#: characters that keep a string from being pasted into moto's JSON template as it is
_UNSAFE = re.compile(r'["\\<\x00-\x1f]')
#: moto's base event message, which the shortcut's body and the fallback's message start from
_BASE_EVENT_MESSAGE = {"version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": "",
                       "source": "", "account": "", "time": "", "region": "", "resources": [], "detail": {}}
#: moto's default input template and paths, which the body reproduces
_DEFAULT_TEMPLATE = ('{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
                     '"source": "<source>", "region": "<region>", "resources": <resources>, "detail": <detail>}')
_DEFAULT_PATHS = {"account": "$.account", "detail": "$.detail", "detail-type": "$.detail-type",
                  "source": "$.source", "id": "$.id", "region": "$.region", "resources": "$.resources",
                  "time": "$.time"}
#: stands for the ingestion time in an event being matched, read from the clock only if a pattern asks
_INGESTION_TIME = object()


class _Ambiguous(Exception):
    """A flattened key is reached by more than one path: only moto's flattening decides which wins."""


class _FlatView:
    """`EventPattern._flatten_dict(event)` as far as `_does_event_match` reads it (`get` only): the value
    at a dotted key, found by walking the event instead of flattening all of it."""

    __slots__ = ("_event",)

    def __init__(self, event: dict[str, Any]) -> None:
        self._event = event

    def get(self, key: str, default: Any = None) -> Any:
        found: list[Any] = []
        _walk(self._event, key.split("."), 0, found)
        if len(found) > 1:
            raise _Ambiguous(key)
        if found and found[0] is _INGESTION_TIME:  # read only by a pattern that names it
            from moto.events import models

            return models.unix_time()
        return found[0] if found else default


def _walk(node: dict[str, Any], parts: list[str], start: int, found: list[Any]) -> None:
    """Every value `_flatten_dict` would store at `".".join(parts)` under `node` (non-empty dicts are
    descended into, anything else, empty dicts included, is stored)."""
    for end in range(start + 1, len(parts) + 1):
        name = ".".join(parts[start:end])
        if name not in node:
            continue
        value = node[name]
        nested = isinstance(value, dict) and bool(value)
        if end == len(parts):
            if not nested:
                found.append(value)
        elif nested:
            _walk(value, parts, end, found)


def _safe(value: Any) -> bool:
    return isinstance(value, str) and value != "" and _UNSAFE.search(value) is None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Entry:
    """One valid entry, decoded once: what every rule's shortcut shares."""

    __slots__ = ("detail", "detail_json", "event", "event_id", "resources", "resources_json", "shortcut")

    def __init__(self, event: dict[str, Any], event_id: str, detail: Any) -> None:
        self.event, self.event_id, self.detail = event, event_id, detail
        self.resources = event.get("Resources", [])
        self.detail_json = self.resources_json = ""
        self.shortcut = (isinstance(detail, dict) and _safe(event_id) and event_id.isascii() and _safe(event["DetailType"])
                         and _safe(event["Source"]) and isinstance(self.resources, list)
                         and all(isinstance(r, str) and "<" not in r for r in self.resources))
        if self.shortcut:
            self.detail_json = json.dumps(detail)
            self.resources_json = json.dumps(self.resources) if self.resources else "[]"
            self.shortcut = "<" not in self.detail_json


def _sqs_targets(rule: Any, parse_arn: Any) -> list[tuple[str, Any]] | None:
    """(queue name, message group) per target when every target is an SQS queue taking the default input
    template, else None (the rule goes through moto's `send_to_targets`)."""
    plain = []
    for target in rule.targets:
        if target.get("InputTransformer"):
            return None
        try:
            arn = parse_arn(target["Arn"])
        except Exception:  # moto raises it from send_to_targets, after matching: leave it to moto
            return None
        group_id = target.get("SqsParameters", {}).get("MessageGroupId")
        if arn.service != "sqs" or group_id:
            return None
        plain.append((arn.resource_id, group_id))
    return plain


def _put_events(backend: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """moto's `EventsBackend.put_events` (validation and answers mirrored line by line), delivering each
    (entry, rule) through `_deliver`."""
    from moto.events import models
    from moto.events.exceptions import ValidationException

    if len(events) > 10:
        raise ValidationException(
            "1 validation error detected: "
            "Value '[PutEventsRequestEntry]' at 'entries' failed to satisfy constraint: "
            "Member must have length less than or equal to 10"
        )
    call = _Call(backend)
    entries: list[dict[str, Any]] = []
    for event in events:
        if not event.get("Source"):
            entries.append({"ErrorCode": "InvalidArgument",
                            "ErrorMessage": "Parameter Source is not valid. Reason: Source is a required argument."})
        elif not event.get("DetailType"):
            entries.append({"ErrorCode": "InvalidArgument",
                            "ErrorMessage": "Parameter DetailType is not valid. Reason: DetailType is a required argument."})
        elif not event.get("Detail"):
            entries.append({"ErrorCode": "InvalidArgument",
                            "ErrorMessage": "Parameter Detail is not valid. Reason: Detail is a required argument."})
        else:
            try:
                detail = json.loads(event["Detail"])
                if not isinstance(detail, dict):
                    warnings.warn(f"EventDetail should be of type dict - types such as {type(detail)} are ignored by AWS",
                                  stacklevel=2)
            except ValueError:
                entries.append({"ErrorCode": "MalformedDetail", "ErrorMessage": "Detail is malformed."})
                continue
            event_id = str(models.random.uuid4())
            entries.append({"EventId": event_id})
            event_bus = call.bus(event.get("EventBusName"))
            entry = _Entry(event, event_id, detail)
            for rule in event_bus.rules.values():
                _deliver(call, rule, entry)
    return entries


#: the event's top-level keys that hold the same value for every rule and every entry of one detail-type
#: and source in a call: a pattern that names no other key matches them all alike
_ENVELOPE = frozenset({"version", "detail-type", "source", "account", "region"})


def _reads_envelope_only(pattern: Any, prefix: str = "") -> bool:
    """Whether `EventPattern._does_event_match` over `pattern` reads flattened keys of `_ENVELOPE` only
    (anything but plain nesting, filter lists and `$or` lists answers False: such a rule is matched per
    entry). A top-level key holds no dot, so each of these keys is reached by one path only."""
    if not isinstance(pattern, dict):
        return True  # moto answers False without reading the event
    for key, value in pattern.items():
        if key == "$or":
            if not isinstance(value, list) or not all(_reads_envelope_only(p, prefix) for p in value):
                return False
            continue
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            if not _reads_envelope_only(value, name):
                return False
        elif isinstance(value, list) and name not in _ENVELOPE:
            return False
    return True


class _Call:
    """What the entries of one PutEvents call share, worked out once per call: the buses by name, each
    rule's SQS targets (rules and targets are read as the call starts delivering to them; a concurrent
    PutTargets applies from the next call, as EventBridge applies rule changes only eventually), each
    envelope-only rule's answer per (source, detail-type), the SQS backends, the time as moto converts it,
    and the JSON spelling of the envelope's strings."""

    __slots__ = ("backend", "plain_backend", "region_json", "_buses", "_plans", "_matches", "_iso", "_quoted",
                 "_queues")

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.plain_backend = _safe(backend.account_id) and _safe(backend.region_name)
        self.region_json = json.dumps(backend.region_name)
        self._buses: dict[Any, Any] = {}
        self._plans: dict[int, tuple[Any, list[tuple[str, Any]] | None, bool]] = {}
        self._matches: dict[tuple[int, str, str], bool] = {}
        self._iso: dict[float, str] = {}
        self._quoted: dict[str, str] = {}
        self._queues: dict[tuple[str, str], Any] = {}

    def bus(self, name: Any) -> Any:
        """moto's lookup of the entry's bus (an unknown bus raises as moto raises, each time)."""
        found = self._buses.get(name)
        if found is None:
            backend = self.backend
            found = self._buses[name] = backend.describe_event_bus(backend._normalize_event_bus_arn(name))
        return found

    def plan(self, rule: Any) -> tuple[list[tuple[str, Any]] | None, bool]:
        """The rule's SQS targets (None: moto delivers) and whether its pattern reads the envelope only."""
        known = self._plans.get(id(rule))
        if known is None:  # the rule is kept with its plan: its id stays its own for the call
            from moto.events import models

            targets = _sqs_targets(rule, models.parse_arn)
            known = self._plans[id(rule)] = (rule, targets, _reads_envelope_only(rule.event_pattern.get_pattern()))
        return known[1], known[2]

    def matches(self, rule: Any, envelope_only: bool, entry: _Entry, time: float) -> bool:
        """moto's matcher for `entry` (raises `_Ambiguous` as `_FlatView` does); a rule whose pattern reads
        the envelope only is matched once per (source, detail-type) in the call."""
        pattern = rule.event_pattern.get_pattern()
        if not pattern:
            return True
        event, backend = entry.event, self.backend
        if not envelope_only:
            message = {"version": "0", "id": entry.event_id, "detail-type": event["DetailType"],
                       "source": event["Source"], "account": backend.account_id, "time": time,
                       "region": backend.region_name, "resources": entry.resources, "detail": entry.detail,
                       "ingestion-time": _INGESTION_TIME}
            return bool(rule.event_pattern._does_event_match(_FlatView(message), pattern))
        key = (id(rule), event["Source"], event["DetailType"])
        known = self._matches.get(key)
        if known is None:
            envelope = {"version": "0", "detail-type": event["DetailType"], "source": event["Source"],
                        "account": backend.account_id, "region": backend.region_name}
            known = self._matches[key] = bool(rule.event_pattern._does_event_match(envelope, pattern))
        return known

    def iso(self, time: float) -> str:
        """moto's `_send_to_sqs_queue` conversion of the event's time, as JSON."""
        seconds = float(time)
        known = self._iso.get(seconds)
        if known is None:
            from moto.events import models

            iso = models.iso_8601_datetime_without_milliseconds(models.utcfromtimestamp(seconds))  # type: ignore[arg-type]
            known = self._iso[seconds] = json.dumps(iso)
        return known

    def quoted(self, text: str) -> str:
        known = self._quoted.get(text)
        if known is None:
            known = self._quoted[text] = json.dumps(text)
        return known

    def sqs(self, account: str, region: str) -> Any:
        known = self._queues.get((account, region))
        if known is None:
            from moto.sqs import sqs_backends

            known = self._queues[(account, region)] = sqs_backends[account][region]
        return known


def _deliver(call: _Call, rule: Any, entry: _Entry) -> None:
    backend, event = call.backend, entry.event
    targets, envelope_only = call.plan(rule) if entry.shortcut else (None, False)
    if "Time" in event:
        time = event["Time"]
    else:
        from moto.events import models

        time = models.unix_time()
    if targets is None or not _number(time) or not call.plain_backend:
        _moto_delivery(backend, rule, event, entry.event_id)
        return
    try:
        matches = call.matches(rule, envelope_only, entry, time)
    except _Ambiguous:
        _moto_delivery(backend, rule, event, entry.event_id)
        return
    if not matches:
        return
    body = (f'{{"id": "{entry.event_id}", "time": {call.iso(time)}, "version": "0", '
            f'"detail-type": {call.quoted(event["DetailType"])}, "source": {call.quoted(event["Source"])}, '
            f'"region": {call.region_json}, "resources": {entry.resources_json}, '
            f'"detail": {entry.detail_json}}}')
    queues = call.sqs(rule.account_id, rule.region_name)
    for queue_name, group_id in targets:
        queues.send_message(queue_name=queue_name, message_body=body, group_id=group_id)


def _moto_delivery(backend: Any, rule: Any, event: dict[str, Any], event_id: str) -> None:
    """moto's own loop body for one (entry, rule)."""
    import copy

    from moto.events import models

    event_msg = copy.deepcopy(models._BASE_EVENT_MESSAGE)
    event_msg["id"] = event_id
    event_msg["detail-type"] = event["DetailType"]
    event_msg["source"] = event["Source"]
    event_msg["account"] = backend.account_id
    event_msg["time"] = event.get("Time", models.unix_time())
    event_msg["region"] = backend.region_name
    event_msg["resources"] = event.get("Resources", [])
    event_msg["detail"] = json.loads(event["Detail"])
    event_msg["ingestion-time"] = models.unix_time()
    rule.send_to_targets(event_msg)


class DirectSqsDelivery(MotoPatch):
    """PutEvents decodes each entry's detail once and sends matching SQS targets the body moto would
    (see the module docstring); anything else goes through moto's own delivery."""

    replaces = (Internal(_MODELS, "EventsBackend.put_events", "c56f6ac1f932c70d"),)
    relies_on = (
        Internal(_MODELS, "Rule.send_to_targets", "472e002e2dab8a59"),
        Internal(_MODELS, "Rule._send_to_sqs_queue", "026c873dd0091781"),
        Internal(_MODELS, "EventPattern.matches_event", "3e71eb7ff5903b50"),
        Internal(_MODELS, "EventPattern._flatten_dict", "26dca5bdb2739a2c"),
        Internal(_MODELS, "EventPattern._does_event_match", "3c96a8f9478ba99a"),
        Internal(_MODELS, "EventPattern._does_item_match_filters", "9bad5e597eeef258"),
        Internal(_MODELS, "EventPattern._does_item_match_named_filter", "0f01aab702fccc87"),
        Internal(_UTILS, "EventTemplateParser", "91e77e4ff0b60f20"),
    )

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.events import models, utils

        if (utils._BASE_EVENT_MESSAGE != _BASE_EVENT_MESSAGE
                or utils.EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE != _DEFAULT_TEMPLATE
                or utils.EventTemplateParser.DEFAULT_EVENT_INPUT_PATHS_MAP != _DEFAULT_PATHS):
            raise MotoInternalChanged(f"{cls.__name__}: moto's base event message or default input template "
                                      "changed; review the patch against moto.events.utils")
        original = models.EventsBackend.__dict__["put_events"]
        models.EventsBackend.put_events = _put_events  # type: ignore[method-assign,assignment]
        return [(models.EventsBackend, "put_events", original)]
