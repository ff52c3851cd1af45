"""carpool's state on one DynamoDB table (layout in docs/design.md, `carpool.state`), a module per kind
of item stored.

The repositories behave exactly like `carpool.state.memory` (the same tests run on both). What DynamoDB
adds is that the guarantees hold across concurrent Lambdas: conditional writes and transactions decide
races, never a read before a write. Expiry is always checked in code: DynamoDB's TTL deletes items up to
days late, and moto never does.

Items carry a `gsi1pk` so that "all claims", "all nominations" and "all pools" are each one Query on the
`gsi1` index instead of a Scan (the index must project ALL attributes). Index reads are eventually
consistent; only the conditions of writes decide races, and they read the table itself.

The modules, each behind the port it implements:

- `codec`: Python values <-> DynamoDB attribute values (what every item is written and read with).
- `table`: the table (`StateTable`: reads, batched writes) and its transactions (`transact`, with the
  cancellation explained per item, `TransactionCancelled`).
- `ledger`: `DynamoLedger`, the `carpool.state.ports.ClaimLedger`; it writes three kinds of item, each
  with a module for its shape: `claims`, `nominations` and `pool_usage`; `refusals` words why a
  reservation was refused.
- `learned_capacity`: `DynamoCapacityCache`, the `carpool.state.ports.CapacityCache`.
- `offerings`: `DynamoOfferings`, the `carpool.state.ports.OfferingAvailability`.
- `reasons`: `DynamoPodReasons`, the `carpool.state.reasons.PodReasonStore`.

Nothing is imported here, so a reader of one kind of item (`carpool status`, the catalog store) loads
only its module and what that needs.
"""
