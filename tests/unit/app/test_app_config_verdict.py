"""A function reads its config through the one verdict (`carpool.api.config.load_config`): what
`carpool validate` and synth refuse, its cold start refuses with the same line, naming the parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from carpool.api.loader import ManifestErrors
from carpool.app.sources import TextConfigSource

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = (ROOT / "examples" / "karpenter" / "default.yaml").read_text()


def test_a_function_refuses_a_node_pool_naming_a_missing_node_class() -> None:
    text = DEFAULT.replace("    name: default\n      expireAfter", "    name: missing\n      expireAfter")
    assert text != DEFAULT
    with pytest.raises(ManifestErrors) as info:
        TextConfigSource(lambda: text, "/carpool/demo/config").load()
    assert str(info.value) == ("/carpool/demo/config#1 (NodePool default): spec.template.spec.nodeClassRef.name: "
                               "EC2NodeClass 'missing' is not among the loaded manifests (loaded: default)")


def test_a_function_refuses_a_volume_size_without_its_unit() -> None:
    text = DEFAULT + "  blockDeviceMappings:\n    - deviceName: /dev/xvda\n      ebs: {volumeSize: 100}\n"
    with pytest.raises(ManifestErrors) as info:
        TextConfigSource(lambda: text, "/carpool/demo/config").load()
    assert "#2 (EC2NodeClass default): spec.blockDeviceMappings[0].ebs.volumeSize: Invalid value: 100: must be " \
           "of type string" in str(info.value)


def test_a_valid_config_loads() -> None:
    manifests = TextConfigSource(lambda: DEFAULT).load()
    assert [p.name for p in manifests.nodepools] == ["default"]
