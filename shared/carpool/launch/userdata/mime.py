"""MIME multi-part user data: read the user's archive, write ours, byte-for-byte deterministic.

cloud-init (AL2) and nodeadm (AL2023) both consume `multipart/mixed` archives. We write a fixed boundary
(`//`, as Karpenter does) and LF line endings so equal inputs give equal bytes; launch-template names are
a hash of the user data, and a random boundary would make every template new.
"""

from __future__ import annotations

import email
import email.message
import email.policy
from collections.abc import Iterable
from dataclasses import dataclass

BOUNDARY = "//"
SHELL_SCRIPT = 'text/x-shellscript; charset="us-ascii"'
NODE_CONFIG = "application/node.eks.aws"


class UserDataError(ValueError):
    """`spec.userData` carpool cannot merge (bad MIME, bad TOML...), with the reason."""


@dataclass(frozen=True)
class MimePart:
    content_type: str
    body: str
    #: Other part headers to keep (e.g. Content-Transfer-Encoding), as (name, value) in order.
    headers: tuple[tuple[str, str], ...] = ()


def looks_like_mime(text: str) -> bool:
    """The same sniffing Karpenter uses: an archive starts with one of these headers."""
    head = text.lstrip()
    return head.startswith("MIME-Version:") or head.startswith("Content-Type:")


def parse_archive(text: str) -> list[MimePart]:
    """The parts of a user's multi-part archive, in order, bodies untouched."""
    message = email.message_from_string(text, policy=email.policy.compat32)
    if not message.is_multipart():
        raise UserDataError("spec.userData: MIME user data must be multipart (Content-Type: multipart/mixed)")
    parts = []
    for part in message.get_payload():
        if not isinstance(part, email.message.Message):
            raise UserDataError("spec.userData: malformed MIME archive")
        content_type = part.get("Content-Type")
        if not content_type:
            raise UserDataError("spec.userData: a MIME part has no Content-Type header")
        others = tuple((k, str(v)) for k, v in part.items() if k.lower() not in ("content-type", "mime-version"))
        parts.append(MimePart(" ".join(str(content_type).split()), str(part.get_payload()), others))
    return parts


def serialize(parts: Iterable[MimePart]) -> str:
    """One archive with LF endings. The newline before each boundary belongs to the boundary (RFC 2046),
    so a body round-trips through `parse_archive` unchanged."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for part in parts:
        if f"\n--{BOUNDARY}" in "\n" + part.body:
            raise UserDataError(f"spec.userData: a part contains the MIME boundary line '--{BOUNDARY}'")
        lines.append(f"--{BOUNDARY}")
        lines.append(f"Content-Type: {part.content_type}")
        lines.extend(f"{k}: {v}" for k, v in part.headers)
        lines.append("")
        lines.append(part.body)
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"
