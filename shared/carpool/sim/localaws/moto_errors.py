"""Local AWS's error answers without a stampede on moto's service-name table.

To serialise an error, moto finds the service of the exception's package through
`service_name_from_moto_package_name`, which builds a table of every botocore service name by creating
a botocore Session and listing its data directory (some 440 folders, each stat-ed: about 50 ms of CPU).
moto caches the answer per package with `functools.cache`, but the cache is filled only when the first
call returns: requests that fail at once before that (six CreateLaunchTemplate calls answered "already
exists" by a cold start's concurrent template step) each build the table, and on two cores they queue
for 300 ms of wall time that real AWS never charges. The replacement builds the table once per process,
under a lock, from the same Session listing, when the patch is installed (local AWS starting), and
answers exactly as moto's function does.
"""

from __future__ import annotations

import threading

from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced

_UTILS = "moto.core.utils"
_LOCK = threading.Lock()
#: moto package name -> botocore service name (`None`: not built yet); the same for every install
_table: dict[str, str] | None = None


def service_names() -> dict[str, str]:
    """moto's lookup table (botocore service names by their hyphen-less form), built once."""
    global _table
    with _LOCK:
        if _table is None:
            from botocore.session import Session

            _table = {name.replace("-", ""): name for name in Session().get_available_services()}
        return _table


def service_name_from_moto_package_name(moto_package_name: str) -> str:
    return service_names().get(moto_package_name, moto_package_name)


class ServiceNamesOnce(MotoPatch):
    """`service_name_from_moto_package_name` reads one table built once (see the module)."""

    replaces = (Internal(_UTILS, "service_name_from_moto_package_name", "7a76495600e3a446"),)
    relies_on = (Internal("moto.core.errors", "get_exception_service_model", "66d5361614887ac0"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core import utils

        original = utils.__dict__["service_name_from_moto_package_name"]
        service_names()  # built now, while local AWS starts, not inside the first failing request
        utils.service_name_from_moto_package_name = service_name_from_moto_package_name  # type: ignore[assignment]
        return [(utils, "service_name_from_moto_package_name", original)]
