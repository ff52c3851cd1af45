"""Karpenter v1 fields carpool refuses: each one named, with why, by the loader that `carpool validate`,
the synth and every function use (never accepted and then ignored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from carpool.api.loader import ManifestErrors, load

TERMS = [{"tags": {"karpenter.sh/discovery": "demo"}}]


def nodeclass(**spec: Any) -> dict[str, Any]:
    body = {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": TERMS,
            "securityGroupSelectorTerms": TERMS, **spec}
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "nc"}, "spec": body}


def nodepool(requirements: list[dict[str, Any]] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                          "name": "nc"}, "requirements": requirements or []}}
    if labels:
        template["metadata"] = {"labels": labels}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
            "spec": {"template": template}}


def errors_of(*docs: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestErrors) as info:
        load(list(docs))
    return [(e.path, e.message) for e in info.value.errors]


def test_capacity_reservation_selector_terms_are_refused_by_name() -> None:
    ((path, message),) = errors_of(nodeclass(capacityReservationSelectorTerms=[{"id": "cr-0123abcd"}]))
    assert path == "spec.capacityReservationSelectorTerms"
    assert "capacity reservations are not supported" in message and "\n" not in message


@pytest.mark.parametrize("values", [["reserved"], ["reserved", "reserved"]])
def test_capacity_type_reserved_is_refused_by_name(values: list[str]) -> None:
    """A pool that allows only reserved capacity is meant for reservations, which carpool refuses."""
    req = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": values}
    ((path, message),) = errors_of(nodeclass(), nodepool([req]))
    assert path.startswith("spec.template.spec.requirements[0]")
    assert 'capacity type "reserved" is not supported' in message


def test_capacity_type_reserved_label_is_refused_by_name() -> None:
    ((path, message),) = errors_of(nodeclass(), nodepool(labels={"karpenter.sh/capacity-type": "reserved"}))
    assert path.startswith("spec.template.metadata.labels")
    assert 'capacity type "reserved" is not supported' in message


def test_reserved_beside_spot_or_on_demand_is_honoured_as_karpenter_without_reservations() -> None:
    """No reservation is selected, so no offering is reserved: the pool launches the other types."""
    req = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "reserved"]}
    (pool,) = load([nodeclass(), nodepool([req])]).nodepools
    assert pool.requirements().get("karpenter.sh/capacity-type").values == {"on-demand", "reserved"}


def test_excluding_reserved_is_accepted() -> None:
    req = {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["reserved"]}
    assert load([nodeclass(), nodepool([req])]).nodepools[0].name == "np"


def test_carpool_validate_names_the_refused_fields(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from carpool.cli import app

    req = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump_all([nodeclass(capacityReservationSelectorTerms=[{"id": "cr-0123abcd"}]),
                                        nodepool([req])]))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code != 0
    assert "spec.capacityReservationSelectorTerms" in result.output
    assert "spec.template.spec.requirements[0]" in result.output and 'capacity type "reserved"' in result.output
