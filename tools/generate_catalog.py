"""Regenerate carpool's offline instance catalog snapshot from moto's shipped EC2 data and the price table.

moto (a test dependency) ships real DescribeInstanceTypes output for every type and the per-zone
DescribeInstanceTypeOfferings of every region; the on-demand table ships with carpool. The snapshot keeps
the types that have an on-demand price and that EKS Linux nodes can use (HVM, x86_64 or arm64), offered in
up to the first `--zones` availability zones, built by `carpool.catalog.builder` (the same code as the live
catalog) and stored in `carpool.catalog.encoding`'s form. Run it again whenever the builder changes what
it derives (the snapshot tests say so).

Usage (from the repo root):
    PYTHONPATH=shared .venv/bin/python tools/generate_catalog.py [--region us-east-1] [--zones 6] [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

from carpool.catalog import Catalog, builder, prices, snapshot


def moto_resources() -> Path:
    """moto's `ec2/resources` directory, found without importing moto (which pulls in boto3)."""
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("moto is not installed: install the test extras (pip install -e '.[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"


def read_gz_json(path: Path) -> Any:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def zones_for(region: str, root: Path, limit: int) -> dict[str, list[str]]:
    """type -> zones from moto's availability-zone offerings, restricted to the first `limit` zones."""
    items = read_gz_json(root / "instance_type_offerings" / "availability-zone" / f"{region}.json.gz")
    kept = sorted({i["Location"] for i in items})[:limit]
    return builder.zones_by_type(i for i in items if i["Location"] in kept)


def select(infos: dict[str, dict[str, Any]], ondemand: dict[str, float]) -> list[dict[str, Any]]:
    """Types with an on-demand price that EKS Linux nodes can run on."""
    return [info for name, info in sorted(infos.items()) if name in ondemand and builder.is_eks_linux_compatible(info)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--zones", type=int, default=6, help="keep at most this many zones (first by name)")
    parser.add_argument("--out", type=Path, default=None, help="output file (default: the package data dir)")
    args = parser.parse_args(argv)

    root = moto_resources()
    infos = read_gz_json(root / "instance_types.json.gz")
    ondemand = prices.static_ondemand(args.region)
    selected = select(infos, ondemand)
    zones = zones_for(args.region, root, args.zones)
    source = (
        f"moto {importlib.metadata.version('moto')} ec2/resources (DescribeInstanceTypes, "
        f"DescribeInstanceTypeOfferings {args.region}); carpool catalog/data/ondemand-prices.json"
    )
    built = builder.build_catalog(selected, zones, {}, ondemand, args.region)
    out = args.out or snapshot.default_path(args.region)
    size = snapshot.write(built.encode(source), out)

    started = time.perf_counter()
    catalog = Catalog.decode(out.read_bytes())
    elapsed_ms = (time.perf_counter() - started) * 1000
    skipped = sorted(set(infos) - {i["InstanceType"] for i in selected})
    shipped_zones = sorted({z for it in catalog.values() for z in it.zones(available_only=False)})
    print(f"wrote {out} ({size:,} bytes): {len(catalog)} types, zones {', '.join(shipped_zones)}")
    print(f"skipped {len(skipped)} types without a price or not usable by EKS Linux nodes")
    print(f"reload check: {elapsed_ms:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
