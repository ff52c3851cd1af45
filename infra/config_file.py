"""``-c configFile=F``: a one-shot check of NodePool/EC2NodeClass YAML at synth; the stack never stores it.

Why nothing is stored: the config lives in the cluster, as Karpenter's NodePool and EC2NodeClass objects
(installed from Karpenter's own CRDs, v1.14.1), applied with ``kubectl apply`` or ``carpool apply`` and read
by the functions from the API server. An earlier release kept a copy in SSM, written by every deploy: two
places that could disagree, and a deploy without the file replaced the user's pools with a default. So a
synth given ``configFile`` only judges F, exactly as ``carpool validate`` and the functions judge it
(``carpool.api.config.load_config``: Karpenter's CRD schema, carpool's models, only NodePool and
EC2NodeClass documents, every ``nodeClassRef`` resolved), checks what its node classes ask of this
deployment's IAM (``infra/nodeclasses.py``: a role it may not pass, a KMS key not granted), and says how to
apply it. A bad F stops the synth with one line a problem, naming the document and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from carpool.api import config as api_config
from carpool.api.loader import ManifestErrors, Manifests
from carpool.cli.validate import limit_warnings


class ConfigError(ValueError):
    """The NodePool/EC2NodeClass YAML is unusable; the message names the document and field."""


@dataclass(frozen=True)
class CheckedConfig:
    """F's verdict: what it holds and what to do with it (the stack keeps none of it)."""

    path: Path
    manifests: Manifests
    #: problems that do not stop a synth (a limit on a resource no admitted instance type offers)
    warnings: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"configFile {self.path}"

    def how_to_apply(self) -> str:
        """The line a synth prints: F is valid, not stored, and how it reaches the cluster."""
        return (f"{self.source}: ok: {self.manifests.summary()}; the stack does not store it: apply it to the "
                f"cluster with `kubectl apply -f {self.path}` (or `carpool apply -f {self.path}`)")


def check_config_file(path: Path) -> CheckedConfig:
    """The library's one verdict on F; every problem one line (``document: path: message``), as validate
    prints it. Raises `ConfigError`."""
    _check_text(path, f"configFile {path}")
    try:
        manifests = api_config.load_config([path], name=f"configFile {path}")
    except ManifestErrors as exc:
        raise ConfigError("\n".join(str(e) for e in exc.errors)) from None
    return CheckedConfig(path, manifests, tuple(limit_warnings(list(manifests.nodepools))))


def _check_text(path: Path, source: str) -> None:
    """A binary or unreadable file is one `ConfigError` line (the loader's own words are for YAML)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    if "\x00" in text:
        raise ConfigError(f"{source}: not a text file (binary content); expected NodePool/EC2NodeClass YAML")
