"""Custom (Karpenter pkg/providers/amifamily/custom.go): images chosen by id, name, tags or SSM parameter and
joined by the node class's own user data, passed verbatim. There is no alias, and carpool cannot know which
volume a custom image keeps pod storage on."""

from __future__ import annotations

from typing import Final

from carpool.amifamily.family import LINUX_ROOT, VERBATIM, AmiFamily

CUSTOM: Final = AmiFamily(
    name="custom", api_name="Custom", kind="custom", user_data=VERBATIM,
    volumes=(LINUX_ROOT,), ephemeral_device=None, alias=False,
)  # fmt: skip
