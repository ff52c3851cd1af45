"""How kube-apiserver answers: shared by the simulated cluster, which decides, and its HTTP face, which
serves.

`SimulatedCluster` decides what a request gets (an eviction refused by a budget, a patch that conflicts)
and `SimApiServer` puts it on the wire; both speak in these terms, so they live apart from either:
`metav1.Status` bodies (`ApiAnswer`, `api_status`, `not_found`), RFC 7386 merge patches, apimachinery's
label selectors, and the eviction handler's rules (`pkg/registry/core/pod/storage/eviction.go`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass(frozen=True)
class ApiAnswer:
    """One HTTP answer: the status code and the JSON body (an object, a list or a `metav1.Status`)."""

    code: int
    body: dict[str, Any]
    #: the body already encoded (large lists are assembled from each object's cached JSON)
    data: bytes | None = None

    def encoded(self) -> bytes:
        return self.data if self.data is not None else json.dumps(self.body).encode()

    @property
    def text(self) -> str:
        """The Status message with its causes, the way a client would report it."""
        message = str(self.body.get("message", ""))
        causes = [c.get("message", "") for c in (self.body.get("details") or {}).get("causes") or []]
        return f"{message} ({'; '.join(causes)})" if causes else message


def api_status(code: int, message: str, reason: str = "", details: Mapping[str, Any] | None = None,
               continue_token: str | None = None) -> ApiAnswer:
    """A failure `metav1.Status` as the API server writes it (reason omitted when the server sets none,
    as for the eviction handler's multiple-budget answer)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1",
                            "metadata": {"continue": continue_token} if continue_token else {},
                            "status": "Failure", "message": message, "code": code}
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = dict(details)
    return ApiAnswer(code, body)


def not_found(resource: str, name: str) -> ApiAnswer:
    return api_status(404, f'{resource} "{name}" not found', "NotFound", {"name": name, "kind": resource})


def can_ignore_pdb(raw: Mapping[str, Any]) -> bool:
    """`canIgnorePDB`: Succeeded, Failed and Pending pods, and pods being deleted, are evicted without
    looking at budgets."""
    phase = (raw.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool((raw.get("metadata") or {}).get("deletionTimestamp"))


def selects_something(selector: Mapping[str, Any] | None) -> bool:
    """The eviction handler skips a budget with a nil or empty selector ("it should match nothing")."""
    return bool(selector) and bool(selector.get("matchLabels") or selector.get("matchExpressions"))  # type: ignore[union-attr]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


#: one label selector requirement: (key, operator, values) with the operators of apimachinery's
#: `labels.Parse`: exists "", "!" (does not exist), "=" ("==" too), "!=", "in", "notin"
LabelTerm = tuple[str, str, frozenset[str]]
_SET_TERM = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def parse_label_selector(selector: str) -> list[LabelTerm]:
    """`app=web,tier!=db,!gpu,zone in (a,b)` as terms; ValueError with the API server's wording
    ("unable to parse requirement") for what it cannot parse (answered 400 BadRequest)."""
    terms: list[LabelTerm] = []
    for term in _split_outside_parentheses(selector):
        found = _SET_TERM.match(term)
        if found:
            key, op, values = found.groups()
            terms.append((key, op, frozenset(v.strip() for v in values.split(",") if v.strip())))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key.strip(), "!=", frozenset({value.strip()})))
        elif "=" in term:
            key, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            terms.append((key.strip(), "=", frozenset({value.strip()})))
        elif term.strip().startswith("!") and _LABEL_KEY.match(term.strip()[1:]):
            terms.append((term.strip()[1:], "!", frozenset()))
        elif _LABEL_KEY.match(term.strip()):
            terms.append((term.strip(), "", frozenset()))
        else:
            raise ValueError(f"unable to parse requirement: {term!r}")
    for key, _op, values in terms:
        bad = [v for v in values if not _LABEL_VALUE.match(v)]
        if not _LABEL_KEY.match(key) or bad:
            raise ValueError(f"unable to parse requirement: invalid label key or value in {key!r}: {bad}")
    return terms


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _split_outside_parentheses(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def labels_match(raw: Mapping[str, Any], terms: Sequence[LabelTerm]) -> bool:
    """Whether an object's labels satisfy every term (a missing key fails `=` and `in`, passes `!=`,
    `notin` and `!`, as in apimachinery)."""
    have = (raw.get("metadata") or {}).get("labels") or {}
    for key, op, values in terms:
        present, value = key in have, have.get(key)
        if op == "" and not present or op == "!" and present:
            return False
        if op in ("=", "in") and (not present or value not in values):
            return False
        if op in ("!=", "notin") and present and value in values:
            return False
    return True
