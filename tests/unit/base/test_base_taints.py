"""Taints and tolerations (`carpool.taints`), with the Kubernetes matching rules."""

from __future__ import annotations

import pytest

from carpool.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    untolerated,
)

GPU = Taint("nvidia.com/gpu", NO_SCHEDULE, "true")
DEDICATED = Taint("dedicated", NO_EXECUTE, "batch")
SOFT = Taint("spot", PREFER_NO_SCHEDULE)
NO_VALUE = Taint("karpenter.sh/unregistered", NO_EXECUTE)


class TestTolerates:
    def test_equal_matches_key_and_value(self) -> None:
        assert Toleration("nvidia.com/gpu", "Equal", "true").tolerates(GPU)

    def test_equal_value_mismatch(self) -> None:
        assert not Toleration("nvidia.com/gpu", "Equal", "false").tolerates(GPU)

    def test_equal_empty_value_matches_taint_without_value(self) -> None:
        assert Toleration("karpenter.sh/unregistered", "Equal").tolerates(NO_VALUE)
        assert not Toleration("nvidia.com/gpu", "Equal").tolerates(GPU)

    def test_default_operator_is_equal(self) -> None:
        assert Toleration("nvidia.com/gpu", value="true").tolerates(GPU)
        assert not Toleration("nvidia.com/gpu").tolerates(GPU)

    def test_empty_operator_means_equal(self) -> None:
        # Kubernetes treats an unset operator as Equal
        assert Toleration("nvidia.com/gpu", "", "true").tolerates(GPU)
        assert not Toleration("nvidia.com/gpu", "", "false").tolerates(GPU)

    def test_exists_ignores_value(self) -> None:
        assert Toleration("nvidia.com/gpu", "Exists").tolerates(GPU)
        assert Toleration("nvidia.com/gpu", "Exists", "ignored").tolerates(GPU)

    def test_key_mismatch(self) -> None:
        assert not Toleration("other", "Exists").tolerates(GPU)

    @pytest.mark.parametrize("taint", [GPU, DEDICATED, SOFT, NO_VALUE])
    def test_exists_with_empty_key_tolerates_everything(self, taint: Taint) -> None:
        assert Toleration(operator="Exists").tolerates(taint)

    def test_exists_with_empty_key_and_effect_only_that_effect(self) -> None:
        t = Toleration(operator="Exists", effect=NO_SCHEDULE)
        assert t.tolerates(GPU)
        assert not t.tolerates(DEDICATED)

    def test_empty_key_with_equal_tolerates_nothing(self) -> None:
        # Kubernetes rejects this toleration (an empty key needs Exists); carpool never lets it match
        assert not Toleration(operator="Equal").tolerates(NO_VALUE)

    def test_empty_effect_matches_all_effects(self) -> None:
        for effect in (NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE):
            assert Toleration("k", "Exists").tolerates(Taint("k", effect))

    def test_effect_must_match_when_set(self) -> None:
        assert Toleration("nvidia.com/gpu", "Exists", effect=NO_SCHEDULE).tolerates(GPU)
        assert not Toleration("nvidia.com/gpu", "Exists", effect=NO_EXECUTE).tolerates(GPU)
        assert not Toleration("nvidia.com/gpu", "Equal", "true", effect=PREFER_NO_SCHEDULE).tolerates(GPU)


class TestUntolerated:
    def test_no_taints(self) -> None:
        assert untolerated([], []) is None

    def test_first_untolerated_hard_taint(self) -> None:
        assert untolerated([GPU, DEDICATED], []) == GPU
        assert untolerated([GPU, DEDICATED], [Toleration("nvidia.com/gpu", "Exists")]) == DEDICATED

    def test_all_tolerated(self) -> None:
        tolerations = [Toleration("nvidia.com/gpu", "Exists"), Toleration("dedicated", "Equal", "batch")]
        assert untolerated([GPU, DEDICATED], tolerations) is None

    def test_prefer_no_schedule_never_blocks(self) -> None:
        assert untolerated([SOFT], []) is None
        assert untolerated([SOFT, GPU], []) == GPU

    def test_no_execute_blocks(self) -> None:
        assert untolerated([NO_VALUE], []) == NO_VALUE
        assert untolerated([NO_VALUE], [Toleration("karpenter.sh/unregistered", effect=NO_SCHEDULE)]) == NO_VALUE

    def test_wildcard_toleration(self) -> None:
        assert untolerated([GPU, DEDICATED, NO_VALUE], [Toleration(operator="Exists")]) is None

    def test_accepts_any_iterable_of_taints(self) -> None:
        assert untolerated(iter([GPU]), []) == GPU


def test_taint_str() -> None:
    assert str(GPU) == "nvidia.com/gpu=true:NoSchedule"
    assert str(NO_VALUE) == "karpenter.sh/unregistered:NoExecute"


def test_taints_and_tolerations_are_hashable_values() -> None:
    assert Taint("a", NO_SCHEDULE) == Taint("a", NO_SCHEDULE)
    assert len({Taint("a", NO_SCHEDULE), Taint("a", NO_SCHEDULE), Taint("a", NO_EXECUTE)}) == 2
    assert len({Toleration("a"), Toleration("a")}) == 1
