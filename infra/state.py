"""DynamoDB: carpool's state table and Powertools' idempotency table.

One state table (single-table design, ``pk``/``sk``) because every item kind (claims, pool usage,
unavailable offerings, learned capacity) is read by key and the conditional writes that keep pool
limits honest need the items in one table anyway. ``gsi1`` (``gsi1pk``/``gsi1sk``) lists claims by
status (launched, registered, ...) for the disruption and orphan sweeps without a scan. Time-bound items
(unavailable offerings, capacity observations) carry ``expiresAt`` so DynamoDB deletes them for free.

Encryption: the AWS managed key (``aws/dynamodb``) rather than a customer managed key. Every access is
then visible in CloudTrail as a KMS call and nothing else needs configuring; a CMK would add a key policy
to maintain and $1/month per cluster for no extra control, since only the functions' roles read the
table. On-demand billing: the load is bursty (a scale-up writes hundreds of items in a second, then
nothing for hours).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

#: Names shared with ``carpool.adapters.aws.dynamodb``; changing one breaks the other.
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expiresAt"
STATUS_INDEX = "gsi1"
STATUS_INDEX_PARTITION_KEY = "gsi1pk"
STATUS_INDEX_SORT_KEY = "gsi1sk"
#: Powertools idempotency defaults (``DynamoDBPersistenceLayer``): key ``id``, TTL ``expiration``.
IDEMPOTENCY_KEY = "id"
IDEMPOTENCY_TTL_ATTRIBUTE = "expiration"


class StateTables(Construct):
    """The two tables; ``retain_state`` keeps the state table when the stack is deleted."""

    def __init__(self, scope: Construct, construct_id: str, *, retain_state: bool) -> None:
        super().__init__(scope, construct_id)
        self.state = dynamodb.Table(
            self,
            "State",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # Claims describe instances that keep running after an uninstall: keep the record of them.
            removal_policy=RemovalPolicy.RETAIN if retain_state else RemovalPolicy.DESTROY,
        )
        self.state.add_global_secondary_index(
            index_name=STATUS_INDEX,
            partition_key=dynamodb.Attribute(name=STATUS_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=STATUS_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        # Idempotency records live for minutes; losing them on uninstall loses nothing.
        self.idempotency = dynamodb.Table(
            self,
            "Idempotency",
            partition_key=dynamodb.Attribute(name=IDEMPOTENCY_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=IDEMPOTENCY_TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.DESTROY,
        )
