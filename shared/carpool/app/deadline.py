"""When an invocation must stop starting work, so that it always answers before its Lambda timeout.

A Lambda that times out answers nothing: SQS redelivers the whole batch, including the records whose
claims did launch. So the provisioner takes its deadline from the Lambda context
(`get_remaining_time_in_millis`), keeps a margin to build and return the answer, and starts a claim
only while a claim's worst case still fits before the deadline. Claims not started are reported in
`batchItemFailures`, so only their records come back.

A claim's worst case is bounded because every AWS call has one retry layer (botocore's standard mode,
3 attempts, at most 1 s + 2 s of backoff; see `carpool.adapters.aws.session`): a claim makes about six
calls (reserve, subnets, security groups, launch template, CreateFleet, claim write), and a failed one
a few more to release its reservation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: time kept back to build the answer and return it (the partial-batch response, logs, metrics)
ANSWER_MARGIN_SECONDS = 3.0
#: the most one claim takes when every call it makes is throttled to its last attempt
CLAIM_BUDGET_SECONDS = 20.0


@dataclass(frozen=True)
class Deadline:
    """`at` is in `clock`'s seconds (monotonic: wall-clock jumps must not move it)."""

    at: float
    claim_budget: float = CLAIM_BUDGET_SECONDS
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, *, claim_budget: float = CLAIM_BUDGET_SECONDS,
              clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds - ANSWER_MARGIN_SECONDS, claim_budget, clock)

    @classmethod
    def from_lambda_context(cls, context: Any) -> Deadline | None:
        """The invocation's deadline, or None when the context cannot tell (a caller outside Lambda)."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if not callable(remaining):
            return None
        return cls.after(remaining() / 1000.0)

    def remaining(self) -> float:
        return self.at - self.clock()

    def allows_a_claim(self) -> bool:
        """Whether a claim started now surely ends before the deadline."""
        return self.remaining() >= self.claim_budget


def allows_a_claim(deadline: Deadline | None) -> bool:
    return deadline is None or deadline.allows_a_claim()
