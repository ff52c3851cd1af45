"""A narrow evaluator for IAM identity policies: does a role's policy allow one authorization?

Why our own: the Python evaluators that exist do not fit. moto's `IAMPolicy` knows only `StringEquals`
and returns an explicit deny when an Allow's condition fails (AWS treats that statement as not applying);
principalmapper's local simulator is unmaintained since 2022 and evaluates `ForAnyValue` against the whole
context and `StringNotLike` on a missing key wrongly; policy_sentry, parliament and cloudsplaining write or
lint policies and evaluate nothing; aws-why calls AWS's policy simulator, which needs an account.

What is implemented, after the IAM policy evaluation logic for identity-based policies
(docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):

- an explicit Deny of any applicable statement wins; otherwise an applicable Allow allows; otherwise the
  request is implicitly denied;
- ``Action``/``NotAction`` match case-insensitively with ``*`` and ``?``; ``Resource``/``NotResource``
  match case-sensitively, ARN segment by ARN segment (a wildcard does not cross into the next segment),
  ``"*"`` matching everything;
- conditions: every operator block must hold, every key within a block must hold, and a key holds when
  any of its policy values matches (negated operators: when none does). Condition key names are
  case-insensitive. Operators: ``String(Not)Equals(IgnoreCase)``, ``String(Not)Like``,
  ``Arn(Not)Equals``/``Arn(Not)Like``, ``Bool``, ``Null``, each with ``IfExists`` and with the
  ``ForAllValues:``/``ForAnyValue:`` set qualifiers. A missing key fails a positive operator, satisfies a
  negated one and any ``IfExists``; ``ForAllValues`` holds for a missing or empty key, ``ForAnyValue``
  does not.

Anything else (numeric, date, IP address operators, policy variables, a multi-valued key under a
single-valued operator) raises `UnsupportedPolicy`, so a policy this evaluator cannot judge fails the
test instead of passing it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from typing import Any

Context = Mapping[str, Sequence[str]]


class UnsupportedPolicy(ValueError):
    """A policy element this evaluator does not implement."""


class Decision(Enum):
    ALLOW = "allow"
    IMPLICIT_DENY = "implicit deny"
    EXPLICIT_DENY = "explicit deny"


@dataclass(frozen=True)
class Result:
    decision: Decision
    #: indices of the statements that applied (Allow statements when allowed, Deny ones when denied)
    statements: tuple[int, ...] = field(default_factory=tuple)

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


# -- matching -------------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _wildcard(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def like(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """``*`` any run of characters, ``?`` one character; everything else literal."""
    if "${" in pattern:
        raise UnsupportedPolicy(f"policy variables are not supported: {pattern}")
    return _wildcard(pattern, ignore_case).match(value) is not None


def action_matches(pattern: str, action: str) -> bool:
    return like(pattern, action, ignore_case=True)


def resource_matches(pattern: str, resource: str) -> bool:
    """ARNs match segment by segment (partition, service, region, account, resource)."""
    if pattern == "*":
        return True
    if "${" in pattern:
        raise UnsupportedPolicy(f"unresolved reference or policy variable in Resource: {pattern}")
    want, have = pattern.split(":", 5), resource.split(":", 5)
    return len(want) == len(have) and all(like(w, h) for w, h in zip(want, have, strict=True))


# -- conditions -----------------------------------------------------------------------------------------
_NEGATED = {"StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals", "ArnNotLike"}


def _compare(base: str, policy_value: str, value: str) -> bool:
    """Does one context value match one policy value under the positive form of `base`?"""
    if base in ("StringEquals", "StringNotEquals"):
        return policy_value == value
    if base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        return policy_value.lower() == value.lower()
    if base in ("StringLike", "StringNotLike"):
        return like(policy_value, value)
    if base in ("ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike"):
        return resource_matches(policy_value, value)
    if base == "Bool":
        return policy_value.lower() == value.lower()
    raise UnsupportedPolicy(f"condition operator {base}")


def _satisfies(base: str, policy_values: list[str], value: str) -> bool:
    hit = any(_compare(base, p, value) for p in policy_values)
    return not hit if base in _NEGATED else hit


def _policy_values(raw: Any) -> list[str]:
    return [str(v).lower() if isinstance(v, bool) else str(v) for v in as_list(raw)]


def _operator_holds(operator: str, key: str, raw: Any, context: Mapping[str, list[str]]) -> bool:
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    policy_values = _policy_values(raw)
    values = context.get(key.lower())
    if base == "Null":
        if qualifier or if_exists:
            raise UnsupportedPolicy(f"condition operator {operator}")
        absent = not values
        return any((p.lower() == "true") == absent for p in policy_values)
    if qualifier == "ForAllValues":
        return not values or all(_satisfies(base, policy_values, v) for v in values)
    if qualifier == "ForAnyValue":
        return bool(values) and any(_satisfies(base, policy_values, v) for v in values)
    if qualifier:
        raise UnsupportedPolicy(f"condition set qualifier {qualifier}")
    if not values:
        return if_exists or base in _NEGATED
    if len(values) > 1:
        raise UnsupportedPolicy(f"{operator} on the multi-valued key {key}: use ForAllValues/ForAnyValue")
    return _satisfies(base, policy_values, values[0])


def condition_holds(condition: Mapping[str, Mapping[str, Any]] | None, context: Context) -> bool:
    """Every block, every key of a block (condition key names are case-insensitive)."""
    if not condition:
        return True
    lowered = {k.lower(): list(v) for k, v in context.items()}
    return all(
        _operator_holds(operator, key, raw, lowered)
        for operator, keys in condition.items()
        for key, raw in keys.items()
    )


# -- statements and policies -----------------------------------------------------------------------------
def _element(statement: Mapping[str, Any], name: str, value: str, match: Any) -> bool:
    if name in statement:
        return any(match(p, value) for p in as_list(statement[name]))
    negated = f"Not{name}"
    if negated in statement:
        return not any(match(p, value) for p in as_list(statement[negated]))
    raise UnsupportedPolicy(f"statement without {name} or {negated}: {statement}")


def applies(statement: Mapping[str, Any], action: str, resource: str, context: Context) -> bool:
    """Does the statement cover this action on this resource in this request context?"""
    return (
        _element(statement, "Action", action, action_matches)
        and _element(statement, "Resource", resource, resource_matches)
        and condition_holds(statement.get("Condition"), context)
    )


def evaluate(statements: Sequence[Mapping[str, Any]], action: str, resource: str, context: Context) -> Result:
    """The decision for one authorization under an identity policy made of `statements`."""
    allows, denies = [], []
    for index, statement in enumerate(statements):
        effect = statement.get("Effect")
        if effect not in ("Allow", "Deny"):
            raise UnsupportedPolicy(f"statement {index}: Effect {effect!r}")
        if applies(statement, action, resource, context):
            (denies if effect == "Deny" else allows).append(index)
    if denies:
        return Result(Decision.EXPLICIT_DENY, tuple(denies))
    if allows:
        return Result(Decision.ALLOW, tuple(allows))
    return Result(Decision.IMPLICIT_DENY)


def granted_actions(statements: Iterable[Mapping[str, Any]]) -> set[tuple[int, str]]:
    """(statement index, action pattern) of every Allow."""
    return {
        (index, action)
        for index, statement in enumerate(statements)
        if statement.get("Effect") == "Allow"
        for action in as_list(statement.get("Action", []))
    }
