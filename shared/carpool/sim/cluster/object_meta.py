"""What kube-apiserver refuses in an object's metadata before its schema is looked at: its name, its labels'
keys and values, its finalizers (`staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`,
`pkg/apis/meta/v1/validation`, `pkg/util/validation/validation.go`), in the server's words (checked against
the v1.24 server: `tests/integration/test_karpenter_objects_http.py`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from carpool.api.crd_schema import Problem

__all__ = ["metadata_problems", "name_problem"]

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_SUBDOMAIN_WORDS: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_NAME_PART_WORDS: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_WORDS: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def name_problem(name: str) -> Problem | None:
    """`metadata.name` of a cluster-scoped custom resource: a DNS subdomain (`NameIsDNSSubdomain`)."""
    if not name:
        return Problem("metadata.name", "Required value: name or generateName is required")
    if len(name) > 253:
        return Problem("metadata.name", f"Invalid value: {json.dumps(name)}: must be no more than 253 characters")
    if not _DNS_SUBDOMAIN.match(name):
        return Problem("metadata.name", f"Invalid value: {json.dumps(name)}: {_SUBDOMAIN_WORDS}")
    return None


def metadata_problems(meta: Mapping[str, Any]) -> list[Problem]:
    """Label keys and finalizers must be qualified names, label values label values (`ValidateLabels`,
    `ValidateFinalizers`); each refusal at `metadata.labels` / `metadata.finalizers`, as the server puts it."""
    out: list[Problem] = []
    for key, value in (meta.get("labels") or {}).items():
        out += [Problem("metadata.labels", f"Invalid value: {json.dumps(key)}: {why}") for why in _qualified_name(str(key))]
        out += [Problem("metadata.labels", f"Invalid value: {json.dumps(value)}: {why}") for why in _label_value(str(value))]
    for finalizer in meta.get("finalizers") or []:
        out += [Problem("metadata.finalizers", f"Invalid value: {json.dumps(finalizer)}: {why}")
                for why in _qualified_name(str(finalizer))]
    return out


def _qualified_name(value: str) -> list[str]:
    """`IsQualifiedName`: an optional DNS subdomain prefix and '/', then a name part of at most 63."""
    prefix, _, name = value.rpartition("/") if "/" in value else ("", "", value)
    out = []
    if value.count("/") > 1:
        return ["a qualified name " + _NAME_PART_WORDS.replace("name part ", "", 1) + " with an optional DNS "
                "subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if "/" in value:
        if not prefix:
            out.append("prefix part must be non-empty")
        elif not _DNS_SUBDOMAIN.match(prefix) or len(prefix) > 253:
            out.append("prefix part " + _SUBDOMAIN_WORDS)
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > 63:
        out.append("name part must be no more than 63 characters")
    elif not _NAME_PART.match(name):
        out.append(_NAME_PART_WORDS)
    return out


def _label_value(value: str) -> list[str]:
    out = []
    if len(value) > 63:
        out.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        out.append(_LABEL_VALUE_WORDS)
    return out
