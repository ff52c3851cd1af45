"""The shipped offline snapshot: loads, is small, is consistent with the price table and with what the builder
makes of moto's data."""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import json
from pathlib import Path

import pytest

from carpool.catalog import Catalog, SnapshotNotFound, builder, prices, snapshot

REPO = Path(__file__).resolve().parents[3]
SNAPSHOT = REPO / "shared" / "carpool" / "catalog" / "data" / "catalog-us-east-1.json.gz"


def test_snapshot_loads() -> None:
    catalog = Catalog.snapshot()
    assert catalog.region == "us-east-1"
    assert len(catalog) > 1000
    assert {"m5.large", "c6g.medium", "t3.micro", "g4dn.xlarge", "c7i-flex.large"} <= set(catalog)


def test_snapshot_is_cached() -> None:
    assert Catalog.snapshot() is Catalog.snapshot("us-east-1")


def test_snapshot_is_small() -> None:
    assert SNAPSHOT.stat().st_size < 300 * 1024


def test_unknown_region_is_a_clear_error() -> None:
    with pytest.raises(SnapshotNotFound, match="eu-west-9.*us-east-1"):
        Catalog.snapshot("eu-west-9")


def test_every_type_has_an_available_priced_on_demand_offering_in_at_most_six_zones() -> None:
    table = prices.static_ondemand("us-east-1")
    for it in Catalog.snapshot().values():
        zones = it.zones()
        assert 1 <= len(zones) <= 6, it.name
        on_demand = [o for o in it.offerings if o.capacity_type == "on-demand"]
        assert on_demand and all(o.available and o.price == table[it.name] for o in on_demand), it.name
        assert it.arch in ("amd64", "arm64")


def test_spot_offerings_use_the_documented_estimate() -> None:
    it = Catalog.snapshot()["m5.large"]
    assert it.offering("us-east-1a", "spot").price == prices.estimate_spot(0.096)


def test_the_loader_decodes_without_building() -> None:
    """The snapshot module reads and decodes; building is the generator's job (no import of the builder)."""
    import ast

    tree = ast.parse(Path(snapshot.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "builder" not in imported and "carpool.catalog.builder" not in imported
    assert snapshot.load("us-east-1").types is Catalog.snapshot().types


def _moto_resources() -> Path | None:
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"


def test_snapshot_is_up_to_date_with_installed_moto() -> None:
    """Regenerating from the installed moto data gives the shipped document (run tools/generate_catalog.py)."""
    root = _moto_resources()
    shipped_bytes = SNAPSHOT.read_bytes()
    shipped = json.loads(gzip.decompress(shipped_bytes))
    if root is None or f"moto {importlib.metadata.version('moto')} " not in shipped["source"]:
        pytest.skip("snapshot was generated from another moto version")
    with gzip.open(root / "instance_types.json.gz", "rt") as fh:
        infos = json.load(fh)
    with gzip.open(root / "instance_type_offerings" / "availability-zone" / "us-east-1.json.gz", "rt") as fh:
        items = json.load(fh)
    kept = sorted({i["Location"] for i in items})[:6]
    zones = builder.zones_by_type(i for i in items if i["Location"] in kept)
    table = prices.static_ondemand("us-east-1")
    selected = [i for n, i in infos.items() if n in table and builder.is_eks_linux_compatible(i)]
    regenerated = builder.build_catalog(selected, zones, {}, table, "us-east-1")
    assert regenerated.encode(shipped["source"]) == shipped_bytes, (
        "the builder now derives something else: run tools/generate_catalog.py"
    )
