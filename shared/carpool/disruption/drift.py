"""Drift: a node no longer matches what its NodePool and EC2NodeClass would launch today, so it is
replaced (replacement first, within the `Drifted` budgets).

Checks, first match wins (each is a sentence in the run summary):
1. its NodePool or EC2NodeClass is gone, or the pool now points at another node class;
2. requirements: a label the node has no longer satisfies the pool's requirements (e.g. a family was
   removed from `instance-family`); labels the node lacks are not judged (carpool does not put every
   instance-type label on its nodes, and an absent label is not a change);
3. static drift: the hash of the pool template + node class spec stored on the claim at launch
   (`Claim.spec_hash`) differs from today's. Like Karpenter's hash, it ignores what is checked
   dynamically (requirements, selector terms) and what does not need a new node (expireAfter,
   terminationGracePeriod, budgets);
4. AMI: the node runs another image than the strict AMI mapping gives its instance type now (an
   `al2023@v2025...` alias bump, a new `latest`, a changed selector), or no image maps to its type any more.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from carpool.api.nodeclass import EC2NodeClass
from carpool.api.nodepool import NodePool
from carpool.disruption.candidates import Candidate
from carpool.requirements import Requirements

#: NodePool template fields that do not change what a node is (Karpenter's `hash:"ignore"`)
_POOL_IGNORED = ("requirements", "expireAfter", "terminationGracePeriod")


def spec_hash(pool: NodePool, nodeclass: EC2NodeClass) -> str:
    """A stable digest of what a node of `pool` is launched from. Store it on the claim at launch
    (`Claim.spec_hash`); a different value later means the node has drifted."""
    template = pool.spec.template.model_dump(by_alias=True, exclude_none=True, mode="json")
    template.get("spec", {}).update({k: None for k in _POOL_IGNORED})
    klass = nodeclass.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    klass = {k: v for k, v in klass.items() if not k.endswith("SelectorTerms")}
    text = json.dumps({"template": _clean(template), "nodeclass": klass}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _clean(value: Any) -> Any:
    """Drop None and empty values so that writing a default explicitly is not a change."""
    if isinstance(value, dict):
        out = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def requirements_drift(requirements: Requirements, node_labels: Mapping[str, str]) -> str | None:
    """The first label of the node that the pool's requirements no longer admit."""
    for key in sorted(requirements):
        value = node_labels.get(key)
        if value is not None and not requirements[key].has(value):
            return f"label {key}={value} no longer satisfies the NodePool's requirements"
    return None


def drifted(
    c: Candidate,
    pool: NodePool | None,
    nodeclass: EC2NodeClass | None,
    expected_amis: Mapping[str, str | None],
    type_labels: Mapping[str, str] | None = None,
) -> str | None:
    """Why node `c` has drifted, or None. `expected_amis` maps node name -> the image the mapping gives
    its type now (None: no image maps); a node absent from it is not AMI-checked (resolution failed).
    `type_labels` are its instance type's catalog labels, so requirement checks see them too."""
    if pool is None:
        return f"NodePool {c.pool} no longer exists"
    if nodeclass is None:
        return f"EC2NodeClass {c.nodeclass} no longer exists"
    if pool.node_class_name != c.nodeclass:
        return (f"NodePool {c.pool} now uses EC2NodeClass {pool.node_class_name}, "
                f"the node was launched with {c.nodeclass}")
    why = requirements_drift(pool.requirements(), {**(type_labels or {}), **c.labels})
    if why:
        return why
    if c.spec_hash is not None and c.spec_hash != spec_hash(pool, nodeclass):
        return f"NodePool {c.pool} template or EC2NodeClass {c.nodeclass} changed since the node was launched"
    return ami_drift(c, expected_amis)


def ami_drift(c: Candidate, expected_amis: Mapping[str, str | None]) -> str | None:
    if c.node not in expected_amis:
        return None
    expected = expected_amis[c.node]
    if expected is None:
        return f"no AMI of EC2NodeClass {c.nodeclass} maps to {c.instance_type} any more"
    if c.image_id and c.image_id != expected:
        return f"node runs {c.image_id}; EC2NodeClass {c.nodeclass} now gives {c.instance_type} {expected}"
    return None
