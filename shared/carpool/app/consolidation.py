"""Voluntary disruption (emptiness, consolidation, drift, expiry) — see issue "Disruption"."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from carpool.app.wiring import Dependencies


def run(deps: Dependencies, now: datetime, summary: Any) -> None:
    """Nothing voluntary is disrupted yet; only the clean-up in `disrupt` runs."""
    return None
