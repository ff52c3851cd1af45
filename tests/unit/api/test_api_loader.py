"""The loader: sources, dispatch, document labels, field paths and error collection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from carpool.api.loader import ManifestError, ManifestErrors, Manifests, load

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "karpenter"

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {ref}}}
      requirements:
        - key: karpenter.sh/capacity-type
          operator: {op}
          values: ["spot"]
"""
CLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
spec:
  role: R
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{a: b}}}}]
  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]
"""


def pool(name: str = "default", ref: str = "default", op: str = "In") -> str:
    return POOL.format(name=name, ref=ref, op=op)


def nodeclass(name: str = "default") -> str:
    return CLASS.format(name=name)


def errors(*sources: Any) -> list[ManifestError]:
    with pytest.raises(ManifestErrors) as info:
        load(sources)
    return info.value.errors


def test_examples_load_from_files_and_directory_of_good_files(tmp_path: Path) -> None:
    m = load([EXAMPLES / "default.yaml", str(EXAMPLES / "bottlerocket.yaml")])
    assert [p.name for p in m.nodepools] == ["default", "batch-bottlerocket"]
    assert [c.name for c in m.nodeclasses] == ["default", "bottlerocket"]
    assert m.check_references() == []
    for f in ("default.yaml", "bottlerocket.yaml"):
        (tmp_path / f).write_text((EXAMPLES / f).read_text())
    (tmp_path / "README.md").write_text("not a manifest")
    assert len(load(tmp_path).nodepools) == 2


def test_text_json_and_dict_sources() -> None:
    as_json = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    m = load(
        [
            pool() + "---\n" + nodeclass(),
            as_json,
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
        ]
    )
    assert (len(m.nodepools), len(m.nodeclasses), len(m.nodes), len(m.pods)) == (1, 1, 1, 1)
    assert m.summary() == "1 NodePool, 1 EC2NodeClass, 1 pod, 1 node"


def test_single_string_source_is_not_iterated_per_character() -> None:
    assert load(pool() + "---\n" + nodeclass()).nodepool("default") is not None


def test_error_names_the_document_and_the_yaml_path() -> None:
    [e] = errors(nodeclass() + "---\n" + pool(op="Like"))
    assert e.document == "<input 1>#2 (NodePool default)"
    assert e.path == "spec.template.spec.requirements[0].operator"
    assert e.message.startswith('Unsupported value: "Like": supported values: "Gte", "Lte", "In"')
    assert str(e).startswith("<input 1>#2 (NodePool default): spec.template.spec.requirements[0].operator: ")


def test_file_document_label(tmp_path: Path) -> None:
    f = tmp_path / "pools.yaml"
    f.write_text("# comment\n---\n" + nodeclass() + "---\n" + pool(name="b", op="Like"))
    [e] = errors(f)
    assert e.document == f"{f}#2 (NodePool b)"


def test_all_errors_of_all_documents_are_collected() -> None:
    found = errors(
        pool(name="a", op="Like") + "---\n" + pool(name="b", op="Foo"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    )
    assert [(e.document, e.path) for e in found] == [
        ("<input 1>#1 (NodePool a)", "spec.template.spec.requirements[0].operator"),
        ("<input 1>#2 (NodePool b)", "spec.template.spec.requirements[0].operator"),
        ("<input 2>#1 (Service s)", "kind"),
    ]
    assert "unsupported kind 'Service'" in found[2].message


@pytest.mark.parametrize(
    ("text", "path", "fragment"),
    [
        (
            "kind: NodePool\napiVersion: karpenter.sh/v1beta1\nmetadata: {name: x}\n",
            "apiVersion",
            "expected 'karpenter.sh/v1'",
        ),
        ("apiVersion: v1\nmetadata: {name: x}\n", "kind", "required field is missing"),
        ("- a\n- b\n", "", "expected a Kubernetes object"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n    - name: c\n      resources: {requests: {cpu: fast}}\n",
            "spec.containers[0].resources.requests[cpu]",
            "invalid quantity 'fast'",
        ),
    ],
)
def test_document_level_errors(text: str, path: str, fragment: str) -> None:
    [e] = errors(text)
    assert e.path == path and fragment in e.message


def test_yaml_syntax_error_reports_the_line() -> None:
    [e] = errors(nodeclass() + "---\nkind: NodePool\nmetadata: {name: [unclosed\n")
    assert e.document == "<input 1>#2"
    assert "invalid YAML" in e.message and "line" in e.message


def test_missing_file() -> None:
    [e] = errors("no/such/file.yaml")
    assert (e.document, e.path, e.message) == ("no/such/file.yaml", "", "file not found")
    assert str(e) == "no/such/file.yaml: file not found"


def test_list_item_errors_have_item_paths() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"}},
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": -1},
            },
        ],
    }
    [e] = errors(doc)
    assert (e.document, e.path) == ("<input 1>#1 (List)", "items[1].spec.replicas")


def test_duplicates_are_errors() -> None:
    found = errors(pool() + "---\n" + pool())
    assert [(e.document, e.path) for e in found] == [("<input 1>#2 (NodePool default)", "metadata.name")]
    assert "duplicate NodePool 'default'" in found[0].message and "<input 1>#1" in found[0].message


def test_check_references() -> None:
    m = load(pool(name="a", ref="missing") + "---\n" + nodeclass())
    [e] = m.check_references()
    assert e.document == "<input 1>#1 (NodePool a)"
    assert e.path == "spec.template.spec.nodeClassRef.name"
    assert "'missing'" in e.message and "loaded: default" in e.message
    other = load(pool().replace("kind: EC2NodeClass", "kind: AKSNodeClass"))
    [e2] = other.check_references()
    assert e2.path == "spec.template.spec.nodeClassRef" and "AKSNodeClass" in e2.message


def test_hand_written_pod_is_pending_but_a_bound_one_is_not() -> None:
    m = load(
        [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"}, "spec": {"nodeName": "n1"}},
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "running"},
                "status": {"phase": "Running"},
            },
        ]
    )
    assert [p.is_provisionable() for p in m.pods] == [True, False, False]


def test_kubectl_output_with_status_loads() -> None:
    text = (
        pool()
        + "status:\n  conditions:\n  - type: Ready\n    status: 'True'\n  resources: {cpu: '4', nodes: '2'}\n"
    )
    text = text.replace(
        "metadata:\n  name: default\n", "metadata:\n  name: default\n  generation: 1\n  managedFields: []\n"
    )
    assert load(text).nodepools[0].metadata.generation == 1


def test_empty_manifests_summary() -> None:
    assert Manifests().summary() == "0 NodePools, 0 EC2NodeClasses"


def test_other_kinds_dispatch() -> None:
    m = load(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "ds", "namespace": "kube-system"},
            },
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "pdb"},
                "spec": {"maxUnavailable": 1},
            },
        ]
    )
    assert m.daemonsets[0].name == "ds" and m.pdbs[0].spec.max_unavailable == 1
    assert m.summary() == "0 NodePools, 0 EC2NodeClasses, 1 DaemonSet, 1 PodDisruptionBudget"


def test_yaml_error_line_is_the_line_of_the_problem() -> None:
    """The C scanner keeps PyYAML's marks: the error points at the offending line, not just "somewhere"."""
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: [unclosed\n"
    with pytest.raises(ManifestErrors) as exc:
        load(text)
    assert "at line 6, column 1" in exc.value.errors[0].message


def test_json_file_is_parsed_as_json_with_its_error_line(tmp_path: Path) -> None:
    good = tmp_path / "pods.json"
    good.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
         "spec": {"containers": [{"name": "c", "image": "x"}]}} for i in range(3)]}))
    assert [p.name for p in load(good).pods] == ["p0", "p1", "p2"]
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "apiVersion": "v1",\n  "kind": "Pod",\n  oops\n}\n')
    with pytest.raises(ManifestErrors) as exc:
        load(bad)
    error = exc.value.errors[0]
    assert error.document == f"{bad}#1"
    assert "invalid JSON" in error.message and "line 4" in error.message


