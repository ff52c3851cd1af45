"""Cut-down botocore service models for the services every cold start builds a client for.

Creating a botocore client parses the service's whole model: EC2's is 3.7 MB of JSON (some 700
operations), SSM's 0.8 MB, DynamoDB's 0.5 MB. On a Lambda cold start that parsing, and the client
class with one method per operation built from it, is the largest part of making the three clients the
provisioner needs. carpool calls a few dozen operations of those services, so the library ships their
models reduced to those operations and the shapes they reach (documentation dropped), under `models/`,
and `carpool.adapters.aws.session` puts that directory first on its loader's search path. The same goes
for botocore's endpoint data (`endpoints.json`, read by every session's first client), kept to the
services carpool calls. botocore still reads everything else (endpoint rules, paginators, retry rules)
from its own data, and every other service's model is the full one.

The reduced models are the installed botocore's own, trimmed, never edited by hand: regenerate them with
``python -m carpool.adapters.aws.service_models`` after adding a call to `OPERATIONS` or upgrading
botocore (tests/unit/adapters/test_service_models.py checks both: that each is exactly what trimming the
installed model gives, and that every operation carpool's AWS adapters call is in it). An operation
missing here would not exist on the client (AttributeError), hence those checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Directory that holds `<service>/<api version>/service-2.json`, the layout of botocore's own data.
DATA_PATH = Path(__file__).resolve().parent / "models"

#: The operations carpool calls, by service (Powertools' SSM provider included: `config.py` hands it
#: carpool's SSM client, and it calls the three GetParameter* operations).
OPERATIONS: dict[str, tuple[str, ...]] = {
    "ec2": (
        "CreateFleet", "CreateLaunchTemplate", "CreateTags", "DeleteLaunchTemplate", "DescribeImages",
        "DescribeInstanceTypeOfferings", "DescribeInstanceTypes", "DescribeInstances", "DescribeLaunchTemplates",
        "DescribeSecurityGroups", "DescribeSpotPriceHistory", "DescribeSubnets", "TerminateInstances",
    ),
    "ssm": ("GetParameter", "GetParameters", "GetParametersByPath"),
    "dynamodb": (
        "BatchGetItem", "BatchWriteItem", "DeleteItem", "GetItem", "PutItem", "Query", "TransactWriteItems",
        "UpdateItem",
    ),
}  # fmt: skip

#: The services carpool's session builds clients of, whose entries the endpoint data keeps (see `endpoints`).
ENDPOINT_SERVICES: tuple[str, ...] = ("dynamodb", "ec2", "eks", "events", "iam", "pricing", "sqs", "ssm")

_DOCS = frozenset({"documentation", "documentationUrl"})


def trim(model: dict[str, Any], operations: tuple[str, ...]) -> dict[str, Any]:
    """`model` with only `operations` and every shape their inputs, outputs and errors reach."""
    shapes = model["shapes"]
    wanted = [model["operations"][name] for name in operations]
    pending = [o[k]["shape"] for o in wanted for k in ("input", "output") if k in o]
    pending += [e["shape"] for o in wanted for e in o.get("errors", [])]
    kept: set[str] = set()
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        kept.add(name)
        shape = shapes[name]
        pending.extend(m["shape"] for m in shape.get("members", {}).values())
        pending.extend(shape[k]["shape"] for k in ("member", "key", "value") if k in shape)
    reduced = {**model, "operations": {n: model["operations"][n] for n in operations},
               "shapes": {n: shapes[n] for n in sorted(kept)}}
    return _without_docs(reduced)  # type: ignore[no-any-return]


def endpoints(data: dict[str, Any], prefixes: tuple[str, ...]) -> dict[str, Any]:
    """botocore's endpoint data (`endpoints.json`, 1.2 MB, read on every session's first client) with each
    partition's entries for the services of these endpoint prefixes only. The partitions, their regions and defaults stay whole; a
    client's URL comes from the service's endpoint rules, this data only adds per-service overrides
    (global hosts, signing scope, variants). A service left out gets none: a global one such as IAM would
    be sent to a regional host, so every service the library makes a client of must be listed (the test
    of this module checks it)."""
    partitions = [{**p, "services": {k: v for k, v in p["services"].items() if k in prefixes}}
                  for p in data["partitions"]]
    return {**data, "partitions": partitions}


def _without_docs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_docs(v) for k, v in node.items() if k not in _DOCS}
    if isinstance(node, list):
        return [_without_docs(v) for v in node]
    return node


def expected() -> dict[Path, str]:
    """What `DATA_PATH` should hold for the installed botocore: relative path -> file text."""
    import botocore.loaders

    loader = botocore.loaders.create_loader()
    out = {}
    for service, operations in OPERATIONS.items():
        version = loader.determine_latest_version(service, "service-2")
        model = loader.load_service_model(service, "service-2", version)
        text = json.dumps(trim(model, operations), separators=(",", ":"), sort_keys=True)
        out[Path(service) / version / "service-2.json"] = text + "\n"
    # endpoints.json names a service by its endpoint prefix (Pricing's is `api.pricing`)
    prefixes = tuple(loader.load_service_model(s, "service-2")["metadata"]["endpointPrefix"] for s in ENDPOINT_SERVICES)
    text = json.dumps(endpoints(loader.load_data("endpoints"), prefixes), separators=(",", ":"))
    out[Path("endpoints.json")] = text + "\n"
    return out


def main() -> None:
    for relative, text in expected().items():
        target = DATA_PATH / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"{target}: {len(text)} bytes")


if __name__ == "__main__":
    main()
