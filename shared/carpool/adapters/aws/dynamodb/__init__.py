"""carpool's state on one DynamoDB table (layout in docs/design.md, `carpool.state`)."""
