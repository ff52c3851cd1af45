"""The user's own access to the cluster, for the CLI (`carpool apply`, `carpool status`): a kubeconfig.

Why not the functions' access (`LightkubeCluster.from_settings`: an EKS token presigned with the function's
role): a person at a terminal acts as themselves, with what kubectl uses, so `carpool apply` can do what
`kubectl apply` may and no more. The kubeconfig is found as kubectl finds it: `--kubeconfig`, else
`$KUBECONFIG` (its first file), else `~/.kube/config`; `--context` picks a context, else its current one.
An EKS kubeconfig (`aws eks update-kubeconfig`) authenticates with its `exec` plugin, which lightkube runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from lightkube import Client, ConfigError, KubeConfig

from carpool.adapters.k8s.karpenter_objects import LightkubeKarpenterObjects

__all__ = ["KubeconfigError", "default_kubeconfig", "karpenter_objects"]

#: the field manager kubectl's client-side apply writes as (`kubectl apply` without --server-side)
FIELD_MANAGER = "kubectl-client-side-apply"


class KubeconfigError(Exception):
    """No usable kubeconfig or context; the message names the file and what to pass."""


def default_kubeconfig() -> Path:
    """Where kubectl looks without `--kubeconfig`: the first file of `$KUBECONFIG`, else `~/.kube/config`."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return Path(listed[0]).expanduser() if listed else Path("~/.kube/config").expanduser()


def karpenter_objects(kubeconfig: Path | None = None, context: str | None = None) -> LightkubeKarpenterObjects:
    """Karpenter's objects in the cluster of `kubeconfig`'s `context`. No request is made here."""
    path = kubeconfig or default_kubeconfig()
    if not path.is_file():
        raise KubeconfigError(f"kubeconfig {path}: no such file; pass --kubeconfig or set KUBECONFIG")
    try:
        config = KubeConfig.from_file(path).get(context_name=context)
    except (ConfigError, ValueError, KeyError, OSError) as exc:
        raise KubeconfigError(f"kubeconfig {path}: {exc}") from None
    if config is None:
        raise KubeconfigError(f"kubeconfig {path}: no current context; pass --context")
    client = Client(config=config, field_manager=FIELD_MANAGER)
    return LightkubeKarpenterObjects(lambda: client)
