"""The rules Karpenter's CRDs state as CEL (`x-kubernetes-validations`), written as Python predicates.

Why Python and not a CEL library: every function checks its config at cold start, and parsing some sixty
CEL programs there would cost more than the whole rest of the check (a pure-Python CEL parser takes
milliseconds a rule); the rules are short and few. Each predicate is found by the rule's own text, so the
message a user reads is the CRD's, and `tests/unit/api/test_crd_schema_walk.py` fails on any rule of the
shipped CRDs that has no predicate here (a Karpenter upgrade that adds one is noticed, never skipped).

Rules of a repeated shape (a restricted label domain, a restricted tag, an alias family's `amiFamily`) are
read from the rule text by `_SHAPES`; the others are listed by their exact text in `_EXACT`. Transition
rules (those reading `oldSelf`) only apply to updates, and carpool only ever sees an object as created,
so they hold by definition (`applies`). A predicate that raises (CEL's `int("abc")`) is a failed rule, as
in the API server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["Predicate", "applies", "predicate"]

#: a rule's check of the value at the node the rule is attached to (defaults applied)
Predicate = Callable[[Any], bool]
_QUOTED = re.compile(r"""["']([^"']*)["']""")


def _has(obj: Any, key: str) -> bool:
    """CEL's `has(obj.key)`: set and not null (the API server prunes nulls before validating)."""
    return isinstance(obj, Mapping) and obj.get(key) is not None


def _domain(key: str) -> str:
    """CEL `key.find("^([^/]+)")`: the text before the first "/" ("" when the key starts with one)."""
    match = re.match(r"[^/]+", key)
    return match.group(0) if match else ""


def _quoted(text: str) -> list[str]:
    return _QUOTED.findall(text)


def _keys(value: Any) -> list[str]:
    """`self.all(x, ...)` over a map iterates its keys, over a list its items."""
    return list(value) if isinstance(value, Mapping | list) else []


# -- rules of a repeated shape, read from their text -------------------------------------------------------
def _allowed_or_outside(match: re.Match[str]) -> Predicate:
    allowed, domain = frozenset(_quoted(match["allowed"])), match["domain"]
    if match["all"]:
        return lambda value: all(k in allowed or not _domain(k).endswith(domain) for k in _keys(value))
    return lambda value: value in allowed or not _domain(value).endswith(domain)


def _not_equal(match: re.Match[str]) -> Predicate:
    banned = match["value"]
    if match["all"]:
        return lambda value: all(k != banned for k in _keys(value))
    return lambda value: value != banned


def _no_prefix(match: re.Match[str]) -> Predicate:
    prefix = match["prefix"]
    return lambda value: all(not k.startswith(prefix) for k in _keys(value))


def _keys_among(match: re.Match[str]) -> Predicate:
    allowed = frozenset(_quoted(match["allowed"]))
    return lambda value: all(k in allowed for k in _keys(value))


def _alias_family(match: re.Match[str]) -> Predicate:
    alias_family, family = match["alias"], match["family"]

    def check(spec: Any) -> bool:
        if not _has(spec, "amiFamily"):
            return True
        uses = any(_has(t, "alias") and t["alias"].split("@", 1)[0] == alias_family
                   for t in spec.get("amiSelectorTerms") or [])
        return not uses or spec["amiFamily"] in ("Custom", family)

    return check


_SHAPES: Final[tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Predicate]], ...]] = (
    (re.compile(r"""^(?P<all>self\.all\(x, )?(?:x|self) in \[(?P<allowed>[^\]]*)\] \|\| """
                r"""!(?:x|self)\.find\("\^\(\[\^/\]\+\)"\)\.endsWith\("(?P<domain>[^"]+)"\)\)?$"""),
     _allowed_or_outside),
    (re.compile(r"""^(?P<all>self\.all\((?P<v>\w+), )?(?(all)(?P=v)|self) ?!= ?(?P<q>["'])(?P<value>[^"']*)(?P=q)\)?$"""),
     _not_equal),
    (re.compile(r"""^self\.all\((?P<v>\w+), !(?P=v)\.startsWith\('(?P<prefix>[^']+)'\) ?\)$"""), _no_prefix),
    (re.compile(r"""^self\.all\(x, x in \[(?P<allowed>[^\]]*)\]\)$"""), _keys_among),
    (re.compile(r"""^self\.all\(x, (?P<allowed>x==['"][^'"]+['"](?: \|\| x==['"][^'"]+['"])*)\)$"""), _keys_among),
    (re.compile(r"""^!has\(self\.amiFamily\) \|\| \(self\.amiSelectorTerms\.exists\(x, has\(x\.alias\) && """
                r"""x\.alias\.find\('\^\[\^@\]\+'\) == '(?P<alias>\w+)'\) \? \(self\.amiFamily == 'Custom' \|\| """
                r"""self\.amiFamily == '(?P<family>\w+)'\) : true\)$"""),
     _alias_family),
)


