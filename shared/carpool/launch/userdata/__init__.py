"""User data for carpool's nodes, per AMI family, from one `NodeBootstrap`.

`render(family, bootstrap)` returns plain text; `encode` gives the base64 a launch template carries.
Each family names its format (`carpool.amifamily`): a nodeadm NodeConfig in MIME (`al2023`), TOML
(`bottlerocket`), bootstrap.sh (`al2`), PowerShell calling Start-EKSBootstrap.ps1 (`windows`), or the
user's user data verbatim (custom: carpool cannot know how a custom image joins).

No value can change a document's structure: every field is checked against the rules of the system that
reads it (`checks`) and refused with a `UserDataError` naming the field, and each format is written by a
real emitter or with its own quoting (YAML, TOML escapes, shell single quotes, a MIME boundary no part holds).
"""

from __future__ import annotations

import base64
import importlib

from carpool.amifamily import find_family
from carpool.amifamily.family import BOOTSTRAP_SH, BOTTLEROCKET_TOML, NODEADM, POWERSHELL, VERBATIM
from carpool.launch.userdata.bootstrap import UNREGISTERED, NodeBootstrap, quantities
from carpool.launch.userdata.mime import UserDataError

#: user data format -> the module of this package that renders it, imported on first use: a cluster on
#: one AMI family never loads the others (Bottlerocket's brings in the TOML reader and writer).
_RENDERERS = {NODEADM: "al2023", BOTTLEROCKET_TOML: "bottlerocket", BOOTSTRAP_SH: "al2", POWERSHELL: "windows"}


def render(family: str, bootstrap: NodeBootstrap) -> str:
    known = find_family(family)
    if known is not None and known.user_data == VERBATIM:
        return bootstrap.user_data or ""
    module = _RENDERERS.get(known.user_data) if known is not None else None
    if module is None:
        raise UserDataError(f"user data for AMI family {family.lower()!r} is not supported by carpool yet")
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
