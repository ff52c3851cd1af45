"""Learned capacity (`carpool.capacity`): extrapolation beats the flat 7.5 % rule on the simulation's ground truth."""

from bench.capacity_error import measure

from carpool.catalog import Catalog
from carpool.sim.cluster.specs import Truth


def test_extrapolation_error_is_lower_than_the_flat_rule_for_every_ami_family() -> None:
    catalog, truth = Catalog.snapshot("us-east-1"), Truth()
    for family in ("al2023", "bottlerocket"):
        err = measure(family, truth, catalog)
        assert err.held_out > 500
        assert err.extrapolated_mae_mib < err.flat_mae_mib / 5, err
