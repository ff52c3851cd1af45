"""Server-side printing of Karpenter's objects: the `meta.k8s.io/v1` Table kube-apiserver answers to
`Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get nodeclaims` asks for), with the
columns of Karpenter v1.14.1's CRDs (`additionalPrinterColumns`).

Modelled on apiextensions-apiserver's `pkg/registry/customresource/tableconvertor/tableconvertor.go`: a
"Name" column, then one per printer column, its cell found by the column's JSONPath (nothing found: null);
a `string` column prints what it finds, a `date` column the age as `HumanDuration` words it (on the
cluster's clock here, the wall clock there), `integer` a number; each row carries the object as the
request's `includeObject` says (`Metadata`, the default: a `PartialObjectMetadata`; `Object`; `None`).
The columns are copied from the CRD files; `tests/unit/sim/cluster/test_tables.py` holds them to those.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

__all__ = ["PRINTER_COLUMNS", "TABLE_MEDIA", "cell", "human_duration", "table"]

#: the `Accept` parameter that asks for a Table
TABLE_MEDIA: Final = "as=Table"
#: `metav1.ObjectMeta{}.SwaggerDoc()["name"]`: the Name column's description
_NAME_DESCRIPTION: Final = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "http://kubernetes.io/docs/user-guide/identifiers#names"
)


def _column(name: str, json_path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": kind, "jsonPath": json_path, "priority": priority}


_READY = '.status.conditions[?(@.type=="Ready")].status'
_AGE = _column("Age", ".metadata.creationTimestamp", "date")
#: `additionalPrinterColumns` of each kind's v1 version, as the CRDs list them
PRINTER_COLUMNS: Final[dict[str, list[dict[str, Any]]]] = {
    "NodePool": [_column("NodeClass", ".spec.template.spec.nodeClassRef.name"), _column("Nodes", ".status.nodes"),
                 _column("Ready", _READY), _AGE, _column("Weight", ".spec.weight", "integer", 1),
                 _column("CPU", ".status.resources.cpu", priority=1),
                 _column("Memory", ".status.resources.memory", priority=1)],
    "NodeClaim": [_column("Type", ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
                  _column("Capacity", ".metadata.labels.karpenter\\.sh/capacity-type"),
                  _column("Zone", ".metadata.labels.topology\\.kubernetes\\.io/zone"),
                  _column("Node", ".status.nodeName"), _column("Ready", _READY), _AGE,
                  _column("ImageID", ".status.imageID", priority=1), _column("ID", ".status.providerID", priority=1),
                  _column("NodePool", ".metadata.labels.karpenter\\.sh/nodepool", priority=1),
                  _column("NodeClass", ".spec.nodeClassRef.name", priority=1),
                  _column("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1)],
    "EC2NodeClass": [_column("Ready", _READY), _AGE, _column("Role", ".spec.role", priority=1)],
}


def table(kind: str, objects: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any], now: datetime,
          include_object: str = "Metadata") -> dict[str, Any]:
    """The Table of `objects` (a list's page, or one object); `metadata` the list's (resourceVersion,
    continue)."""
    columns = PRINTER_COLUMNS[kind]
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": _NAME_DESCRIPTION, "priority": 0}]
    definitions += [{"name": c["name"], "type": c["type"], "format": "",
                     "description": f"Custom resource definition column (in JSONPath format): {c['jsonPath']}",
                     "priority": c["priority"]} for c in columns]
    rows = [{"cells": [obj["metadata"]["name"], *(cell(c, obj, now) for c in columns)],
             "object": _row_object(obj, include_object)} for obj in objects]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(metadata),
            "columnDefinitions": definitions, "rows": rows}


def _row_object(obj: Mapping[str, Any], include: str) -> Any:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def cell(column: Mapping[str, Any], obj: Mapping[str, Any], now: datetime) -> Any:
    """One column's cell (`cellForJSONValue`; a string column prints what it finds)."""
    found = _find(obj, str(column["jsonPath"]))
    if found is None:
        return None
    kind = column["type"]
    if kind == "string":
        return found if isinstance(found, str) else json.dumps(found)
    if kind == "integer":
        return int(found) if isinstance(found, int | float) and not isinstance(found, bool) else None
    if kind == "date" and isinstance(found, str):
        try:
            at = datetime.fromisoformat(found.replace("Z", "+00:00"))
        except ValueError:
            return "<invalid>"
        return human_duration((now - at).total_seconds())
    return None


_STEP = re.compile(r'\.((?:\\.|[^.\[\\])+)|\[\?\(@\.(\w+)=="([^"]*)"\)\]')


def _find(obj: Any, path: str) -> Any:
    """The first result of the simple JSONPath the CRDs use: `.a.b`, `\\.` inside a key, and
    `[?(@.key=="value")]` over a list. None when a step finds nothing (`AllowMissingKeys`)."""
    value = obj
    for step in _STEP.finditer(path):
        key, filter_key, filter_value = step.groups()
        if key is not None:
            value = value.get(key.replace("\\.", ".")) if isinstance(value, Mapping) else None
        else:
            value = next((item for item in value or [] if isinstance(item, Mapping)
                          and str(item.get(filter_key)) == filter_value), None) if isinstance(value, list) else None
        if value is None:
            return None
    return value


def human_duration(seconds: float) -> str:
    """`k8s.io/apimachinery/pkg/util/duration.HumanDuration`: how kubectl and the API server word an age."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return f"{minutes}m" if whole % 60 == 0 else f"{minutes}m{whole % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"