# -- pods validated in one batch -------------------------------------------------------------------------
def _pod(name: str, cpu: Any = "100m", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}, **extra}


def test_errors_of_pods_in_a_list_name_the_item_and_field(tmp_path: Path) -> None:
    items = [_pod("a"), _pod("b", cpu="lots"), _pod("c"), _pod("d", cpu=[1]), {"apiVersion": "v1", "kind": "Pod"}]
    items[4]["metadata"] = {"name": "e", "labels": "oops"}
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    with pytest.raises(ManifestErrors) as info:
        load(path)
    found = [(e.document, e.path) for e in info.value.errors]
    doc = f"{path}#1 (List)"
    assert found == [
        (doc, "items[1].spec.containers[0].resources.requests[cpu]"),
        (doc, "items[3].spec.containers[0].resources.requests[cpu]"),
        (doc, "items[4].metadata.labels"),
    ]
    assert "lots" in info.value.errors[0].message


def test_errors_of_separate_pod_documents_name_each_document() -> None:
    text = "\n---\n".join(json.dumps(p) for p in (_pod("a"), _pod("b", cpu="-x"), _pod("c")))
    with pytest.raises(ManifestErrors) as info:
        load(text)
    assert [(e.document, e.path) for e in info.value.errors] == [
        ("<input 1>#2 (Pod shop/b)", "spec.containers[0].resources.requests[cpu]")]


