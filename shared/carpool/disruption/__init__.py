"""Voluntary disruption, decided as pure functions of a snapshot (no I/O here).

Why a separate package: the disruption Lambda runs every minute and must be able to explain every node it
touches, and the simulation must be able to replay the same decisions. So everything that *decides* lives
here and takes plain data (claims, nodes, pods, NodePools, scheduler inputs, `now`); the executor in
`carpool.app.disruption_executor` gathers that data, carries decisions out across runs and persists progress.

Modules, in the order a run uses them:
- `candidates`: one view per node carpool launched (claim + node + pods + price + age + protection).
- `protection`: do-not-disrupt, Cluster Autoscaler's scale-down-disabled, PodDisruptionBudgets.
- `cron`, `budgets`: NodePool `disruption.budgets` (count/percent, cron windows, reasons).
- `repair`, `emptiness`, `drift`, `expiry`, `consolidation`: one rule each.
- `decision`: what a rule decides (delete | replace, reason, nodes, replacement plan, savings, message).
- `planner`: orders the rules, applies budgets, returns one deterministic decision set per run.
"""
