"""User data for carpool's nodes, per AMI family, from one `NodeBootstrap`.

`render(family, bootstrap)` returns plain text; `encode` gives the base64 a launch template carries.
Families: `al2023` (nodeadm NodeConfig in MIME), `bottlerocket` (TOML), `al2` (bootstrap.sh),
`windows2019`/`windows2022`/`windows2025` (PowerShell calling Start-EKSBootstrap.ps1),
`custom` (the user's user data verbatim: carpool cannot know how a custom image joins).

No value can change a document's structure: every field is checked against the rules of the system that
reads it (`checks`) and refused with a `UserDataError` naming the field, and each format is written by a
real emitter or with its own quoting (YAML, TOML escapes, shell single quotes, a MIME boundary no part holds).
"""

from __future__ import annotations

import base64
import importlib

from carpool.launch.userdata.bootstrap import UNREGISTERED, NodeBootstrap, quantities
from carpool.launch.userdata.mime import UserDataError

#: family -> the module of this package that renders it, imported on first use: a cluster on one AMI
#: family never loads the others (Bottlerocket's brings in the TOML reader and writer).
_RENDERERS = {"al2023": "al2023", "bottlerocket": "bottlerocket", "al2": "al2",
              "windows2019": "windows", "windows2022": "windows", "windows2025": "windows"}


def render(family: str, bootstrap: NodeBootstrap) -> str:
    family = family.lower()
    if family == "custom":
        return bootstrap.user_data or ""
    module = _RENDERERS.get(family)
    if module is None:
        raise UserDataError(f"user data for AMI family {family!r} is not supported by carpool yet")
    renderer = importlib.import_module(f"{__name__}.{module}").render
    text: str = renderer(bootstrap)
    try:
        text.encode("utf-8")  # EC2 takes bytes: a lone surrogate (from JSON `\ud800`) has none
    except UnicodeEncodeError as exc:
        raise UserDataError(f"not valid Unicode text at character {exc.start}", field="spec.userData") from None
    return text


def encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


__all__ = ["UNREGISTERED", "NodeBootstrap", "UserDataError", "encode", "quantities", "render"]
