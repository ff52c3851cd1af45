"""`EC2NodeClass.spec.amiSelectorTerms` -> the AMIs a node class may launch, each with its requirements.

Resolution is pure: every AWS read goes through an `AmiSource`. Rules (reference.md section 4):
- an `alias` term enumerates every published variant path; the path says arch and variant;
- `id`, `name` (+`owner`, default owners `self` and `amazon`), `tags` and `ssmParameter` terms find
  images whose arch comes from the image's `Architecture` and whose variant comes from its name
  (`model.variant_from_name`);
- among several images for one requirement set (one arch+variant), a non-deprecated image beats a
  deprecated one, then the newest CreationDate wins; a deprecated image is used only when nothing else
  matches that requirement set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from carpool.amifamily import find_family
from carpool.amis.aliases import Alias, alias_paths, parse_alias, windows_requirements
from carpool.amis.model import (
    EC2_TO_KUBE_ARCH,
    AmiNotFound,
    AmiSelectionError,
    AmiSource,
    ResolvedAmi,
    ami_requirements,
    parameters,
    parse_time,
    preference_key,
    variant_from_name,
)
from carpool.requirements import Requirement

DEFAULT_NAME_OWNERS = ("self", "amazon")


@dataclass(frozen=True)
class _Candidate:
    """An image found by a term, before the per-requirement-set choice."""

    image: Mapping[str, Any]
    arch: str
    variant: str
    source: str


# -- term access (pydantic models, dataclasses, or plain camelCase dicts) -----------------------------
_CAMEL = {"ssm_parameter": "ssmParameter"}


def term_field(term: Any, name: str) -> Any:
    """`term.<name>` for objects, `term[<camelCase>]` for dicts; None when absent or empty."""
    if isinstance(term, Mapping):
        value = term.get(_CAMEL.get(name, name), term.get(name))
    else:
        value = getattr(term, name, None)
    return value or None


def selector_terms(nodeclass: Any) -> list[Any]:
    spec = getattr(nodeclass, "spec", nodeclass)
    terms = list(getattr(spec, "ami_selector_terms", None) or [])
    if not terms:
        raise AmiSelectionError("spec.amiSelectorTerms: at least one term is required")
    return terms


def alias_of(nodeclass: Any) -> Alias | None:
    """The node class's alias term, parsed, or None when it selects images some other way."""
    terms = selector_terms(nodeclass)
    aliases = [term_field(t, "alias") for t in terms if term_field(t, "alias")]
    if not aliases:
        return None
    if len(terms) > 1:
        raise AmiSelectionError("spec.amiSelectorTerms: an alias term must be the only term")
    return parse_alias(aliases[0])


def family_of(nodeclass: Any) -> str:
    """The node class's family ("al2023", "bottlerocket", "al2", "windows2022", "custom"): the alias's
    family, else `spec.amiFamily` (required by Karpenter when terms select images without an alias).

    Prefers the `carpool.api` model's own `ami_family()` when it has one, so both agree.
    """
    method = getattr(nodeclass, "ami_family", None)
    if callable(method):
        return str(method()).lower()
    alias = alias_of(nodeclass)
    if alias is not None:
        return alias.family
    declared = getattr(getattr(nodeclass, "spec", nodeclass), "ami_family", None)
    if not declared:
        raise AmiSelectionError("spec.amiFamily is required when amiSelectorTerms has no alias")
    family = str(declared).lower()
    if find_family(family) is None:
        raise AmiSelectionError(f"spec.amiFamily: unknown family {declared!r}")
    return family


# -- resolution ---------------------------------------------------------------------------------------
def resolve(
    nodeclass: Any, cluster_version: str, source: AmiSource, *, now: datetime | None = None
) -> list[ResolvedAmi]:
    """Every AMI the node class selects, one per requirement set, best first.

    `now` decides whether an image's `DeprecationTime` has passed; pass it explicitly in simulations.
    When omitted the wall clock is read here, at the edge, once.
    """
    moment = now or datetime.now(UTC)
    alias = alias_of(nodeclass)
    if alias is not None:
        candidates = _alias_candidates(alias, cluster_version, source)
    else:
        candidates = [c for t in selector_terms(nodeclass) for c in _term_candidates(t, source)]
    return choose(candidates, moment, family=alias.family if alias is not None else "")


def _alias_candidates(alias: Alias, cluster_version: str, source: AmiSource) -> list[_Candidate]:
    paths = alias_paths(alias, cluster_version)
    ids = parameters(source, [ap.path for ap in paths])  # one request for all of them where the source can
    found = [(image_id, ap) for ap in paths if (image_id := ids.get(ap.path))]
    if not found:
        raise AmiNotFound(f"alias {alias}: no AMI published for Kubernetes {cluster_version}")
    images = {img.get("ImageId"): img for img in source.describe_images(image_ids=sorted({i for i, _ in found}))}
    out: list[_Candidate] = []
    for image_id, ap in found:
        image = images.get(image_id)
        if image is None or image.get("State", "available") != "available":
            continue  # the parameter points at an image we cannot see or launch
        out.extend(_Candidate(image, ap.arch, v, ap.path) for v in ap.variants)
    return out


