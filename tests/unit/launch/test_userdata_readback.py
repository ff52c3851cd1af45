"""The AL2023 NodeConfig is checked by reading the emitted YAML back (with libyaml's parser when PyYAML
has it): the check still refuses output that reads back differently, and reads what PyYAML's pure-Python
parser reads."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from carpool.launch.userdata import NodeBootstrap, UserDataError, al2023
from carpool.taints import Taint

BASE = NodeBootstrap(
    cluster_name="demo",
    endpoint="https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
    cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10",
    max_pods=29,
    kube_reserved={"cpu": 70, "memory": 574 * 2**20},
    labels={"karpenter.sh/nodepool": "default", "team": "payments"},
    taints=(Taint("dedicated", "NoSchedule", "payments"),),
)
# label values and taint values as Kubernetes allows them, and the forms Go's YAML reads as non-strings
values = st.one_of(
    st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?\Z"),
    st.sampled_from(["y", "N", "0o17", "0x1p3", "1e3", "2024-1-2", "inf", "NaN", "true", "null", "0", "1_0"]),
)


def test_the_check_reads_with_libyaml_when_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the check falls back to the pure-Python parser"
    assert al2023._CHECK_LOADER is yaml.CSafeLoader


@settings(max_examples=60, deadline=None)
@given(label=values, taint=values)
def test_what_is_emitted_reads_back_the_same_with_either_parser(label: str, taint: str) -> None:
    b = replace(BASE, labels={**BASE.labels, "team": label}, taints=(Taint("dedicated", "NoSchedule", taint),))
    body = al2023.node_config_yaml(b)
    assert list(yaml.load_all(body, Loader=yaml.CSafeLoader)) == list(yaml.load_all(body, Loader=yaml.SafeLoader))
    assert yaml.safe_load(body) == al2023.node_config(b)


def test_output_that_does_not_read_back_as_written_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    b = replace(BASE, cluster_name="123")
    assert "name: '123'" in al2023.node_config_yaml(b)  # quoted: a plain 123 is a number
    emit = yaml.dump

    def lossy(data: Any, **options: Any) -> str:  # an emitter that forgets to quote it
        return str(emit(data, **options)).replace("'123'", "123")

    monkeypatch.setattr(yaml, "dump", lossy)
    with pytest.raises(UserDataError, match="does not read back"):
        al2023.node_config_yaml(b)
