"""The provisioner's use case, split where Karpenter splits it: deciding, then launching.

`provision` is the entry (one SQS batch, or the pods a disruption replaces) and reads top to bottom.
Deciding: `confirm` (does the cluster still have the pod pending), `pending` (is it carpool's to serve and
not served already), `world` (what one invocation reads once), `schedule` (pools and a plan, with the room
of `inflight` claims), `price_ceiling` (replacements that must be cheaper), `reserve` (the claims, atomically
within the pools' limits). Launching: `launch` (launch templates, one CreateFleet per group of identical
requests), `settle` (giving back what a claim that got no instance holds, capacity errors falling back) and
`record` (writing launched claims). `invocation.Invocation` holds one call's state, `outcome` what it reports.
"""
