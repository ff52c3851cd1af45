"""How the NodePool/EC2NodeClass config is stored in SSM Parameter Store when it outgrows one parameter.

Why SSM and parts: the config is the stack's (written by every ``cdk deploy``, validated at synth) and
must reach every function within a minute of a change, through a read cheap enough to repeat every
minute in every container. One parameter holds 8 KB at most (ADVANCED tier), which four realistic
NodePools fill. So a config that does not fit is gzip-compressed (YAML of many NodePools compresses
about tenfold), base64-encoded, and cut into STANDARD-tier parameters of 4 KB (free, unlike ADVANCED
ones) named ``<index>/part-<i>``; the index parameter (the one name the functions are given) then holds
a small pointer, ``{"carpoolConfig": {"parts": N, "sha256": ..., "encoding": "gzip+base64"}}``. A config
that fits stays readable in the index itself, as before.

The alternatives weighed: an S3 object (the stack would need a bucket, or a custom resource to write the
text with the deploy-time node role name in it, plus its own IAM and cdk-nag findings); ADVANCED-tier
parts without compression (a 200-pool config is ~40 parameters at $0.05 a month each, and CloudFormation's
500-resource limit comes into sight). Compressed STANDARD parts keep 200 NodePools in a handful of free
parameters, read with one GetParameters call, under IAM that names each parameter exactly.

Consistency: CloudFormation updates the parts and the index one by one. The pointer carries the text's
SHA-256, so a reader that meets a mix of old and new parts during a deploy knows it (`ConfigPartsError`)
and keeps the last good text until the next read; the parts are read again only when the pointer
changes. Compression uses a fixed mtime so that the same config gives the same parameters (no diff on a
deploy that changes nothing).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from dataclasses import dataclass

#: the index parameter is ADVANCED tier: a config up to this size is stored in it as plain text
INLINE_MAX_BYTES = 8 * 1024
#: a STANDARD-tier parameter's value limit
PART_MAX_CHARS = 4 * 1024
#: 100 parts of compressed config is ~4 MB of YAML; far past that, the CloudFormation template (1 MB)
#: would be the limit anyway
MAX_PARTS = 100
POINTER_KEY = "carpoolConfig"
ENCODING = "gzip+base64"


class ConfigPartsError(ValueError):
    """The stored parts do not make the text the pointer describes (a deploy in progress, or damage)."""


@dataclass(frozen=True)
class Pointer:
    """What the index parameter holds when the config is stored in parts."""

    parts: int
    sha256: str
    encoding: str = ENCODING

    def to_json(self) -> str:
        body = {"parts": self.parts, "sha256": self.sha256, "encoding": self.encoding}
        return json.dumps({POINTER_KEY: body}, separators=(",", ":"))


def part_name(index_name: str, number: int) -> str:
    return f"{index_name}/part-{number}"


def encode(text: str) -> tuple[str, list[str]]:
    """(index value, part values): the text itself and no parts when it fits the index, else a pointer
    and the compressed parts. `ConfigPartsError` when even the parts cannot hold it."""
    data = text.encode()
    if len(data) <= INLINE_MAX_BYTES:
        return text, []
    blob = base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode()
    parts = [blob[i : i + PART_MAX_CHARS] for i in range(0, len(blob), PART_MAX_CHARS)]
    if len(parts) > MAX_PARTS:
        raise ConfigPartsError(
            f"the config is {len(data)} bytes, {len(blob)} compressed: more than {MAX_PARTS} parameters of "
            f"{PART_MAX_CHARS} characters"
        )
    return Pointer(len(parts), hashlib.sha256(data).hexdigest()).to_json(), parts


def pointer_of(value: str) -> Pointer | None:
    """The pointer an index value holds; None when the value is the config text itself (a config always
    has documents with a `kind`, never this one key)."""
    if not value.lstrip().startswith("{") or POINTER_KEY not in value:
        return None
    try:
        body = json.loads(value)[POINTER_KEY]
        pointer = Pointer(int(body["parts"]), str(body["sha256"]), str(body.get("encoding", ENCODING)))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigPartsError(f"the config index holds a malformed pointer: {exc}") from exc
    if pointer.encoding != ENCODING or not 0 < pointer.parts <= MAX_PARTS:
        raise ConfigPartsError(f"the config index holds an unsupported pointer: {value[:200]}")
    return pointer


def decode(pointer: Pointer, parts: list[str]) -> str:
    """The config text from its parts, checked against the pointer's digest."""
    if len(parts) != pointer.parts:
        raise ConfigPartsError(f"expected {pointer.parts} config parts, read {len(parts)}")
    try:
        data = gzip.decompress(base64.b64decode("".join(parts), validate=True))
    except (ValueError, OSError, EOFError) as exc:
        raise ConfigPartsError(f"the config parts do not decompress (a deploy in progress?): {exc}") from exc
    if hashlib.sha256(data).hexdigest() != pointer.sha256:
        raise ConfigPartsError("the config parts do not match the index's digest (a deploy in progress?)")
    return data.decode()
