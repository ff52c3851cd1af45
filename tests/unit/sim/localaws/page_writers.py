"""A writer process for the page store's concurrency test, in a module of its own: a spawned process
imports the module its target lives in, and this one imports only the store (not moto, not local AWS),
so the writers start writing while the reader is still reading."""

from __future__ import annotations

from pathlib import Path

from carpool.sim.localaws import page_store


def write_many(root: str, key: str, marker: str, times: int) -> None:
    """Put `times` answers of this writer (`marker`) under `key`, each whole and different from the last."""
    store = page_store.PageStore(Path(root))
    for i in range(times):
        store.put(key, (200, {"W": marker}, f"<{marker}>{i % 3}" + marker * 200_000))
