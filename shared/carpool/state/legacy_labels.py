"""Claim labels under which carpool kept disruption progress before it became typed fields of the claim.

Claims stored by an older version (DynamoDB items written before an upgrade) still carry them: `lift`
moves them into the fields (`Claim.disruption`, `abandoned_for`, `spec_hash`, `pods_digest`,
`pods_changed_at`) when such a claim is read, and drops them from its labels, so nothing reads these keys
but this module, and the next save of the claim writes the fields instead. A claim is stored whole on
every save, so the labels disappear from the table as claims are written again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

_C: Final = "carpool.dev/"

#: the reason (decision.Reason) a node is being disrupted; its presence meant "disruption in progress"
DISRUPTION: Final = _C + "disruption"
#: "delete" or "replace"
DISRUPTION_ACTION: Final = _C + "disruption-action"
#: comma-separated names of the replacement claims the node waits for before it drains
REPLACED_BY: Final = _C + "replaced-by"
#: ISO-8601 time the decision was taken
DISRUPTED_AT: Final = _C + "disrupted-at"
#: how many times a replacement was launched again (written by still older versions; dropped)
REPLACE_ATTEMPTS: Final = _C + "replace-attempts"
#: digest of the set of pods on the node, and when that set last changed (consolidateAfter's clock)
PODS_DIGEST: Final = _C + "pods-digest"
PODS_CHANGED_AT: Final = _C + "pods-changed-at"
#: hash of the NodePool template + EC2NodeClass spec the node was launched from (static drift)
SPEC_HASH: Final = _C + "spec-hash"
#: ISO-8601 time the node's remaining pods are deleted regardless of budgets
TERMINATION_DEADLINE: Final = _C + "termination-deadline"
#: comma-separated names of the replacement claims of an abandoned decision
ABANDONED_FOR: Final = _C + "abandoned-for"

#: every key above: none of them is left in a claim's labels once it is read
ALL: Final = frozenset({DISRUPTION, DISRUPTION_ACTION, REPLACED_BY, DISRUPTED_AT, REPLACE_ATTEMPTS,
                        PODS_DIGEST, PODS_CHANGED_AT, SPEC_HASH, TERMINATION_DEADLINE, ABANDONED_FOR})


def lift(data: Any) -> Any:
    """A claim's raw fields (what `Claim` is validated from) with the progress its labels carry moved into
    the typed fields, which win when both are set; anything else is returned as it is."""
    if not isinstance(data, Mapping):
        return data
    labels = data.get("labels")
    if not isinstance(labels, Mapping) or ALL.isdisjoint(labels):
        return data
    out = {**data, "labels": {k: v for k, v in labels.items() if k not in ALL}}
    if DISRUPTION in labels and out.get("disruption") is None:
        out["disruption"] = {
            "reason": labels[DISRUPTION],
            "action": labels.get(DISRUPTION_ACTION, ""),
            "replaced_by": _names(labels.get(REPLACED_BY, "")),
            "decided_at": _time(labels.get(DISRUPTED_AT)),
            "termination_deadline": _time(labels.get(TERMINATION_DEADLINE)),
        }
    if ABANDONED_FOR in labels and not out.get("abandoned_for"):
        out["abandoned_for"] = _names(labels[ABANDONED_FOR])
    for key, name in ((SPEC_HASH, "spec_hash"), (PODS_DIGEST, "pods_digest")):
        if key in labels and out.get(name) is None:
            out[name] = labels[key]
    if PODS_CHANGED_AT in labels and out.get("pods_changed_at") is None:
        out["pods_changed_at"] = _time(labels[PODS_CHANGED_AT])
    return out


def _names(text: str) -> list[str]:
    return [n for n in text.split(",") if n]


def _time(text: str | None) -> datetime | None:
    """The label's time; None when absent or unreadable (the readers treated an unreadable decision time
    as unknown too)."""
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
