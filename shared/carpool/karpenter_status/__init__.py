"""NodePool and EC2NodeClass `status` as Karpenter v1.14.1 writes it, built from what carpool knows.

Pure: data in (the object as the API server holds it, what carpool read or decided), the `status` dict
out. `conditions` is operatorpkg's condition algebra; `nodeclass` and `nodepool` are the AWS provider's
and core's status controllers; `registration` is core's NodeRegistrationHealthy tracker; `patch` says what
to send so that only a change is written. The use case that reads and writes is
`carpool.app.karpenter_status`.
"""