def _term_candidates(term: Any, source: AmiSource) -> list[_Candidate]:
    image_id, ssm = term_field(term, "id"), term_field(term, "ssm_parameter")
    if image_id:
        images = source.describe_images(image_ids=[image_id])
        described = f"id {image_id}"
    elif ssm:
        resolved = parameters(source, [ssm]).get(ssm)  # as aliases read theirs (GetParameters)
        images = source.describe_images(image_ids=[resolved]) if resolved else []
        described = f"ssmParameter {ssm}"
    else:
        filters, owners = term_filters(term)
        if not filters and not owners:
            raise AmiSelectionError("amiSelectorTerms: a term needs one of alias, id, name, tags, ssmParameter")
        images = source.describe_images(filters=filters or None, owners=owners or None)
        described = _describe_filter_term(term)
    return [c for img in images if (c := _image_candidate(img, described)) is not None]


def term_filters(term: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """DescribeImages filters and owners for a name/tags/owner term.

    A `name` term without an `owner` is limited to `self` and `amazon`: without that default anyone's
    public image with a matching name would be picked up. Tag value `*` means "has the tag".
    """
    filters: list[dict[str, Any]] = []
    name, owner, tags = term_field(term, "name"), term_field(term, "owner"), term_field(term, "tags")
    owners = [owner] if owner else (list(DEFAULT_NAME_OWNERS) if name else [])
    if name:
        filters.append({"Name": "name", "Values": [name]})
    for key, value in sorted((tags or {}).items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [v.strip() for v in str(value).split(",")]})
    return filters, owners


def describe_terms(nodeclass: Any) -> str:
    """The node class's AMI selector as a person wrote it ("id ami-0...", "alias al2023@latest", "name x
    owner y; tags k=v"), for a message saying it selected nothing."""
    out = []
    for term in getattr(getattr(nodeclass, "spec", nodeclass), "ami_selector_terms", None) or []:
        if value := term_field(term, "alias"):
            out.append(f"alias {value}")
        elif value := term_field(term, "id"):
            out.append(f"id {value}")
        elif value := term_field(term, "ssm_parameter"):
            out.append(f"ssmParameter {value}")
        else:
            out.append(_describe_filter_term(term))
    return "; ".join(out)


def _describe_filter_term(term: Any) -> str:
    parts = []
    for field_name in ("name", "owner"):
        if value := term_field(term, field_name):
            parts.append(f"{field_name} {value}")
    if tags := term_field(term, "tags"):
        parts.append("tags " + ",".join(f"{k}={v}" for k, v in sorted(tags.items())))
    return " ".join(parts)


def _image_candidate(image: Mapping[str, Any], source: str) -> _Candidate | None:
    arch = EC2_TO_KUBE_ARCH.get(str(image.get("Architecture", "")))
    if arch is None or image.get("State", "available") != "available":
        return None
    return _Candidate(image, arch, variant_from_name(str(image.get("Name", ""))), source)


# -- choice -------------------------------------------------------------------------------------------
def choose(candidates: Iterable[_Candidate], now: datetime, *, family: str = "") -> list[ResolvedAmi]:
    """Keep the best image per (arch, variant): non-deprecated first, then newest, then lowest id.

    `family` is the alias's family: a Windows alias's images also require the os and windows-build labels."""
    best: dict[tuple[str, str], ResolvedAmi] = {}
    extra = windows_requirements(family)
    for cand in candidates:
        ami = _to_resolved(cand, now, extra)
        key = (ami.arch, ami.variant)
        if key not in best or preference_key(ami) < preference_key(best[key]):
            best[key] = ami
    return sorted(best.values(), key=preference_key)


def _to_resolved(cand: _Candidate, now: datetime, extra: tuple[Requirement, ...]) -> ResolvedAmi:
    image = cand.image
    return ResolvedAmi(
        id=str(image["ImageId"]),
        name=str(image.get("Name", "")),
        arch=cand.arch,
        variant=cand.variant,
        requirements=ami_requirements(cand.arch, cand.variant, extra),
        creation_date=str(image.get("CreationDate", "")),
        deprecated=is_deprecated(image, now),
        source=cand.source,
    )


def is_deprecated(image: Mapping[str, Any], now: datetime) -> bool:
    """An image is deprecated once its `DeprecationTime` has passed (EC2 sets it, often years ahead)."""
    when = parse_time(image.get("DeprecationTime"))
    return when is not None and when <= now
