"""Labels a kubelet may not set on its own Node reach it through the API server: the registrar writes them
in the same patch that lifts `karpenter.sh/unregistered`, as Karpenter's registration does."""

from __future__ import annotations

from tests.unit.app.test_app_register import (
    CONFIG,
    STARTUP,
    UNREGISTERED,
    deps_for,
    join,
    node,
    reserve,
    taint_keys,
)

from carpool import labels
from carpool.app import register

RESTRICTED = {"node-restriction.kubernetes.io/isolation": "pci", "kops.k8s.io/instancegroup": "nodes",
              "team.node-restriction.kubernetes.io/owner": "payments"}
POOL_CONFIG = CONFIG.replace("labels: {team: a}", "labels: {team: a, " + ", ".join(
    f"{k}: {v}" for k, v in RESTRICTED.items()) + "}")


def test_labels_the_kubelet_may_not_set_are_written_at_registration_with_the_taint_lift() -> None:
    deps = deps_for(POOL_CONFIG)
    reserve(deps, "c1", "i-1")
    name = join(deps, "i-1", taints=[STARTUP, UNREGISTERED])  # the kubelet registered only what it may set
    assert not set(RESTRICTED) & set(node(deps, name).labels)
    writes: list[dict[str, object]] = []
    patch_node = deps.cluster.patch_node

    def recording(node_name: str, patch: object) -> object:
        writes.append({"labels": dict(getattr(patch, "labels_if_absent", {})),
                       "lifts": set(getattr(patch, "remove_taint_keys", ()))})
        return patch_node(node_name, patch)  # type: ignore[arg-type]

    deps.cluster.patch_node = recording  # type: ignore[method-assign]
    register.reconcile(name, deps, register.RegisterSummary())

    n = node(deps, name)
    assert {k: n.labels[k] for k in RESTRICTED} == RESTRICTED
    assert labels.UNREGISTERED_TAINT not in taint_keys(n)
    [first] = writes[:1]
    assert RESTRICTED.items() <= first["labels"].items()  # type: ignore[attr-defined]
    assert labels.UNREGISTERED_TAINT in first["lifts"]  # type: ignore[operator]


def test_the_kubelet_rule_for_its_own_labels() -> None:
    allowed = ["team", "example.com/x", labels.ZONE, labels.ARCH, "beta.kubernetes.io/arch",
               "node.kubernetes.io/instance-type", "node.kubernetes.io/lifecycle", "x.node.kubernetes.io/y",
               "kubelet.kubernetes.io/z", "a.kubelet.kubernetes.io/z", "karpenter.sh/nodepool"]
    refused = ["node-restriction.kubernetes.io/isolation", "team.node-restriction.kubernetes.io/a",
               "kops.k8s.io/instancegroup", "kubernetes.io/team", "example.kubernetes.io/a", "k8s.io/a",
               "foo.k8s.io/a"]
    assert [k for k in allowed if not labels.kubelet_may_set(k)] == []
    assert [k for k in refused if labels.kubelet_may_set(k)] == []
