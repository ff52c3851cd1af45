"""The AL2023 NodeConfig is written by libyaml's emitter (when PyYAML has it) with PyYAML's safe
representer and carpool's Go-aware resolver: byte for byte what the pure-Python emitter with the same
resolver writes, so the launch templates named after their user data keep their names."""

from __future__ import annotations

import base64
import re
from dataclasses import replace

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from carpool.launch.userdata import NodeBootstrap, al2023
from carpool.taints import Taint

BASE = NodeBootstrap(
    cluster_name="demo",
    endpoint="https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle=base64.b64encode(b"-----BEGIN CERTIFICATE-----\n" * 40).decode(),
    cluster_cidr="10.100.0.0/16",
    cluster_dns="10.100.0.10",
    max_pods=29,
    kube_reserved={"cpu": 70, "memory": 574 * 2**20},
    system_reserved={"memory": 100 * 2**20},
    eviction_hard={"memory.available": "100Mi", "nodefs.available": "10%"},
    labels={"karpenter.sh/nodepool": "default", "team": "payments"},
    taints=(Taint("dedicated", "NoSchedule", "payments"),),
)
values = st.one_of(
    st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?\Z"),
    st.sampled_from(["y", "N", "0o17", "0x1p3", "1e3", "2024-1-2", "inf", "NaN", "true", "null", "0", "1_0"]),
)
names = values.filter(lambda v: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", v) is not None)


class _PurePythonDumper(yaml.SafeDumper):
    """The pure-Python emitter with carpool's resolver: what the NodeConfig was written with before."""


for _tag, (_pattern, _first) in al2023._GO_SCALARS.items():
    _PurePythonDumper.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _pure_python(b: NodeBootstrap) -> str:
    body = yaml.dump(al2023.node_config(b), Dumper=_PurePythonDumper, sort_keys=False, default_flow_style=False,
                     width=2**31 - 1)
    return "# carpool generated NodeConfig\n" + body.rstrip("\n")


def test_the_node_config_is_written_by_libyaml_when_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__
    assert issubclass(al2023._Dumper, yaml.CSafeDumper)


@settings(max_examples=80, deadline=None)
@given(label=values, taint=values, name=names)
def test_libyaml_writes_what_the_pure_python_emitter_writes(label: str, taint: str, name: str) -> None:
    b = replace(BASE, cluster_name=name, labels={**BASE.labels, "team": label},
                taints=(Taint("dedicated", "NoSchedule", taint),))
    assert al2023.node_config_yaml(b) == _pure_python(b)
