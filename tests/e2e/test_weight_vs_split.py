"""Weight is strict priority; `carpool.dev/split` shares equal-weight pools by proportion."""

from .conftest import assert_allocatable_parity

SCENARIO = "002-weight-vs-split.yaml"


def test_every_pod_runs(scenario_result):
    assert scenario_result.pods.pending == 0 and scenario_result.pods.total == 26


def test_higher_weight_wins_even_when_the_lower_pool_is_cheaper(scenario_result):
    pools = [i.node_pool for i in scenario_result.launches]
    assert pools.count("primary") >= 1
    assert "secondary" not in pools


def test_equal_weight_pools_split_seventy_thirty(scenario_result):
    pools = [i.node_pool for i in scenario_result.launches]
    a, b = pools.count("split-a"), pools.count("split-b")
    assert a + b >= 10, pools
    share = a / (a + b)
    assert 0.55 <= share <= 0.85, f"split-a {a} vs split-b {b}"
    assert b >= 1


def test_allocatable_parity(scenario_result):
    """Every node launched offers what the scheduler packed it for (max pods, reserved resources)."""
    assert_allocatable_parity(scenario_result, SCENARIO)
