"""The compact catalog form (`carpool.catalog.encoding`): a lossless round trip of what the builder makes,
small enough for one DynamoDB item with live spot prices, and a clear refusal of anything else."""

from __future__ import annotations

import dataclasses
import gzip
import json
import random

import pytest

from carpool.catalog import Catalog, CatalogDecodeError, builder, encoding
from carpool.catalog.instance_type import Offering

G4DN = {
    "InstanceType": "g4dn.xlarge", "BareMetal": False, "Hypervisor": "nitro",
    "VCpuInfo": {"DefaultVCpus": 4}, "MemoryInfo": {"SizeInMiB": 16384},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
    "SupportedUsageClasses": ["on-demand", "spot"], "SupportedVirtualizationTypes": ["hvm"],
    "NetworkInfo": {"DefaultNetworkCardIndex": 0, "Ipv4AddressesPerInterface": 10, "MaximumNetworkInterfaces": 3,
                    "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3, "BaselineBandwidthInGbps": 5.0}]},
    "GpuInfo": {"Gpus": [{"Count": 1, "Name": "T4", "Manufacturer": "NVIDIA", "MemoryInfo": {"SizeInMiB": 16384}}]},
    "InstanceStorageInfo": {"TotalSizeInGB": 125, "NvmeSupport": "required"},
}  # fmt: skip


def test_round_trip_gives_what_the_builder_made() -> None:
    zones = {"g4dn.xlarge": ["us-east-1a", "us-east-1c"]}
    spot = {("g4dn.xlarge", "us-east-1a"): 0.2104, ("g4dn.xlarge", "us-east-1c"): 0.1932}
    built = builder.build_catalog([G4DN], zones, spot, {"g4dn.xlarge": 0.526}, "us-east-1")
    decoded = Catalog.decode(built.encode("test"))
    assert decoded.region == "us-east-1"
    assert decoded["g4dn.xlarge"] == built["g4dn.xlarge"]
    assert decoded["g4dn.xlarge"].offering("us-east-1c", "spot") == Offering("us-east-1c", "spot", 0.1932)
    assert decoded["g4dn.xlarge"].requirements == built["g4dn.xlarge"].requirements


def test_unavailable_offerings_stay_unavailable_and_out_of_the_requirements() -> None:
    it = Catalog.snapshot()["m5.large"]
    marked = it.with_offerings(dataclasses.replace(o, available=o.zone != "us-east-1a") for o in it.offerings)
    decoded = Catalog.decode(Catalog("us-east-1", {it.name: marked}).encode("test"))["m5.large"]
    assert decoded == marked
    assert "us-east-1a" not in decoded.zones() and "us-east-1a" in decoded.zones(available_only=False)


def test_the_whole_catalog_round_trips_and_is_reproducible() -> None:
    catalog = Catalog.snapshot()
    data = catalog.encode("test")
    assert data == catalog.encode("test")
    decoded = Catalog.decode(data)
    assert list(decoded) == sorted(catalog) and all(decoded[n] == catalog[n] for n in catalog)


def test_with_a_live_spot_price_per_zone_it_fits_one_dynamodb_item_with_room_to_spare() -> None:
    rng = random.Random(7)
    catalog = Catalog.snapshot()
    live = {
        name: it.with_offerings(
            dataclasses.replace(o, price=round(o.price * rng.uniform(0.2, 0.9), 4)) if o.capacity_type == "spot" else o
            for o in it.offerings
        )
        for name, it in catalog.items()
    }
    data = Catalog("us-east-1", live).encode("EC2 us-east-1")
    assert len(data) < 400_000 / 3, len(data)


@pytest.mark.parametrize(
    "data",
    [b"", b"not gzip", gzip.compress(b"{not json"), gzip.compress(b"[1, 2]"),
     gzip.compress(json.dumps({"format": 1}).encode()),
     gzip.compress(json.dumps({"format": encoding.FORMAT, "region": "us-east-1"}).encode())],
    ids=["empty", "not-gzip", "not-json", "not-an-object", "old-format", "truncated-document"],
)  # fmt: skip
def test_anything_else_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(CatalogDecodeError):
        Catalog.decode(data)


def test_a_document_missing_an_instance_type_field_is_refused() -> None:
    doc = encoding.document("us-east-1", {"m5.large": Catalog.snapshot()["m5.large"]}, "test")
    index = doc["fields"].index("nitro")
    doc["fields"].pop(index)
    for row in doc["types"]:
        row[0].pop(index)
    with pytest.raises(CatalogDecodeError, match="nitro"):
        Catalog.decode(gzip.compress(json.dumps(doc).encode()))
