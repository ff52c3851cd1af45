"""MIME multi-part user data: read the user's archive, write ours, byte-for-byte deterministic.

cloud-init (AL2) and nodeadm (AL2023) both consume `multipart/mixed` archives. Equal inputs must give equal
bytes (launch-template names are a hash of the user data, and a random boundary would make every template
new), so the boundary is chosen from the content: `//`, as Karpenter writes, unless some part holds the
delimiter `--//`; then `//` followed by a digest of every part, which no part can contain without containing
its own digest. Readers disagree on what ends a line (Python's email splits on a lone CR, Go's
mime/multipart does not) and on what may follow a delimiter (Go also ends the archive at `--//--anything`),
so the delimiter is kept out of the content anywhere, not just at the start of a line. The finished archive
is read back and must give exactly the parts written, or the merge is refused.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BOUNDARY = "//"
SHELL_SCRIPT = 'text/x-shellscript; charset="us-ascii"'
NODE_CONFIG = "application/node.eks.aws"
#: RFC 5322 field names: printable ASCII except `:`.
_HEADER_NAME = re.compile(r"^[!-9;-~]+$")


class UserDataError(ValueError):
    """User data carpool cannot write faithfully (bad MIME or TOML in `spec.userData`, or a field whose value
    its reader would misread), with the field at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


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
    """The parts of a user's multi-part archive, in order, bodies untouched and headers unfolded.

    A part that is itself multipart is refused: nodeadm reads only the top-level parts while cloud-init
    walks into nested ones, so the two would not run the same archive."""
    message = email.message_from_string(text, policy=email.policy.compat32)
    if not message.is_multipart():
        raise UserDataError("MIME user data must be multipart (Content-Type: multipart/mixed)", field="spec.userData")
    parts = []
    for i, part in enumerate(message.get_payload()):
        where = f"spec.userData part {i + 1}"
        if not isinstance(part, email.message.Message):
            raise UserDataError("malformed MIME archive", field="spec.userData")
        if part.is_multipart():
            raise UserDataError("nested multipart parts are not supported (nodeadm does not read them)", field=where)
        content_type = part.get("Content-Type")
        if not content_type:
            raise UserDataError("a MIME part has no Content-Type header", field=where)
        others = tuple(
            (k, _unfold(v)) for k, v in part.items() if k.lower() not in ("content-type", "mime-version")
        )
        parts.append(MimePart(_unfold(content_type), str(part.get_payload()), others))
    return parts


def _unfold(value: object) -> str:
    """A header value on one line (RFC 5322 unfolding, runs of white space as one space)."""
    return " ".join(str(value).split())


def serialize(parts: Iterable[MimePart]) -> str:
    """One archive with LF endings. The newline before each boundary belongs to the boundary (RFC 2046),
    so a body round-trips through `parse_archive` unchanged."""
    parts = list(parts)
    for i, part in enumerate(parts):
        _check_part(i, part)
    boundary = boundary_for(parts)
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for part in parts:
        lines.append(f"--{boundary}")
        lines.append(f"Content-Type: {part.content_type}")
        lines.extend(f"{k}: {v}" for k, v in part.headers)
        lines.append("")
        lines.append(part.body)
    lines.append(f"--{boundary}--")
    text = "\n".join(lines) + "\n"
    _check_round_trip(parts, text)
    return text


def boundary_for(parts: Sequence[MimePart]) -> str:
    """`//` when no part holds `--//`, else `//` and a digest of the parts (still deterministic)."""
    if not any(_holds(part, BOUNDARY) for part in parts):
        return BOUNDARY
    digest = hashlib.sha256()
    for part in parts:
        for text in (part.content_type, *(f"{k}: {v}" for k, v in part.headers), part.body):
            digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    boundary = BOUNDARY + digest.hexdigest()[:40]
    if any(_holds(part, boundary) for part in parts):  # a part holding its own digest: not in practice
        raise UserDataError(f"a part contains the MIME boundary '--{boundary}'", field="spec.userData")
    return boundary


def _holds(part: MimePart, boundary: str) -> bool:
    delimiter = "--" + boundary
    return any(delimiter in text for text in (part.content_type, part.body, *(v for _, v in part.headers)))


def _check_part(i: int, part: MimePart) -> None:
    """A header must stay one header: no line break of any kind may start another or end the block. The
    body must have UTF-8 bytes (EC2 takes bytes; a lone surrogate, which JSON can spell, has none)."""
    for name, value in (("Content-Type", part.content_type), *part.headers):
        if not _HEADER_NAME.match(name) or value != _unfold(value) or not value.isprintable():
            raise UserDataError(f"header {name!r} is not a single-line MIME header", field=f"user data part {i + 1}")
    try:
        part.body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserDataError(f"not valid Unicode text at character {exc.start}", field=f"user data part {i + 1}") from None


def _check_round_trip(parts: Sequence[MimePart], text: str) -> None:
    """Read the archive back as cloud-init would; any difference means some content was read as structure."""
    message = email.message_from_string(text, policy=email.policy.compat32)
    got = message.get_payload() if message.is_multipart() else []
    if len(got) != len(parts):
        raise UserDataError(f"the archive reads back as {len(got)} parts, not {len(parts)}", field="spec.userData")
    for i, (part, read) in enumerate(zip(parts, got, strict=True)):
        if _unfold(read.get("Content-Type", "")) != part.content_type or str(read.get_payload()) != part.body:
            raise UserDataError(
                "part does not read back as written (a body ending in a carriage return, or a line the MIME "
                "parser takes for a header or boundary)", field=f"user data part {i + 1}")
