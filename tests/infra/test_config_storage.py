"""A config of 200 NodePools, far past one SSM parameter, deployed: compressed STANDARD-tier parts written
before the index that points to them, every function allowed to read exactly those parameters, cdk-nag
clean."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Annotations, Match
from cdk_support import Synth, actions_of, flatten, statements
from infra.functions import SPECS

from carpool import config_parts

PACKS = (Match.string_like_regexp("AwsSolutions-.*"), Match.string_like_regexp("Serverless-.*"))


def two_hundred_pools() -> str:
    """Realistic variety: each team's pool has its own cost centre, taint, zones and limits."""
    docs: list[dict[str, Any]] = []
    for i in range(200):
        team = f"team-{i:03d}"
        docs.append({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": team},
            "spec": {
                "template": {
                    "metadata": {"labels": {"example.com/team": team,
                                            "example.com/cost-centre": hashlib.sha1(team.encode()).hexdigest()[:12]}},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "taints": [{"key": "example.com/team", "value": team, "effect": "NoSchedule"}],
                        "requirements": [
                            {"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                             "values": [["c", "m", "r"][i % 3], "m"]},
                            {"key": "topology.kubernetes.io/zone", "operator": "In",
                             "values": [f"us-east-1{z}" for z in "abc"[: 1 + i % 3]]},
                        ],
                        "expireAfter": f"{24 * (1 + i % 30)}h",
                    },
                },
                "limits": {"cpu": str(16 + i), "memory": f"{64 + 4 * i}Gi"},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": f"{1 + i % 9}m"},
            },
        })
    docs.append({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                 "spec": {"role": "KarpenterNodeRole-big", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                          "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "big"}}],
                          "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "big"}}]}})
    return yaml.safe_dump_all(docs, sort_keys=False)


@pytest.fixture(scope="module")
def big(synth: Callable[..., Synth], tmp_path_factory: pytest.TempPathFactory) -> tuple[Synth, str]:
    text = two_hundred_pools()
    path = tmp_path_factory.mktemp("big") / "nodepools.yaml"
    path.write_text(text)
    return synth({"clusterName": "big", "configFile": str(path)}), text


def test_the_parts_are_standard_parameters_the_index_points_to(big: tuple[Synth, str]) -> None:
    synth, text = big
    assert len(text.encode()) > 10 * config_parts.INLINE_MAX_BYTES
    parameters = synth.resources("AWS::SSM::Parameter")
    index = parameters[synth.logical_id(synth.stack.config_parameter)]
    pointer = config_parts.pointer_of(index["Properties"]["Value"])
    assert pointer is not None and pointer.parts > 1
    part_ids = [synth.logical_id(p) for p in synth.stack.config_parameters.parts]
    assert len(part_ids) == pointer.parts and len(parameters) == pointer.parts + 1
    values = []
    for number, logical in enumerate(part_ids):
        props = parameters[logical]["Properties"]
        assert props["Name"] == f"/carpool/big/config/part-{number}"
        assert props["Tier"] == "Standard"
        assert len(props["Value"]) <= config_parts.PART_MAX_CHARS
        values.append(props["Value"])
    assert config_parts.decode(pointer, values) == text  # the functions read back exactly the file
    assert set(part_ids) <= set(index["DependsOn"])  # CloudFormation writes the parts first


def test_every_function_reads_exactly_the_config_parameters(big: tuple[Synth, str]) -> None:
    synth, _ = big
    template = synth.template.to_json()
    expected = sorted(flatten(synth.stack.resolve(arn)) for arn in synth.stack.config_parameters.parameter_arns)
    for name in SPECS:
        role = synth.logical_id(synth.stack.functions.roles[name])
        [read] = [s for s in statements(template, role) if s.get("Sid") == "ReadConfig"]
        assert sorted(actions_of(read)) == ["ssm:GetParameter", "ssm:GetParameters"]
        assert sorted(flatten(r) for r in read["Resource"]) == expected


def test_cdk_nag_finds_nothing(big: tuple[Synth, str]) -> None:
    synth, _ = big
    annotations = Annotations.from_stack(synth.stack)
    found = [m.entry.data for p in PACKS for m in annotations.find_error("*", p) + annotations.find_warning("*", p)]
    assert found == []
