"""Whether the config can be used at all: every function that acts asks here first, after the Lease.

The config is the cluster's NodePools and EC2NodeClasses (`carpool.app.cluster_config_source`). When the
cluster does not serve them (Karpenter's CRDs are not installed: `KindNotServed`), or they cannot be
listed on a cold start, nothing can be known about the user's pools: a function that went on would launch
for no pool, or take every node for one whose pool is gone (drift, orphans). So it does nothing and says
why, loudly: an error log line with the fix (the exception's text names the chart and version), and the
`ConfigInvalid` metric (by function) that an alarm watches. As with `carpool.app.standstill`, the answer
is the reason the caller puts on what it did not do (SQS records are retried, a scheduled run returns).

One bad NodePool or EC2NodeClass is not this: it is kept out on its own (`carpool.api.cluster_config`) and
the others are served. A config read from a file (`TextConfigSource`: the bench, tests) is judged
whole, and a bad one stops the function here as well.
"""

from __future__ import annotations

import logging
from typing import Final

from carpool import observability
from carpool.api.loader import ManifestErrors
from carpool.app.wiring import Dependencies
from carpool.karpenter_objects import KindNotServed

log = logging.getLogger(__name__)

#: the metric an alarm watches: an invocation did nothing because the config could not be used
METRIC: Final = "ConfigInvalid"


def unusable_config(deps: Dependencies, function: str) -> str:
    """Why `function` must not act on the config ("" when it may). Said loudly whenever not ""."""
    try:
        deps.config.load()
    except KindNotServed as exc:
        reason = f"carpool does nothing until Karpenter's CRDs are installed: {exc}"
    except ManifestErrors as exc:
        reason = f"the NodePool/EC2NodeClass config is invalid, nothing is done until it is fixed: {exc}"
    except Exception as exc:  # noqa: BLE001 - a cold start that cannot list the config cannot act
        reason = f"cannot read the NodePools and EC2NodeClasses: {type(exc).__name__}: {exc}"
        log.exception("%s: %s", function, reason)
        return reason
    else:
        return ""
    log.error("%s: %s", function, reason)
    observability.emit("ConfigInvalid", function=function)
    return reason
