"""Kubernetes' own syntax rules for label keys and values, with no dependencies.

A label value that reaches a node travels through user data (`--node-labels=k=v,...`, a nodeadm
`NodeConfig`, Bottlerocket TOML). The API server validates node labels, but not the values of a pod's
node-affinity requirements, so a pod can ask for `team In ["a,b=c --max-pods=999"]`. Checking every key
and value against the same rules the API server applies to labels (`IsQualifiedName`, `IsValidLabelValue`
in k8s.io/apimachinery/pkg/util/validation) keeps such strings from ever reaching a node's bootstrap.
"""

from __future__ import annotations

import re

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MAX_NAME = 63
MAX_PREFIX = 253


def key_problem(key: str) -> str | None:
    """Why `key` is not a valid label key (a qualified name, optionally prefixed), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > MAX_PREFIX or not _DNS_SUBDOMAIN.match(prefix)):
        return f"invalid label key {key!r}: the prefix must be a lowercase DNS subdomain"
    if not name or len(name) > MAX_NAME or not _LABEL_NAME.match(name):
        return (
            f"invalid label key {key!r}: the name must be 63 characters or less, alphanumeric, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return None


def value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value, or None."""
    if len(value) > MAX_NAME or not _LABEL_VALUE.match(value):
        return (
            f"invalid label value {value!r}: must be 63 characters or less, alphanumeric, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return None
