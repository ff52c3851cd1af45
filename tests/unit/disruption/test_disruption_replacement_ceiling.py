"""A replacement that must be cheaper is launched under a price ceiling: offerings at or above it are
unavailable to scheduling and launching alike, and a round that could cost that much launches nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from carpool import labels as L
from carpool.app.provisioning import price_ceiling, provision
from carpool.catalog import Catalog
from carpool.requirements import Requirements
from carpool.scheduling.result import InstanceChoice, PlannedClaim, SchedulingResult

ZONE = "us-east-1a"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.snapshot()


def _price(catalog: Catalog, name: str) -> float:
    return catalog[name].offering(ZONE, L.CAPACITY_ON_DEMAND).price


def _claim(catalog: Catalog, *names: str, pods: tuple[str, ...] = ("default/a",)) -> PlannedClaim:
    choices = tuple(InstanceChoice(n, _price(catalog, n), L.CAPACITY_ON_DEMAND, ZONE) for n in names)
    return PlannedClaim("c", "pool", choices, len(choices), Requirements(), {}, pods)


def _prepared(catalog: Catalog, *names: str) -> SimpleNamespace:
    return SimpleNamespace(contexts={"pool": SimpleNamespace(types={n: catalog[n] for n in names})})


def test_every_offering_at_or_above_the_ceiling_is_priced_out(catalog: Catalog) -> None:
    ceiling = _price(catalog, "c7i.large")
    out = price_ceiling.priced_out(catalog, ceiling)
    assert ("c7i.large", ZONE, L.CAPACITY_ON_DEMAND) in out  # equal price is not cheaper
    assert ("m7i.xlarge", ZONE, L.CAPACITY_ON_DEMAND) in out
    assert ("c7i-flex.large", ZONE, L.CAPACITY_ON_DEMAND) not in out
    assert all(o.price >= ceiling for it in catalog.types.values() for o in it.offerings
               if (it.name, o.zone, o.capacity_type) in out)


def test_a_round_that_could_cost_the_ceiling_launches_nothing_and_says_why(catalog: Catalog) -> None:
    names = ("c7i-flex.large", "c7i-flex.large")
    result = SchedulingResult(claims=[_claim(catalog, names[0], pods=("default/a",)),
                                      _claim(catalog, names[1], pods=("default/b",))])
    outcome = provision.ProvisionOutcome()
    left = _price(catalog, "c7i.large")  # two flex nodes cost more than one c7i.large
    price_ceiling.hold_to_ceiling(result, _prepared(catalog, *names), set(), left, outcome)
    assert result.claims == []
    assert set(result.unschedulable) == {"default/a", "default/b"}
    assert "must cost less than" in outcome.decisions[0]


def test_a_round_under_the_ceiling_is_launched_as_planned(catalog: Catalog) -> None:
    result = SchedulingResult(claims=[_claim(catalog, "c7i-flex.large")])
    outcome = provision.ProvisionOutcome()
    price_ceiling.hold_to_ceiling(result, _prepared(catalog, "c7i-flex.large"),
                                  price_ceiling.priced_out(catalog, _price(catalog, "c7i.large")),
                                  _price(catalog, "c7i.large"), outcome)
    assert len(result.claims) == 1 and outcome.decisions == []
