"""`docs/migrating-from-karpenter.md` holds to what exists: its commands name context keys the stack reads,
files the repository has, kinds Karpenter's CRDs serve and labels carpool writes; its RBAC commands are the
ones the stack prints; its scale command is the one carpool's standstill prints; the log line it quotes is
the one adoption writes. (`tests/e2e/test_from_karpenter.py` is its proof in the simulation.)"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.settings import DEFAULT_KARPENTER_NAMESPACE, DEFAULT_KUBERNETES_GROUP, KNOWN_KEYS
from infra.stack import kubernetes_access_setup
from tests.unit.cli.test_readme_commands import carpool_commands, code_blocks

from carpool import adoption, karpenter_hash
from carpool import labels as L
from carpool.api.k8s import Node
from carpool.app import standstill
from carpool.karpenter_lease import LEASE_NAME, Lease
from carpool.karpenter_objects import KARPENTER_KINDS
from carpool.sim.cluster import karpenter_built as kb

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "migrating-from-karpenter.md"
TEXT = DOC.read_text()


def commands() -> list[str]:
    """Every command line of the doc's code blocks, continuation lines joined."""
    out: list[str] = []
    for _language, lines in code_blocks(TEXT):
        joined = "\n".join(lines).replace("\\\n", " ")
        out += [" ".join(line.split()) for line in joined.splitlines() if line.strip()]
    return out


def test_every_context_key_the_doc_deploys_with_is_one_the_stack_reads() -> None:
    deploys = [c for c in commands() if "aws-cdk@2 deploy" in c or "aws-cdk@2 destroy" in c]
    keys = {m.group(1) for c in deploys for m in re.finditer(r"-c (\w+)=", c)}
    assert {"clusterName", "nodeRoleArn", "karpenterNamespace"} <= keys and keys <= KNOWN_KEYS


def test_the_rbac_commands_are_the_ones_the_stack_prints() -> None:
    printed = kubernetes_access_setup(DEFAULT_KUBERNETES_GROUP, DEFAULT_KARPENTER_NAMESPACE).split(" && ")
    lines = commands()
    assert all(command in lines for command in printed), printed


def test_the_scale_command_is_the_one_carpools_standstill_prints() -> None:
    lease = Lease(namespace=DEFAULT_KARPENTER_NAMESPACE, name=LEASE_NAME, uid="u", holder="karpenter-x",
                  duration_seconds=15, renew_time=datetime(2026, 1, 1, tzinfo=UTC))
    suggested = re.search(r"`(kubectl scale [^`]+)`", standstill._active(lease))
    assert suggested is not None and suggested.group(1) in commands()
    assert "kubectl scale deployment karpenter --namespace kube-system --replicas 2" in commands()  # the hand-back


def test_the_kinds_and_labels_the_doc_gets_exist() -> None:
    gets = [shlex.split(c) for c in commands() if c.startswith("kubectl get")]
    plurals = {k.plural for k in KARPENTER_KINDS}
    assert {"nodeclaims"} <= {g[2] for g in gets} and {g[2] for g in gets} <= plurals | {"nodes"}
    shown = [g[g.index("-L") + 1].split(",") for g in gets if "-L" in g]
    assert shown and set(shown[0]) == {L.NODEPOOL, L.OWNED_BY, L.CLAIM}
    assert f"`{L.TAG_MANAGED_BY}=<cluster>`" in TEXT


def test_the_files_and_commands_it_names_exist() -> None:
    for path in re.findall(r"`((?:infra|tests|examples|docs)/[\w./-]+)`", TEXT) + ["infra/rbac.yaml"]:
        assert (REPO / path).exists(), path
    simulated = carpool_commands(TEXT)
    assert simulated == [["simulate", "examples/024-from-karpenter.yaml"]]
    assert (REPO / "examples/024-from-karpenter.yaml").is_file()
    assert "KarpenterControllerActive" in (REPO / "infra" / "monitoring.py").read_text()


def test_the_adoption_line_it_quotes_is_the_one_adoption_writes() -> None:
    observed = {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}
    pool: dict[str, Any] = {
        "metadata": {"name": "default", "uid": "p", "generation": 1}, "status": observed,
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                        "name": "default"}, "expireAfter": "720h"}}}}
    figure = karpenter_hash.nodepool_hash(pool) or ""
    hashes = kb.hash_annotations(figure, "5763643673275251833")
    pool["metadata"]["annotations"] = hashes
    nodeclass = {"metadata": {"name": "default", "generation": 1, "annotations": hashes}, "status": observed}
    nc = kb.nodeclaim("default-x7k2p", pool, "m5.xlarge", "us-east-1b", "on-demand", hashes)
    nc["status"] = kb.nodeclaim_status("i-0abc1234567890def", "us-east-1b", "ami-1", "ip-10-0-1-17.ec2.internal",
                                       {"cpu": "4"}, {"cpu": "3920m"}, datetime(2026, 1, 1, tzinfo=UTC))
    node = Node.model_validate({"metadata": {"name": "ip-10-0-1-17.ec2.internal"},
                                "spec": {"providerID": "aws:///us-east-1b/i-0abc1234567890def"}})
    around = adoption.Surroundings({"default": pool}, {"default": nodeclass}, {("default", "default"): "h"})
    (adopting,) = adoption.decide([nc], [], [node], datetime(2026, 1, 2, tzinfo=UTC), around).adoptions
    quoted = next(line for line in commands() if line.startswith("NodeClaim default-x7k2p"))
    # the doc shows a pool's figure of its own (EKS Auto Mode's, tests/unit/test_karpenter_hash.py)
    assert quoted == adopting.why.replace("i-0abc1234567890def", "i-0abc...").replace(figure, "4012513481623584108")
