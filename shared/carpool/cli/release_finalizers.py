"""`carpool release-finalizers`: take carpool's termination finalizer (`karpenter.sh/termination`) off the
Nodes and NodeClaims it launched for a cluster, so that nothing is left stuck Terminating once carpool's
stack is gone (docs/uninstall.md; `carpool.app.uninstall` decides and writes).

Run it after the stack's schedules and queues stopped (no disruption run may add the finalizer back) and
before `cdk destroy`. The cluster is reached as kubectl reaches it, as `carpool apply` does
(`carpool.adapters.k8s.kubeconfig`): `--kubeconfig` (else `$KUBECONFIG`'s first file, else
`~/.kube/config`) and `--context` (else its current one). `--dry-run` lists what it would
change and writes nothing. Prints one line per object, as kubectl does (`node/<name>: ...`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from carpool.karpenter_objects import KarpenterObjects
    from carpool.ports import Cluster

EXIT_USAGE = 2


def release_finalizers_command(
    cluster: Annotated[str, typer.Option(
        "--cluster", help="carpool's cluster name: objects labelled carpool.dev/owned-by=<it> (default: "
                          "$CARPOOL_CLUSTER_NAME)")] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would change; write nothing.")] = False,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context (default: its current one)")] = None,
) -> None:
    """Remove carpool's termination finalizer from the Nodes and NodeClaims it launched (before an uninstall)."""
    from carpool.app.uninstall import release_finalizers

    name = cluster or os.environ.get("CARPOOL_CLUSTER_NAME", "")
    if not name:
        raise _fail("no cluster: pass --cluster or set CARPOOL_CLUSTER_NAME")
    nodes, objects = _connect(name, kubeconfig, context)
    try:
        released = release_finalizers(nodes, objects, name, dry_run=dry_run)
    except Exception as exc:  # noqa: BLE001 - an API refusal (RBAC, unreachable) is one line, not a traceback
        raise _fail(f"cannot release finalizers: {type(exc).__name__}: {exc}") from exc
    suffix = " (dry run)" if dry_run else ""
    for r in released:
        typer.echo(f"{r}{suffix}")
    if not released:
        typer.echo(f"no Node or NodeClaim of cluster {name} holds karpenter.sh/termination")


def _connect(cluster: str, kubeconfig: Path | None, context: str | None) -> tuple[Cluster, KarpenterObjects]:
    """carpool's adapters on the user's kubeconfig (lightkube only when this runs)."""
    from lightkube import Client, ConfigError, KubeConfig

    from carpool.adapters.k8s.cluster import FIELD_MANAGER, LightkubeCluster
    from carpool.adapters.k8s.karpenter_objects import LightkubeKarpenterObjects
    from carpool.adapters.k8s.kubeconfig import default_kubeconfig

    path = kubeconfig or default_kubeconfig()
    if not path.is_file():
        raise _fail(f"kubeconfig {path}: no such file; pass --kubeconfig or set KUBECONFIG")
    try:
        config = KubeConfig.from_file(path).get(context_name=context)
    except (ConfigError, ValueError, KeyError, OSError) as exc:
        raise _fail(f"kubeconfig {path}: {exc}") from None
    client = Client(config=config, field_manager=FIELD_MANAGER)
    return LightkubeCluster.from_client(cluster, client), LightkubeKarpenterObjects(lambda: client)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def register(app: typer.Typer) -> None:
    """Attach this command to the CLI app."""
    app.command("release-finalizers")(release_finalizers_command)
