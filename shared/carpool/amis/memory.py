"""An `AmiSource` over plain data, for the offline CLI, the simulation and tests.

It implements the subset of DescribeImages filtering carpool's selector terms produce (`image-id`,
`name` with `*`/`?` wildcards, `tag:<key>`, `tag-key`, `state`, `architecture`) and owners
(`self`, `amazon`, account ids), so resolution runs the same code path offline as against AWS.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from carpool.amis.aliases import Alias, alias_paths
from carpool.amis.model import (
    EC2_TO_KUBE_ARCH,
    KUBE_TO_EC2_ARCH,
    AmiSelectionError,
    parse_time,
    variant_from_name,
)

SELF_ACCOUNT = "111122223333"


@dataclass
class InMemoryAmiSource:
    """SSM parameters and EC2 images held in memory, answering like the AWS APIs would."""

    images: list[dict[str, Any]] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    account_id: str = SELF_ACCOUNT

    def get_parameter(self, path: str) -> str | None:
        return self.parameters.get(path)

    def describe_images(
        self,
        image_ids: list[str] | None = None,
        filters: list[dict[str, Any]] | None = None,
        owners: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        out = []
        for image in self.images:
            if image_ids is not None and image.get("ImageId") not in image_ids:
                continue
            if owners and not any(self._owned_by(image, o) for o in owners):
                continue
            if all(_matches(image, f) for f in filters or []):
                out.append(dict(image))
        return out

    def _owned_by(self, image: Mapping[str, Any], owner: str) -> bool:
        if owner == "self":
            return image.get("OwnerId") == self.account_id
        return owner in (image.get("OwnerId"), image.get("ImageOwnerAlias"))


def _matches(image: Mapping[str, Any], flt: Mapping[str, Any]) -> bool:
    name, values = str(flt["Name"]), [str(v) for v in flt.get("Values", [])]
    tags = {t["Key"]: t["Value"] for t in image.get("Tags", [])}
    if name == "tag-key":
        return any(v in tags for v in values)
    if name.startswith("tag:"):
        actual = tags.get(name[4:])
        return actual is not None and any(fnmatch.fnmatchcase(actual, v) for v in values)
    field_name = {"image-id": "ImageId", "name": "Name", "state": "State", "architecture": "Architecture"}.get(name)
    if field_name is None:
        raise ValueError(f"InMemoryAmiSource: unsupported DescribeImages filter {name!r}")
    actual = str(image.get(field_name, "available" if field_name == "State" else ""))
    return any(fnmatch.fnmatchcase(actual, v) for v in values)


# -- the `--ami-file` format ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AmiEntry:
    """One image as a person writes it in an `--ami-file` (`{id, name, arch, variant?, creationDate,
    deprecated?, parameter?, owner?, tags?}`)."""

    id: str
    name: str
    arch: str  # Kubernetes (amd64/arm64) or EC2 (x86_64/arm64) spelling
    creation_date: str
    variant: str | None = None
    deprecated: bool = False
    parameter: str | None = None
    owner: str = "amazon"
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def ec2_arch(self) -> str:
        return KUBE_TO_EC2_ARCH.get(self.arch, self.arch)

    @property
    def kube_arch(self) -> str:
        return EC2_TO_KUBE_ARCH.get(self.arch, self.arch)

    def image(self) -> dict[str, Any]:
        """The DescribeImages shape. A deprecated entry gets a DeprecationTime equal to its creation."""
        img: dict[str, Any] = {
            "ImageId": self.id,
            "Name": self.name,
            "Architecture": self.ec2_arch,
            "CreationDate": self.creation_date,
            "State": "available",
            "Tags": [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())],
        }
        if self.owner in ("amazon", "self"):
            img["ImageOwnerAlias"] = self.owner if self.owner == "amazon" else None
            img["OwnerId"] = SELF_ACCOUNT if self.owner == "self" else "137112412989"
        else:
            img["OwnerId"] = self.owner
        if self.deprecated:
            img["DeprecationTime"] = self.creation_date or "1970-01-01T00:00:00Z"
        return img


def parse_entries(raw: Iterable[Mapping[str, Any]]) -> list[AmiEntry]:
    """Validate `--ami-file` records with errors that name the record and field."""
    out = []
    for i, rec in enumerate(raw):
        missing = [k for k in ("id", "name", "arch") if not rec.get(k)]
        if missing:
            raise AmiSelectionError(f"ami-file record #{i}: missing {', '.join(missing)}")
        arch = str(rec["arch"])
        if arch not in EC2_TO_KUBE_ARCH and arch not in KUBE_TO_EC2_ARCH:
            raise AmiSelectionError(f"ami-file record #{i} ({rec['id']}): arch {arch!r} is not amd64/arm64")
        out.append(
            AmiEntry(
                id=str(rec["id"]),
                name=str(rec["name"]),
                arch=arch,
                creation_date=str(rec.get("creationDate", "")),
                variant=rec.get("variant"),
                deprecated=bool(rec.get("deprecated", False)),
                parameter=rec.get("parameter"),
                owner=str(rec.get("owner", "amazon")),
                tags=dict(rec.get("tags") or {}),
            )
        )
    return out


def source_from_entries(
    entries: Iterable[AmiEntry], aliases: Iterable[Alias] = (), cluster_version: str = ""
) -> InMemoryAmiSource:
    """An in-memory source in which each alias path points at the matching entry.

    An entry with `parameter` answers exactly that path. Otherwise an alias path is answered by the best
    entry (non-deprecated, newest) with the path's arch whose variant (explicit, else read from the
    name) is one the path serves. The file lists the images the aliases should resolve to; this lets it
    stay short instead of spelling every SSM path.
    """
    entries = list(entries)
    params = {e.parameter: e.id for e in entries if e.parameter}
    for alias in aliases:
        for ap in alias_paths(alias, cluster_version, check_version=False):
            if ap.path in params:
                continue
            chosen = _best_entry_for(entries, ap.arch, ap.variants)
            if chosen is not None:
                params[ap.path] = chosen.id
    return InMemoryAmiSource(images=[e.image() for e in entries], parameters=params)


def _best_entry_for(entries: list[AmiEntry], arch: str, variants: tuple[str, ...]) -> AmiEntry | None:
    """The path's primary variant decides which image it publishes (x86_64 Bottlerocket: standard)."""
    fits = [
        e
        for e in entries
        if not e.parameter and e.kube_arch == arch and (e.variant or variant_from_name(e.name)) == variants[0]
    ]
    return min(fits, key=_entry_preference, default=None)


def _entry_preference(e: AmiEntry) -> tuple[bool, float, str]:
    """Same order as `model.preference_key`: non-deprecated, newest, lowest id."""
    created = parse_time(e.creation_date) or datetime(1970, 1, 1, tzinfo=UTC)
    return (e.deprecated, -created.timestamp(), e.id)
