"""Claim labels the disruption executor persists between runs (all under `carpool.dev/`).

Why claim labels: the disruption Lambda is stateless and runs every minute, while a replacement takes
minutes to register and a drain may wait on PodDisruptionBudgets. `Claim.labels` is a free dict already
stored with the claim (DynamoDB item / in-memory ledger), so progress survives restarts without a new table
or a change to the shared `Claim` model. The claim keeps status REGISTERED while it is being disrupted (see
`carpool.app.consolidation` for why not TERMINATING).
"""

from typing import Final

_C: Final = "carpool.dev/"

#: the reason (decision.Reason) a node is being disrupted; its presence means "disruption in progress"
DISRUPTION: Final = _C + "disruption"
#: "delete" or "replace"
DISRUPTION_ACTION: Final = _C + "disruption-action"
#: comma-separated names of the replacement claims the node waits for before it drains
REPLACED_BY: Final = _C + "replaced-by"
#: ISO-8601 time the decision was taken
DISRUPTED_AT: Final = _C + "disrupted-at"
#: how many times a replacement was launched again (no longer written: a decision whose replacement does not
#: register is abandoned, never relaunched; kept so that claims written before are cleared of it)
REPLACE_ATTEMPTS: Final = _C + "replace-attempts"
#: digest of the set of pods on the node, and when that set last changed (consolidateAfter's clock)
PODS_DIGEST: Final = _C + "pods-digest"
PODS_CHANGED_AT: Final = _C + "pods-changed-at"
#: hash of the NodePool template + EC2NodeClass spec the node was launched from (static drift).
#: Written at launch by the provisioner (`carpool.disruption.drift.spec_hash`); claims without it are
#: only checked for AMI and requirement drift.
SPEC_HASH: Final = _C + "spec-hash"
#: ISO-8601 time the node's remaining pods are deleted regardless of budgets: its drain's start plus the
#: NodePool's terminationGracePeriod (Karpenter's `karpenter.sh/nodeclaim-termination-timestamp`)
TERMINATION_DEADLINE: Final = _C + "termination-deadline"

#: comma-separated names of the replacement claims of a decision that was abandoned because they did not
#: register in time: while one of them is still booting, the node is not a candidate again (Karpenter's
#: simulation refuses to rely on an uninitialized node, so it decides anew only once the replacement is gone)
ABANDONED_FOR: Final = _C + "abandoned-for"

#: every key above: the scheduler must not read them as node labels of in-flight claims
ALL: Final = frozenset({DISRUPTION, DISRUPTION_ACTION, REPLACED_BY, DISRUPTED_AT, REPLACE_ATTEMPTS,
                        PODS_DIGEST, PODS_CHANGED_AT, SPEC_HASH, TERMINATION_DEADLINE, ABANDONED_FOR})
