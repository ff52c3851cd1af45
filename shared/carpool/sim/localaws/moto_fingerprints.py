"""`python -m carpool.sim.localaws.moto_fingerprints`: the installed fingerprints of every moto internal carpool's
local AWS patches, for reviewing and recording them after a moto upgrade (see docs/moto-patches.md).

A module of its own because it imports the patch modules, which import `carpool.sim.localaws.moto_patches`.
"""

from __future__ import annotations

# Importing the patch modules registers their patches, in import order (which the listing follows): the
# server and what it imports first (ec2_pages, then the rest), then the speed-ups.
import carpool.sim.localaws.server  # noqa: F401
from carpool.sim.localaws import (  # noqa: F401
    ec2_pages,
    moto_errors,
    moto_events,
    moto_linear,
    moto_serialize,
    motofast,
    shared_models,
)
from carpool.sim.localaws.moto_patches import SUPPORTED_MOTO, MotoPatch, current_fingerprints, moto_version


def main() -> None:
    print(f"moto {moto_version()} (patches written for {SUPPORTED_MOTO})")
    for patch in MotoPatch.registry:
        for where, value in current_fingerprints(patch).items():
            print(f"{patch.__name__:28} {where:80} {value}")


if __name__ == "__main__":
    main()
