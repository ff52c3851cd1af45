"""Keeping the shared instance-type catalog warm (run by the scheduled disruption function).

Every function's cold start reads the catalog from the state store instead of building it from EC2
(`carpool.app.sources.StoredCatalogSource`); this is the one place that rebuilds it, when it is due. A
failed refresh must not stop the disruption pass it rides along with: the stored catalog stays in use
until it is stale, and the next run (a minute later) tries again.
"""

from __future__ import annotations

import logging

from carpool import observability
from carpool.app.wiring import Dependencies

log = logging.getLogger(__name__)


def run(deps: Dependencies) -> bool:
    """Refresh the stored catalog if it is due; True when a new one was stored."""
    try:
        return deps.catalog.refresh(deps.clock())
    except Exception:  # any AWS or build error: logged and counted, retried next run
        log.exception("instance-type catalog refresh failed; the stored catalog stays in use")
        observability.emit("CatalogRefreshFailures")
        return False