def test_a_duplicate_pod_is_reported_even_when_another_pod_of_the_batch_is_invalid() -> None:
    text = "\n---\n".join(json.dumps(p) for p in (_pod("a"), _pod("bad", cpu="?"), _pod("a")))
    with pytest.raises(ManifestErrors) as info:
        load(text)
    messages = [(e.document, e.path, e.message) for e in info.value.errors]
    assert messages[0][:2] == ("<input 1>#2 (Pod shop/bad)", "spec.containers[0].resources.requests[cpu]")
    assert messages[1][:2] == ("<input 1>#3 (Pod shop/a)", "metadata.name")
    assert "first defined in <input 1>#1 (Pod shop/a)" in messages[1][2]


def test_pods_and_workloads_keep_the_order_of_their_documents() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    docs = [_pod("first"), deployment, _pod("last"), _pod("bound", spec={"nodeName": "n1", "containers": []})]
    loaded = load("\n---\n".join(json.dumps(d) for d in docs))
    names = [p.name for p in loaded.pods]
    assert names[0] == "first" and names[-2:] == ["last", "bound"] and len(names) == 5
    assert loaded.pods[0].is_unschedulable()  # hand-written pending pods are marked as the scheduler would
    assert not loaded.pods[-1].is_unschedulable()  # a bound pod is not pending


def test_a_pod_list_loads_every_item(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [_pod(f"p{i}") for i in range(300)]}))
    loaded = load(path)
    assert [p.key for p in loaded.pods] == [f"shop/p{i}" for i in range(300)]
    assert loaded.documents[("Pod", "shop/p299")] == f"{path}#1 (List)"
    assert loaded.pods[5].requests()["cpu"] == 100


# -- strict decoding, as the API server's ------------------------------------------------------------
def test_a_key_repeated_inside_a_list_item_is_named_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(pool().replace("          operator: In\n", "          operator: In\n          operator: NotIn\n"))
    with pytest.raises(ManifestErrors) as exc:
        load(path)
    [error] = exc.value.errors
    assert error.path == "spec.template.spec.requirements[0]"
    assert error.message.startswith('duplicate field "operator"')


def test_a_key_repeated_in_a_json_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text('{"apiVersion": "v1", "kind": "Pod", "kind": "Pod", "metadata": {"name": "p"}}')
    with pytest.raises(ManifestErrors) as exc:
        load(path)
    assert [e.message for e in exc.value.errors] == ['duplicate field "kind"']


def test_a_yaml_merge_key_is_not_a_duplicate() -> None:
    text = "base: &b {cpu: '1'}\n" + pool().replace("metadata:\n", "x: {<<: *b, cpu: '2'}\nmetadata:\n", 1)
    with pytest.raises(ManifestErrors) as exc:  # the merge is fine; `x`/`base` are unknown fields
        load(text)
    assert not any("duplicate" in e.message for e in exc.value.errors)
