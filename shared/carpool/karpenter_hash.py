"""Karpenter's NodePool hash (`karpenter.sh/nodepool-hash`), computed as Karpenter v1.14.1 computes it (pure).

Karpenter stamps each NodeClaim with the hash of its NodePool's `spec.template` at creation, and a NodeClaim
whose hash is no longer its NodePool's is statically drifted (`pkg/controllers/nodeclaim/disruption/drift.go`
`areStaticFieldsDrifted`). The hash is `NodePool.Hash()` (`pkg/apis/v1/nodepool.go`, hash version
`NodePoolHashVersion` "v3"): `github.com/mitchellh/hashstructure/v2` over the Go value of the template,
`FormatV2` with `SlicesAsSets`, `IgnoreZeroValue` and `ZeroNil`, printed in decimal. This module walks the
template's JSON as hashstructure walks the Go structs it unmarshals into (FNV-1 64; a struct is its type
name's hash mixed with each non-zero field's (name, value) pair and hardened after each field; a map is the
hardened XOR of its (key, value) pairs; a slice, as a set, the XOR of its elements; a string its bytes; an
integer its 8 little-endian bytes), with the field order and `hash:"ignore"` tags of Karpenter's types:

    NodeClaimTemplate{ObjectMeta{Labels, Annotations}, Spec NodeClaimTemplateSpec{Taints []v1.Taint,
      StartupTaints []v1.Taint, Requirements (ignored), NodeClassRef *NodeClassReference{Kind, Name, Group},
      TerminationGracePeriod *metav1.Duration{Duration}, ExpireAfter NillableDuration{*time.Duration,
      Raw (ignored)}}}
    v1.Taint{Key, Value, Effect, TimeAdded *metav1.Time}

Checked against a hash Karpenter wrote on a NodePool (tests/unit/test_karpenter_hash.py). A template this
walk cannot reproduce (a taint with `timeAdded`, whose hash is Go's `time.Time.MarshalBinary`; a duration
that is not Karpenter's `[0-9]+(s|m|h)` form) has no hash here: `None`, and the caller judges without it.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

__all__ = ["NODEPOOL_HASH_VERSION", "nodepool_hash"]

#: the hash version this module computes (`v1.NodePoolHashVersion` of Karpenter v1.14.1)
NODEPOOL_HASH_VERSION: Final = "v3"
_OFFSET: Final = 14695981039346656037
_PRIME: Final = 1099511628211
_MASK: Final = 2**64 - 1
_DURATION: Final = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_NANOS: Final = 10**9


class _Unhashable(Exception):
    """The template holds something this walk does not reproduce."""


def nodepool_hash(nodepool: Mapping[str, Any]) -> str | None:
    """`NodePool.Hash()` of the NodePool object (its `spec.template` as the API server holds it), or None
    when its template holds what this module cannot hash exactly."""
    template = ((nodepool.get("spec") or {}).get("template")) or {}
    try:
        return str(_template(template))
    except _Unhashable:
        return None


# -- Karpenter's types ------------------------------------------------------------------------------------
def _template(template: Mapping[str, Any]) -> int:
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    object_meta = None
    if meta.get("labels") is not None or meta.get("annotations") is not None:
        object_meta = _struct("ObjectMeta", [("Labels", _optional(meta.get("labels"), _string_map)),
                                             ("Annotations", _optional(meta.get("annotations"), _string_map))])
    return _struct("NodeClaimTemplate", [("ObjectMeta", object_meta), ("Spec", _spec(spec))])


def _spec(spec: Mapping[str, Any]) -> int:
    ref = spec.get("nodeClassRef")
    return _struct("NodeClaimTemplateSpec", [
        ("Taints", _optional(spec.get("taints"), _taints)),
        ("StartupTaints", _optional(spec.get("startupTaints"), _taints)),
        ("NodeClassRef", None if ref is None else _struct("NodeClassReference", [
            ("Kind", _string_field(ref.get("kind"))), ("Name", _string_field(ref.get("name"))),
            ("Group", _string_field(ref.get("group")))])),
        ("TerminationGracePeriod", _optional(spec.get("terminationGracePeriod"), _metav1_duration)),
        ("ExpireAfter", _nillable_duration(spec.get("expireAfter"))),
    ])


def _taints(taints: Sequence[Mapping[str, Any]]) -> int:
    out = 0
    for taint in taints:
        if taint.get("timeAdded"):
            raise _Unhashable("timeAdded")
        out ^= _struct("Taint", [("Key", _string_field(taint.get("key"))), ("Value", _string_field(taint.get("value"))),
                                 ("Effect", _string_field(taint.get("effect")))])
    return out  # SlicesAsSets: unordered, and not hardened (no `set` tag)


def _metav1_duration(text: str) -> int:
    nanos = _nanoseconds(text)
    return _struct("Duration", [("Duration", _int64(nanos) if nanos else None)])


def _nillable_duration(text: str | None) -> int | None:
    """`NillableDuration`: its `Raw` is set whenever a duration was given, so the field counts even as
    "Never" (no `Duration` then); absent, it is zero and left out."""
    if text is None:
        return None
    if text == "Never":
        return _struct("NillableDuration", [])
    nanos = _nanoseconds(text)
    return _struct("NillableDuration", [("Duration", _int64(nanos))])


def _nanoseconds(text: str) -> int:
    match = _DURATION.match(str(text))
    if match is None or not any(match.groups()):
        raise _Unhashable(f"duration {text!r}")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return (hours * 3600 + minutes * 60 + seconds) * _NANOS


# -- hashstructure v2 ---------------------------------------------------------------------------------------
def _struct(name: str, fields: Sequence[tuple[str, int | None]]) -> int:
    """A struct: its type name's hash, each non-zero field (None: zero, left out) mixed in and hardened."""
    out = _string(name)
    for field_name, value in fields:
        if value is None:
            continue
        out = _finish(out ^ _ordered(_string(field_name), value))
    return out


def _string_map(values: Mapping[str, Any]) -> int:
    out = 0
    for key, value in values.items():
        out ^= _ordered(_string(str(key)), _string(str(value)))
    return _finish(out)


def _optional(value: Any, hashed: Callable[[Any], int]) -> int | None:
    """A map, slice or pointer field: None (zero) when absent, hashed when present, even empty."""
    return None if value is None else hashed(value)


def _string_field(value: Any) -> int | None:
    return _string(str(value)) if value else None


def _fnv1(data: bytes) -> int:
    out = _OFFSET
    for byte in data:
        out = ((out * _PRIME) & _MASK) ^ byte
    return out


def _string(text: str) -> int:
    return _fnv1(text.encode())


def _int64(value: int) -> int:
    return _fnv1(struct.pack("<q", value))


def _ordered(a: int, b: int) -> int:
    return _fnv1(struct.pack("<QQ", a, b))


def _finish(a: int) -> int:
    return _fnv1(struct.pack("<Q", a))
