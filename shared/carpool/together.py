"""Independent calls run at once, each in a copy of the caller's context and X-Ray trace.

A cold invocation makes a dozen reads that do not depend on each other (the stored catalog, learned
capacity, unavailable offerings, AMI parameters and images, subnets...). Made one after the other, their
round trips add up; made at once, the invocation waits for the slowest, and the CPU work of one (decoding
the catalog) overlaps the others' waits. boto3 clients are thread-safe once built (`adapters.aws.session`
builds them under a lock). Each call runs in a copy of the caller's `contextvars` context (the running
function's environment, its metrics cluster, its dependencies) and under the caller's X-Ray entity, so
its AWS calls are recorded as the caller's subsegments (`observability.in_this_trace`), as they are when
made on the caller's thread.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from carpool import observability

#: At most this many calls in flight (below botocore's default pool of 10 connections per client).
MAX_WORKERS = 8
T = TypeVar("T")


def run(calls: Sequence[Callable[[], Any]], workers: int = MAX_WORKERS) -> list[Any]:
    """Each call's answer, in order. Every call runs to its end; then the first to raise (in the order
    given) raises here, as if they had been made one after the other and the others had not mattered."""
    if len(calls) <= 1:
        return [call() for call in calls]
    wrapped = [observability.in_this_trace(_in_copy(call)) for call in calls]
    with ThreadPoolExecutor(max_workers=min(workers, len(calls))) as pool:
        futures = [pool.submit(call) for call in wrapped]
    return [f.result() for f in futures]


def beside(here: Callable[[], T], calls: Sequence[Callable[[], Any]], workers: int = MAX_WORKERS) -> tuple[T, list[Any]]:
    """`here()` on this thread while `calls` run on others (see `run`); a failure of `calls` raises
    first, then one of `here`."""
    if not calls:
        return here(), []
    wrapped = [observability.in_this_trace(_in_copy(call)) for call in calls]
    with ThreadPoolExecutor(max_workers=min(workers, len(calls))) as pool:
        futures = [pool.submit(call) for call in wrapped]
        try:
            mine: T | BaseException = here()
        except Exception as exc:
            mine = exc
    answers = [f.result() for f in futures]
    if isinstance(mine, BaseException):
        raise mine
    return mine, answers


def _in_copy(call: Callable[[], Any]) -> Callable[[], Any]:
    context = contextvars.copy_context()
    return lambda: context.run(call)
