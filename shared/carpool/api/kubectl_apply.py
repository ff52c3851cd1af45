"""What `kubectl apply` sends for a custom resource: the object created, or a three-way JSON merge patch.

Why kubectl's client-side apply and not a replace: an object the user applies has fields the user never
wrote (the CRD's defaults, `status`, carpool's finalizers and annotations, other tools' labels), and a
field the user deletes from the file must go from the object. kubectl tells the two apart by the
`kubectl.kubernetes.io/last-applied-configuration` annotation, the config as last applied: a key that was
in it and is not in the new config is deleted (null in the patch); a key of the new config that differs
from the live object is set; everything else on the object is left alone. `carpool apply` and
`kubectl apply` therefore write the same annotation and the same patch, and either can follow the other.

Modelled on kubectl v1.x (`k8s.io/kubectl/pkg/cmd/apply/patcher.go` `buildMergePatch`, for kinds without a
strategic-merge schema, which every CRD is) and `k8s.io/apimachinery/pkg/util/jsonmergepatch/patch.go`
`CreateThreeWayJSONMergePatch` (adds and changes from current -> modified, deletions from original ->
modified, merged); `k8s.io/kubectl/pkg/util/apply.go` `GetModifiedConfiguration` for the annotation
(the object without it, as JSON with sorted keys and a newline, as Go's `json.Marshal` of a map writes it).
Lists are replaced whole, as JSON merge patch (RFC 7386) replaces them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["LAST_APPLIED", "applied_form", "go_json", "last_applied", "three_way_patch"]

#: kubectl's annotation holding the configuration as last applied
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
#: what Go's `json.Encoder` escapes in strings by default (`SetEscapeHTML(true)`), as kubectl's annotation has it
_GO_ESCAPES: Final = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def applied_form(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` as apply sends it: with the annotation recording `config` itself (without the annotation)."""
    obj = copy.deepcopy(dict(config))
    metadata = dict(obj.get("metadata") or {})
    # kubectl records the annotations it will write without its own, as a map even when empty
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED}
    obj["metadata"] = {**metadata, "annotations": annotations}
    recorded = go_json(obj)
    obj["metadata"] = {**metadata, "annotations": {**annotations, LAST_APPLIED: recorded}}
    return obj


def go_json(obj: Any) -> str:
    """`obj` as Go's `json.NewEncoder(w).Encode` writes a map: keys sorted, compact, HTML characters escaped,
    a newline at the end (what kubectl stores, so the annotations of the two tools compare equal)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES.items():
        text = text.replace(char, escaped)
    return text + "\n"


def last_applied(live: Mapping[str, Any]) -> dict[str, Any] | None:
    """The configuration last applied to `live`, None when it has none (created otherwise, or unreadable)."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str):
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def three_way_patch(original: Mapping[str, Any] | None, modified: Mapping[str, Any],
                    current: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that takes `current` (the live object) to `modified` (the config to apply, in
    `applied_form`) given `original` (the config last applied, None when unknown): additions and changes
    from current to modified, deletions from original to modified. `{}` when nothing would change."""
    add_and_change = _without_nulls(_merge_diff(current, modified))
    deletions = _only_nulls(_merge_diff(original or {}, modified))
    return _merged(deletions, add_and_change)


def _merge_diff(source: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386's patch from `source` to `target` (evanphx/json-patch `CreateMergePatch`): what target sets
    or changes, nested maps diffed, keys target lacks as null."""
    patch: dict[str, Any] = {}
    for key, value in target.items():
        if key not in source:
            patch[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(source[key], Mapping):
            nested = _merge_diff(source[key], value)
            if nested:
                patch[key] = nested
        elif value != source[key] or type(value) is not type(source[key]):
            patch[key] = copy.deepcopy(value)
    for key in source:
        if key not in target:
            patch[key] = None
    return patch


def _without_nulls(patch: Mapping[str, Any]) -> dict[str, Any]:
    """Only additions and changes (`keepOrDeleteNullInObj(..., false)`): an explicitly empty map stays a value."""
    kept: dict[str, Any] = {}
    for key, value in patch.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and value:
            nested = _without_nulls(value)
            if nested:
                kept[key] = nested
        else:
            kept[key] = value
    return kept


def _only_nulls(patch: Mapping[str, Any]) -> dict[str, Any]:
    """Only deletions (`keepOrDeleteNullInObj(..., true)`)."""
    kept: dict[str, Any] = {}
    for key, value in patch.items():
        if value is None:
            kept[key] = None
        elif isinstance(value, Mapping) and value:
            nested = _only_nulls(value)
            if nested:
                kept[key] = nested
    return kept


def _merged(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Two patches as one (deletions and changes touch different keys: a key deleted is not in modified)."""
    out = copy.deepcopy(dict(base))
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
