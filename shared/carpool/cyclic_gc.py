"""Pausing CPython's cyclic garbage collector while a burst of long-lived objects is made.

The collector runs each time 700 more containers were allocated than freed, every tenth run also walks
the middle generation, and now and then one walks the whole heap. Work that allocates a great many objects
which all stay alive and form no garbage cycles (a process's imports, a decoded catalog, 100,000 loaded
pods) sets off collections that re-walk everything made so far and can free nothing: they took as long as
the work itself. Reference counting still frees everything else at once; the collector catches up on its
next run once it is back on.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused(*, freeze: bool = False) -> Iterator[None]:
    """The cyclic collector off for the duration, and back on after it unless something else had
    switched it off. `freeze`: on success, what exists then is moved out of the collector's reach for
    good (`gc.freeze`), for objects that live as long as the process (a Lambda's imports), so that no
    later collection walks them again either."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if enabled:
            gc.enable()
