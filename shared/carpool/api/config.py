"""The one verdict on NodePools and EC2NodeClasses: `carpool validate`, `cdk synth` and every function.

Why one entry point: each of the three used to judge a config its own way (synth stored a NodePool whose
`nodeClassRef` named no EC2NodeClass, which validate refused; the functions checked neither), so a config
could deploy and then fail every cold start. Here a config is judged once, the same way and in the same
words everywhere: each document against Karpenter's CRD, then carpool's models (`carpool.api.loader`),
then what holds across documents: every `nodeClassRef` names an EC2NodeClass that is there.

A *config* (what synth stores and the functions read) is complete: only NodePool and EC2NodeClass
documents, at least one NodePool, every reference resolved. `carpool validate` also reads files that are
not a config (pods, a NodePool file alone): `complete=False` judges the same documents with the same lines
and checks references only when some EC2NodeClass is given.
"""

from __future__ import annotations

from collections.abc import Iterable

from carpool.api.loader import ManifestError, ManifestErrors, Manifests, Source, load

__all__ = ["CONFIG_KINDS", "load_config"]

#: the kinds a config holds: carpool reads nothing else from it
CONFIG_KINDS = ("NodePool", "EC2NodeClass")


def load_config(sources: Source | Iterable[Source], *, complete: bool = True, name: str = "config") -> Manifests:
    """The manifests of `sources`, or `ManifestErrors` with every problem, one line each.

    `name` labels a problem of the whole config (no NodePool)."""
    manifests = load(sources)
    problems = _other_kinds(manifests) if complete else []
    if complete and not manifests.nodepools:
        problems.append(ManifestError(name, "", "no NodePool; carpool would never launch a node"))
    if complete or manifests.nodeclasses:
        problems.extend(manifests.check_references())
    if problems:
        raise ManifestErrors(problems)
    return manifests


def _other_kinds(manifests: Manifests) -> list[ManifestError]:
    """One problem per document of another kind (a Deployment's pods are one document)."""
    labels = dict.fromkeys(label for (kind, _), label in manifests.documents.items() if kind not in CONFIG_KINDS)
    return [ManifestError(label, "kind", "a config holds only NodePool and EC2NodeClass documents; apply other "
                                         "objects to the cluster with kubectl") for label in labels]
