"""The garbage collector's schedule while a simulation runs.

A simulation keeps in one process what AWS spreads over many: every function's Lambda process, local
AWS (its server thread and all the state it stores) and the cluster with each of its pods as JSON and as
models. CPython's collector scans a generation each time enough objects were allocated, and the oldest
generation is the whole heap: a 10,000-pod burst allocates millions of objects, so with the default
schedule a run spends a quarter of its CPU time re-scanning objects that live until it ends. A Lambda process
holds one function's objects and has no such cost, so leaving it in would bill the handlers for the
simulation's own heap.

While `quiet_collector()` is active, what exists when it starts (modules, local AWS, the scenario set up)
is frozen out of collection (`gc.freeze`) and the young generation is collected after 50,000 allocations
instead of 700 (the older ones after 20 and 10 collections of the one below).
Reference cycles are still collected, just in larger batches. Runs can overlap on threads of one
process: the first to start tunes the collector, the last to finish restores it.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

#: (young, middle, old) thresholds: allocations between young collections, and young (then middle)
#: collections between collections of the next generation
THRESHOLDS = (50_000, 20, 10)

_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def quiet_collector() -> Iterator[None]:
    """Collect less often for the duration (see the module's docstring); restored when the last
    overlapping run ends."""
    _enter()
    try:
        yield
    finally:
        _exit()


def _enter() -> None:
    global _active, _saved
    with _lock:
        if _active == 0:
            threshold = gc.get_threshold()
            _saved = (threshold[0], threshold[1], threshold[2])
            gc.freeze()
            gc.set_threshold(*THRESHOLDS)
        _active += 1


def _exit() -> None:
    global _active, _saved
    with _lock:
        _active -= 1
        if _active == 0 and _saved is not None:
            gc.set_threshold(*_saved)
            _saved = None
            gc.unfreeze()