# -- the other rules, by their exact text ------------------------------------------------------------------
def _int(text: Any) -> int:
    """CEL `int(string)`: a base-10 integer, or an error."""
    if not isinstance(text, str) or not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)
    return int(text)


def _values(x: Any) -> list[Any]:
    return list(x.get("values") or [])


def _bounded_single_integer(x: Any) -> bool:
    if x.get("operator") not in ("Gt", "Lt", "Gte", "Lte"):
        return True
    values = _values(x)
    return len(values) == 1 and _int(values[0]) >= 0


def _one_card_device_pair(items: list[Any]) -> bool:
    def same(x: Any, y: Any, *keys: str) -> bool:
        return all(x.get(k) == y.get(k) for k in keys)

    return all(
        sum(1 for y in items if same(x, y, "networkCardIndex", "deviceIndex")) == 1
        and (x.get("interfaceType") != "efa-only"
             or sum(1 for y in items if same(x, y, "networkCardIndex") and y.get("interfaceType") == "efa-only") == 1)
        for x in items
    )


def _exactly_one(spec: Any, *keys: str) -> bool:
    return sum(1 for k in keys if _has(spec, k)) == 1


_EXACT_TEXT: Final[dict[str, Predicate]] = {
    # NodePool
    "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))":
        lambda s: not _has(s, "replicas") or not s.get("limits") or set(s["limits"]) == {"nodes"},
    "!has(self.replicas) || !has(self.weight)": lambda s: not (_has(s, "replicas") and _has(s, "weight")),
    "self.all(x, has(x.schedule) == has(x.duration))":
        lambda items: all(_has(x, "schedule") == _has(x, "duration") for x in items),
    "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)":
        lambda items: all(x.get("operator") != "In" or _values(x) for x in items),
    "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? "
    "(x.values.size() == 1 && int(x.values[0]) >= 0) : true)":
        lambda items: all(_bounded_single_integer(x) for x in items),
    "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)":
        lambda items: all(not (x.get("operator") == "In" and _has(x, "minValues")) or len(_values(x)) >= x["minValues"]
                          for x in items),
    # EC2NodeClass
    "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))":
        lambda s: _exactly_one(s, "role", "instanceProfile"),
    "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)":
        lambda s: any(_has(t, "alias") for t in s.get("amiSelectorTerms") or []) or _has(s, "amiFamily"),
    "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))":
        lambda items: all(any(_has(x, k) for k in ("tags", "id", "name", "alias", "ssmParameter")) for x in items),
    "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))":
        lambda items: not any(_has(x, "id") and any(_has(x, k) for k in ("alias", "tags", "name", "owner"))
                              for x in items),
    "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))":
        lambda items: not any(_has(x, "alias") and any(_has(x, k) for k in ("id", "tags", "name", "owner"))
                              for x in items),
    "!(self.exists(x, has(x.alias)) && self.size() != 1)":
        lambda items: not (any(_has(x, "alias") for x in items) and len(items) != 1),
    "self.matches('^[a-zA-Z0-9]+@.+$')": lambda alias: re.search(r"^[a-zA-Z0-9]+@.+\Z", alias, re.S) is not None,
    "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']":
        lambda alias: alias.split("@")[0] in ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"),
    "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true":
        lambda alias: alias.split("@")[0] not in ("windows2019", "windows2022", "windows2025")
        or alias.split("@")[1] == "latest",
    "self.all(k, k != '' && self[k] != '')": lambda tags: all(k != "" and v != "" for k, v in tags.items()),
    "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1":
        lambda items: sum(1 for x in items if x.get("rootVolume") is True) <= 1,
    "has(self.snapshotID) || has(self.volumeSize)": lambda ebs: _has(ebs, "snapshotID") or _has(ebs, "volumeSize"),
    "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')":
        lambda ebs: not _has(ebs, "volumeInitializationRate") or (_has(ebs, "snapshotID") and ebs["snapshotID"] != ""),
    "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))":
        lambda items: all(any(_has(x, k) for k in ("tags", "id", "instanceMatchCriteria")) for x in items),
    # as Karpenter writes it: refused only when every term sets id with another field (carpool's own check
    # refuses each such term)
    "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))":
        lambda items: not all(_has(x, "id") and any(_has(x, k) for k in ("tags", "ownerID", "instanceMatchCriteria"))
                              for x in items),
    "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)":
        lambda c: any(_has(c, k) for k in ("tcpEstablishedTimeout", "udpStreamTimeout", "udpTimeout")),
    "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  "
    "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true":
        lambda k: not (_has(k, "imageGCHighThresholdPercent") and _has(k, "imageGCLowThresholdPercent"))
        or k["imageGCHighThresholdPercent"] > k["imageGCLowThresholdPercent"],
    "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true":
        lambda k: not _has(k, "evictionSoft") or all(e in (k.get("evictionSoftGracePeriod") or {}) for e in k["evictionSoft"]),
    "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true":
        lambda k: not _has(k, "evictionSoftGracePeriod")
        or all(e in (k.get("evictionSoft") or {}) for e in k["evictionSoftGracePeriod"]),
    "self.all(x, !self[x].startsWith('-'))": lambda amounts: all(not str(v).startswith("-") for v in amounts.values()),
    "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')":
        lambda items: not items or any(x.get("deviceIndex") == 0 and x.get("networkCardIndex") == 0
                                       and x.get("interfaceType") == "interface" for x in items),
    "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 "
    "&& (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && "
    "y.interfaceType == 'efa-only').size() == 1))": _one_card_device_pair,
    "has(self.name) || has(self.id)": lambda s: _has(s, "name") or _has(s, "id"),
    "!(has(self.name) && has(self.id))": lambda s: not (_has(s, "name") and _has(s, "id")),
    "self.size() != 0": lambda items: len(items) != 0,
    "self.all(x, has(x.tags) || has(x.id) || has(x.name))":
        lambda items: all(any(_has(x, k) for k in ("tags", "id", "name")) for x in items),
    # as Karpenter writes them: refused only when every term mixes (carpool's own check refuses each term)
    "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))":
        lambda items: not all(_has(x, "id") and (_has(x, "tags") or _has(x, "name")) for x in items),
    "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))":
        lambda items: not all(_has(x, "name") and (_has(x, "tags") or _has(x, "id")) for x in items),
    "self.all(x, has(x.tags) || has(x.id))": lambda items: all(_has(x, "tags") or _has(x, "id") for x in items),
    "!self.all(x, has(x.id) && has(x.tags))": lambda items: not all(_has(x, "id") and _has(x, "tags") for x in items),
}

_FOUND: dict[str, Predicate | None] = {}


def _normalized(rule: str) -> str:
    """The rule on one line, single-spaced (the CRD folds long rules and spaces some twice)."""
    return " ".join(rule.split())


_EXACT: Final[dict[str, Predicate]] = {_normalized(rule): check for rule, check in _EXACT_TEXT.items()}


def applies(rule: str) -> bool:
    """Whether the rule judges an object as created (transition rules compare with `oldSelf`)."""
    return "oldSelf" not in rule


def predicate(rule: str) -> Predicate | None:
    """The Python form of `rule`, or None when carpool has none (a test keeps that from shipping)."""
    if rule in _FOUND:
        return _FOUND[rule]
    text = _normalized(rule)
    found = _EXACT.get(text)
    if found is None:
        for shape, build in _SHAPES:
            match = shape.match(text)
            if match:
                found = build(match)
                break
    _FOUND[rule] = found
    return found
