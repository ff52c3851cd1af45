"""DynamoDB tables, and no config stored beside them."""

from __future__ import annotations

from cdk_support import Synth


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


def test_the_stack_stores_no_config(full: Synth, default: Synth) -> None:
    """The NodePools and EC2NodeClasses live in the cluster: no SSM parameter holds them, with or without
    ``-c configFile`` (``full`` passes one)."""
    for synth in (full, default):
        assert synth.resources("AWS::SSM::Parameter") == {}
