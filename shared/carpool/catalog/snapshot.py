"""The offline catalog snapshot: format, writer and (cached) loader.

The snapshot is a gzipped JSON document holding trimmed DescribeInstanceTypes items (only the fields
`builder` reads), the zones each type is offered in, and on-demand prices. Keeping the AWS shapes means
the loader goes through the very same `builder` code as the live path, so the CLI and the simulation see
exactly what a Lambda would build from EC2. `tools/generate_catalog.py` regenerates it.

Spot prices are not stored: they change hourly, so offline spot offerings use `prices.estimate_spot`.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from carpool.catalog import builder
from carpool.catalog.catalog import Catalog

FORMAT_VERSION = 1
_FILENAME = "catalog-{region}.json.gz"


class SnapshotNotFound(LookupError):
    """No snapshot ships for the requested region."""


def available_regions() -> list[str]:
    """Regions with a shipped snapshot."""
    data = resources.files("carpool.catalog").joinpath("data")
    names = [entry.name for entry in data.iterdir()]
    return sorted(n[len("catalog-") : -len(".json.gz")] for n in names if n.startswith("catalog-") and n.endswith(".json.gz"))


@lru_cache(maxsize=8)
def load(region: str = "us-east-1") -> Catalog:
    """The shipped catalog for `region`, built once per process (the result is shared: do not mutate)."""
    resource = resources.files("carpool.catalog").joinpath("data/" + _FILENAME.format(region=region))
    if not resource.is_file():
        raise SnapshotNotFound(
            f"no offline catalog for region {region!r} (shipped: {', '.join(available_regions()) or 'none'})"
        )
    return from_document(json.loads(gzip.decompress(resource.read_bytes())))


def from_document(doc: Mapping[str, Any]) -> Catalog:
    """A catalog from a decoded snapshot document (see `document`)."""
    if doc.get("format") != FORMAT_VERSION:
        raise ValueError(f"catalog snapshot format {doc.get('format')!r} is not supported (expected {FORMAT_VERSION})")
    zone_names: list[str] = doc["zones"]
    zones = {name: [zone_names[i] for i in idx] for name, idx in doc["zonesByType"].items()}
    return builder.build_catalog(doc["instanceTypes"], zones, {}, doc["onDemandPrices"], doc["region"])


# -- writing (used by tools/generate_catalog.py) -------------------------------------------------------
def trim(info: Mapping[str, Any]) -> dict[str, Any]:
    """Only the DescribeInstanceTypes fields `builder` reads (keeps the snapshot small)."""
    network = info.get("NetworkInfo", {})
    out: dict[str, Any] = {
        "InstanceType": info["InstanceType"],
        "BareMetal": bool(info.get("BareMetal")),
        "VCpuInfo": {"DefaultVCpus": info["VCpuInfo"]["DefaultVCpus"]},
        "MemoryInfo": {"SizeInMiB": info["MemoryInfo"]["SizeInMiB"]},
        "ProcessorInfo": _pick(info.get("ProcessorInfo", {}), "SupportedArchitectures", "Manufacturer"),
        "SupportedUsageClasses": list(info.get("SupportedUsageClasses", [])),
        "NetworkInfo": {
            **_pick(network, "DefaultNetworkCardIndex", "Ipv4AddressesPerInterface", "MaximumNetworkInterfaces"),
            "NetworkCards": [
                _pick(c, "NetworkCardIndex", "MaximumNetworkInterfaces", "BaselineBandwidthInGbps")
                for c in network.get("NetworkCards", [])
            ],
        },
    }
    if info.get("Hypervisor"):
        out["Hypervisor"] = info["Hypervisor"]
    if info.get("GpuInfo", {}).get("Gpus"):
        out["GpuInfo"] = {"Gpus": [_pick(g, "Count", "Name", "Manufacturer", "MemoryInfo") for g in info["GpuInfo"]["Gpus"]]}
    if info.get("NeuronInfo", {}).get("NeuronDevices"):
        out["NeuronInfo"] = {"NeuronDevices": [_pick(d, "Count", "Name") for d in info["NeuronInfo"]["NeuronDevices"]]}
    elif info.get("InferenceAcceleratorInfo", {}).get("Accelerators"):
        accelerators = info["InferenceAcceleratorInfo"]["Accelerators"]
        out["InferenceAcceleratorInfo"] = {"Accelerators": [_pick(a, "Count", "Name", "Manufacturer") for a in accelerators]}
    if info.get("InstanceStorageInfo"):
        out["InstanceStorageInfo"] = _pick(info["InstanceStorageInfo"], "TotalSizeInGB", "NvmeSupport")
    return out


def _pick(source: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: source[k] for k in keys if k in source}


def document(
    region: str,
    instance_types: Iterable[Mapping[str, Any]],
    zones: Mapping[str, list[str]],
    ondemand_prices: Mapping[str, float],
    source: str,
) -> dict[str, Any]:
    """The snapshot document: trimmed types (sorted by name), zone indices per type, prices."""
    infos = sorted((trim(i) for i in instance_types), key=lambda i: i["InstanceType"])
    zone_names = sorted({z for name in (i["InstanceType"] for i in infos) for z in zones.get(name, [])})
    index = {z: n for n, z in enumerate(zone_names)}
    return {
        "format": FORMAT_VERSION,
        "region": region,
        "source": source,
        "zones": zone_names,
        "zonesByType": {i["InstanceType"]: [index[z] for z in zones.get(i["InstanceType"], [])] for i in infos},
        "onDemandPrices": {i["InstanceType"]: ondemand_prices[i["InstanceType"]] for i in infos if i["InstanceType"] in ondemand_prices},
        "instanceTypes": infos,
    }


def write(doc: Mapping[str, Any], path: Path) -> int:
    """Write `doc` gzipped and byte-for-byte reproducible (no timestamp in the gzip header); returns size."""
    raw = json.dumps(doc, separators=(",", ":"), sort_keys=False).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    path.write_bytes(buffer.getvalue())
    return len(buffer.getvalue())


def default_path(region: str) -> Path:
    """Where the snapshot for `region` lives inside the source tree (for the generator)."""
    return Path(__file__).parent / "data" / _FILENAME.format(region=region)
