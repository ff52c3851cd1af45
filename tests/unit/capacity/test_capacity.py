"""Learned-capacity rules: merging observations, and estimating types never seen."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from statistics import fmean

import pytest
from hypothesis import given
from hypothesis import strategies as st

from carpool import capacity, labels
from carpool.capacity import MIB, TTL, CapacityEstimate, estimate_memory, from_node, merge
from carpool.state.models import CapacityRecord

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def record(
    instance_type: str = "m5.large",
    image_id: str = "ami-1",
    memory_mib: int | None = 7600,
    alloc_memory_mib: int | None = 6900,
    cpu: int = 1930,
    seen: datetime = NOW,
    ami_family: str = "al2023",
    **extra: int,
) -> CapacityRecord:
    cap = {"cpu": 2000, "pods": 29, "ephemeral-storage": 20 * 1024**3}
    alloc = {"cpu": cpu, "pods": 29, **extra}
    if memory_mib is not None:
        cap["memory"] = memory_mib * MIB
    if alloc_memory_mib is not None:
        alloc["memory"] = alloc_memory_mib * MIB
    return CapacityRecord(
        instance_type=instance_type,
        image_id=image_id,
        ami_family=ami_family,
        capacity=cap,
        allocatable=alloc,
        first_seen=seen,
        last_seen=seen,
        expires_at=seen + TTL,
    )


# -- merge ----------------------------------------------------------------------------------------------
def test_first_observation_is_stored_as_is_with_a_60_day_expiry() -> None:
    observed = record().model_copy(update={"expires_at": NOW})  # whatever the caller set
    merged = merge(None, observed)
    assert merged.samples == 1
    assert merged.expires_at == NOW + timedelta(days=60)
    assert merged.capacity == observed.capacity
    assert capacity.TTL_DAYS == 60


def test_memory_only_goes_down_and_the_rest_follows_the_latest_observation() -> None:
    later = NOW + timedelta(days=3)
    existing = merge(None, record(memory_mib=7600, alloc_memory_mib=6900, cpu=1930))
    merged = merge(existing, record(memory_mib=7700, alloc_memory_mib=6800, cpu=1900, seen=later))

    assert merged.capacity["memory"] == 7600 * MIB  # higher capacity ignored
    assert merged.allocatable["memory"] == 6800 * MIB  # lower allocatable taken
    assert merged.allocatable["cpu"] == 1900  # cpu: latest
    assert merged.samples == 2
    assert merged.first_seen == NOW
    assert merged.last_seen == later
    assert merged.expires_at == later + TTL


def test_an_observation_without_memory_keeps_the_learned_memory() -> None:
    existing = merge(None, record(memory_mib=7600))
    merged = merge(existing, record(memory_mib=None, alloc_memory_mib=None, seen=NOW + timedelta(hours=1)))
    assert merged.capacity["memory"] == 7600 * MIB
    assert merged.allocatable["memory"] == 6900 * MIB


def test_new_resources_appear_and_samples_accumulate() -> None:
    merged = merge(None, record())
    for day in range(1, 4):
        merged = merge(merged, record(seen=NOW + timedelta(days=day), **{"nvidia.com/gpu": 1}))
    assert merged.samples == 4
    assert merged.allocatable["nvidia.com/gpu"] == 1


def test_merging_different_keys_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot merge"):
        merge(record(image_id="ami-1"), record(image_id="ami-2"))


def test_expiry_is_judged_against_now() -> None:
    r = merge(None, record())
    assert not capacity.is_expired(r, NOW + TTL - timedelta(seconds=1))
    assert capacity.is_expired(r, NOW + TTL)


@given(
    memories=st.lists(st.integers(min_value=512, max_value=1_000_000), min_size=1, max_size=20),
)
def test_merge_keeps_the_minimum_of_all_observations(memories: list[int]) -> None:
    merged = None
    for i, m in enumerate(memories):
        merged = merge(merged, record(memory_mib=m, alloc_memory_mib=m // 2, seen=NOW + timedelta(hours=i)))
    assert merged is not None
    assert merged.capacity["memory"] == min(memories) * MIB
    assert merged.allocatable["memory"] == min(m // 2 for m in memories) * MIB
    assert merged.samples == len(memories)
    assert merged.first_seen == NOW


# -- from_node ------------------------------------------------------------------------------------------
def test_from_node_parses_kubernetes_quantities() -> None:
    r = from_node(
        {labels.INSTANCE_TYPE: "m5.large", labels.ARCH: "amd64"},
        {"cpu": "2", "memory": "7935916Ki", "pods": "29"},
        {"cpu": "1930m", "memory": "7261100Ki", "pods": "29"},
        "ami-1",
        "al2023",
        NOW,
    )
    assert r.key == ("m5.large", "ami-1")
    assert r.capacity == {"cpu": 2000, "memory": 7935916 * 1024, "pods": 29}
    assert r.allocatable["cpu"] == 1930
    assert (r.samples, r.first_seen, r.last_seen, r.expires_at) == (1, NOW, NOW, NOW + TTL)


def test_from_node_needs_the_instance_type_label_and_an_image() -> None:
    with pytest.raises(ValueError, match="instance-type"):
        from_node({}, {"memory": "1Gi"}, {}, "ami-1", "al2023", NOW)
    with pytest.raises(ValueError, match="image"):
        from_node({labels.INSTANCE_TYPE: "m5.large"}, {"memory": "1Gi"}, {}, "", "al2023", NOW)


# -- estimates --------------------------------------------------------------------------------------------
RAW = {"m5.large": 8192, "m5.xlarge": 16384, "m5.2xlarge": 32768, "c5.large": 4096, "c5.xlarge": 8192}


def estimate(
    instance_type: str, records: Mapping[tuple[str, str], CapacityRecord], **kw: str
) -> CapacityEstimate:
    arch = kw.pop("arch", "amd64")
    return estimate_memory(
        instance_type,
        capacity.family_of(instance_type),
        RAW[instance_type],
        arch,
        kw.pop("image_id", "ami-1"),
        kw.pop("ami_family", "al2023"),
        records,
        RAW.get,
    )


def as_records(*rs: CapacityRecord) -> dict[tuple[str, str], CapacityRecord]:
    return {r.key: r for r in rs}


def test_default_is_karpenters_formula() -> None:
    e = estimate("m5.large", {})
    assert e == CapacityEstimate(7577 * MIB, "default", "flat 7.5% VM overhead")
    assert e.memory_mib == 7577
    arm = estimate("m5.large", {}, arch="arm64")
    assert arm.memory_mib == (8192 - 64) - 610 and "arm64" in arm.basis


def test_learned_value_wins() -> None:
    e = estimate("m5.large", as_records(record("m5.large", memory_mib=7800)))
    assert (e.source, e.memory_bytes) == ("learned", 7800 * MIB)
    assert "ami-1" in e.basis


def test_same_type_on_another_image_of_the_family_is_the_closest_evidence() -> None:
    records = as_records(
        record("m5.large", image_id="ami-old", memory_mib=7800),
        record("m5.xlarge", image_id="ami-1", memory_mib=15000),  # a sibling that says otherwise
    )
    e = estimate("m5.large", records, image_id="ami-new")
    assert (e.source, e.memory_bytes) == ("extrapolated", 7800 * MIB)
    assert "m5.large on other al2023 image" in e.basis


def test_siblings_in_the_family_give_the_ratio() -> None:
    # m5 loses 4% everywhere it was seen
    records = as_records(
        record("m5.large", memory_mib=round(8192 * 0.96)),
        record("m5.2xlarge", memory_mib=round(32768 * 0.96)),
    )
    e = estimate("m5.xlarge", records)
    assert e.source == "extrapolated"
    assert abs(e.memory_mib - 16384 * 0.96) <= 1
    assert "fitted on 2 m5 al2023 type(s)" in e.basis


def test_other_families_on_the_same_ami_family_come_next() -> None:
    records = as_records(record("m5.large", memory_mib=round(8192 * 0.95)))
    e = estimate("c5.xlarge", records)
    assert e.source == "extrapolated" and abs(e.memory_mib - 8192 * 0.95) <= 1


def test_records_of_another_ami_family_are_not_evidence() -> None:
    records = as_records(record("m5.large", memory_mib=7000, ami_family="bottlerocket"))
    assert estimate("m5.xlarge", records).source == "default"
    assert estimate("m5.large", records, image_id="ami-2").source == "default"


def test_implausible_or_unsized_records_are_ignored() -> None:
    records = as_records(
        record("m5.large", memory_mib=100),  # 99% overhead: bad data
        record("m5.2xlarge", memory_mib=None),  # no memory reported
        record("x9.huge", memory_mib=1000),  # size unknown to the catalog
    )
    assert estimate("m5.xlarge", records).source == "default"


def test_learned_memory_lookup() -> None:
    records = as_records(record("m5.large", memory_mib=7800))
    assert capacity.learned_memory(records, "m5.large", "ami-1") == 7800 * MIB
    assert capacity.learned_memory(records, "m5.large", "ami-2") is None


# -- extrapolation against a synthetic ground truth -----------------------------------------------------------
#: Real overhead = fixed MiB + share of SizeInMiB, different per family (as measured kernels show):
#: what a node of each type would report. The 7.5% default is wrong in a different way for each family.
FAMILIES = {
    # family: (arch, fixed MiB, share)
    "m5": ("amd64", 180, 0.032),
    "c6g": ("arm64", 240, 0.021),
    "r6i": ("amd64", 260, 0.044),
    "t3": ("amd64", 120, 0.061),
}
SIZES = {"large": 1, "xlarge": 2, "2xlarge": 4, "4xlarge": 8, "8xlarge": 16, "12xlarge": 24, "16xlarge": 32}
BASE_MIB = {"m5": 8192, "c6g": 4096, "r6i": 16384, "t3": 8192}


def truth_raw() -> dict[str, int]:
    return {f"{f}.{s}": BASE_MIB[f] * n for f in FAMILIES for s, n in SIZES.items()}


def true_memory_mib(instance_type: str, raw: int) -> int:
    arch, fixed, share = FAMILIES[capacity.family_of(instance_type)]
    return raw - fixed - (64 if arch == "arm64" else 0) - round(raw * share)


def relative_errors(observed_sizes: tuple[str, ...]) -> tuple[list[float], list[float], list[str]]:
    """(extrapolated errors, default errors, bases) over the types of sizes not observed."""
    raw = truth_raw()
    records = as_records(
        *(record(t, memory_mib=true_memory_mib(t, raw[t])) for t in raw if t.split(".")[1] in observed_sizes)
    )
    extrapolated, default, bases = [], [], []
    for t in (t for t in raw if t.split(".")[1] not in observed_sizes):
        family = capacity.family_of(t)
        arch = FAMILIES[family][0]
        truth = true_memory_mib(t, raw[t]) * MIB
        e = estimate_memory(t, family, raw[t], arch, "ami-1", "al2023", records, raw.get)
        assert e.source == "extrapolated" and f"{family} al2023" in e.basis
        bases.append(e.basis)
        extrapolated.append(abs(e.memory_bytes - truth) / truth)
        default.append(abs(capacity.default_memory_bytes(raw[t], arch) - truth) / truth)
    return extrapolated, default, bases


def test_two_sizes_per_family_fit_the_overhead_line() -> None:
    extrapolated, default, bases = relative_errors(("large", "4xlarge"))
    assert all("fitted" in b for b in bases)
    assert fmean(default) > 0.03  # the flat 7.5% is off by ~3% on average here
    assert fmean(extrapolated) < fmean(default) / 100
    assert max(extrapolated) < 0.001


def test_one_size_per_family_still_beats_the_flat_default() -> None:
    extrapolated, default, bases = relative_errors(("xlarge",))
    assert all(b.startswith("mean overhead") for b in bases)
    assert fmean(extrapolated) < fmean(default) / 2


def test_a_family_never_seen_still_gains_from_the_ami_family() -> None:
    raw = truth_raw()
    records = as_records(
        *(record(t, memory_mib=true_memory_mib(t, raw[t])) for t in raw if not t.startswith("t3."))
    )
    e = estimate_memory("t3.xlarge", "t3", raw["t3.xlarge"], "amd64", "ami-1", "al2023", records, raw.get)
    assert e.source == "extrapolated" and "al2023 type(s)" in e.basis
