"""Pods whose node-affinity requirements name values no node label could carry.

When a NodePool leaves a key open (`team Exists`), the value a pod requires becomes a label of the new
node, written into its user data. The API server validates the keys of node-affinity requirements but not
their values, so the scheduler refuses, before it plans anything, every pod whose `In` values (required or
preferred) are not valid label values: such a pod is unschedulable with the reason, and its strings never
reach a launch. `NotIn`, `Exists` and bounds never become labels and are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from carpool import label_syntax
from carpool.requirements import Requirement, Requirements
from carpool.scheduling.inputs import PodSpec

_GLOB_CHARS = re.compile(r"[*?]")


def problem(pod: PodSpec, _seen: dict[int, str | None] | None = None) -> str | None:
    """Why `pod` cannot be scheduled safely, or None. `_seen` caches by requirement-set identity (pods of
    one workload share them), keeping the check linear in distinct requirement sets."""
    seen = {} if _seen is None else _seen
    for reqs in _requirement_sets(pod):
        marker = id(reqs)
        if marker not in seen:
            seen[marker] = _requirements_problem(reqs)
        if seen[marker]:
            return seen[marker]
    return None


def _requirement_sets(pod: PodSpec) -> Iterable[Requirements]:
    yield from pod.requirements
    for term in pod.preferred_node_affinity:
        yield term.requirements


def _requirements_problem(reqs: Requirements) -> str | None:
    for key, req in reqs.items():
        issue = label_syntax.key_problem(key)
        if issue is None and not req.complement:
            issue = next(filter(None, (label_syntax.value_problem(v) for v in _literal_values(req))), None)
        if issue is not None:
            return f"node affinity requirement {key!r}: {issue}"
    return None


def _literal_values(req: Requirement) -> list[str]:
    """The values, and the globs with their wildcards stood in by a letter: a carpool glob (`c7*`) may use
    `*` and `?` but otherwise only what a label value may hold."""
    return [*sorted(req.values), *(_GLOB_CHARS.sub("a", p) for p in req.patterns)]


def unsafe_pods(pods: Iterable[PodSpec]) -> dict[str, str]:
    """pod key -> reason, for every pod whose requirements could inject into a node's labels."""
    seen: dict[int, str | None] = {}
    out: dict[str, str] = {}
    for pod in pods:
        reason = problem(pod, seen)
        if reason is not None:
            out[pod.key] = reason
    return out
