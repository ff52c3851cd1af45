"""DynamoDB tables and the config parameter."""

from __future__ import annotations

import yaml
from cdk_support import POOLS_YAML, Synth, flatten


def table(synth: Synth, construct: object) -> dict:
    return synth.resources("AWS::DynamoDB::Table")[synth.logical_id(construct)]


def test_state_table_keys_ttl_pitr_sse_and_status_index(default: Synth) -> None:
    resource = table(default, default.stack.tables.state)
    props = resource["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}  # AWS managed key (aws/dynamodb)
    (index,) = props["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "gsi1"
    assert index["KeySchema"] == [
        {"AttributeName": "gsi1pk", "KeyType": "HASH"},
        {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
    ]
    assert {a["AttributeName"] for a in props["AttributeDefinitions"]} == {"pk", "sk", "gsi1pk", "gsi1sk"}
    assert all(a["AttributeType"] == "S" for a in props["AttributeDefinitions"])
    # Kept on uninstall by default: claims describe instances that are still running.
    assert resource["DeletionPolicy"] == "Retain"


def test_state_table_can_be_destroyed_with_the_stack(full: Synth) -> None:
    assert table(full, full.stack.tables.state)["DeletionPolicy"] == "Delete"


def test_idempotency_table_uses_powertools_defaults(default: Synth) -> None:
    resource = table(default, default.stack.tables.idempotency)
    props = resource["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "id", "AttributeType": "S"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert resource["DeletionPolicy"] == "Delete"


def parameter(synth: Synth) -> dict:
    return flatten(synth.resources("AWS::SSM::Parameter")[synth.logical_id(synth.stack.config_parameter)]["Properties"])


def test_config_parameter_from_file_is_stored_verbatim(full: Synth) -> None:
    props = parameter(full)
    assert props["Name"] == "/carpool/prod/config"
    assert props["Tier"] == "Advanced"
    assert props["Type"] == "String"
    assert props["Value"] == POOLS_YAML


def test_default_config_is_a_usable_nodepool_and_nodeclass(default: Synth) -> None:
    props = parameter(default)
    assert props["Name"] == "/carpool/demo/config"
    assert props["Tier"] == "Advanced"
    documents = list(yaml.safe_load_all(props["Value"]))
    assert [d["kind"] for d in documents] == ["NodePool", "EC2NodeClass"]
    pool, node_class = documents
    assert pool["spec"]["limits"] == {"cpu": "100", "memory": "400Gi"}
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == node_class["metadata"]["name"]
    # The node role the stack created, by name (Karpenter v1 EC2NodeClass.spec.role).
    assert node_class["spec"]["role"] == "${" + default.logical_id(default.stack.cluster.node_role) + "}"
    discovery = {"tags": {"karpenter.sh/discovery": "demo"}}
    assert node_class["spec"]["subnetSelectorTerms"] == [discovery]
    assert node_class["spec"]["securityGroupSelectorTerms"] == [discovery]
