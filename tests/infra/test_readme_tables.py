"""The README's alarm and CDK context tables, and its first deploy, against what the stack defines.

Both tables are what an operator reads to know what can page them and what they may pass with ``-c``; a
row missing (an alarm nobody knows exists) or left over (a key the app refuses as unknown) is a doc that
lies. Read from the code, not from a synth: the alarm names are the first argument of every
``Monitoring._alarm`` call in ``infra/monitoring.py`` (an f-string's placeholders become ``<>``, as the
README's ``<Queue>``/``<Function>``), the keys are ``infra.settings.KNOWN_KEYS``, the keys the app accepts.
The first deploy must bind the RBAC the default access entries rely on, with the command the stack prints.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from infra.settings import DEFAULT_KUBERNETES_GROUP, KNOWN_KEYS
from infra.stack import kubernetes_access_setup

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MONITORING = REPO / "infra" / "monitoring.py"
PLACEHOLDER = "<>"


def table_names(markdown: str, header: str) -> set[str]:
    """The backquoted names in the first column of the table whose header row is ``header``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == header)
    names: set[str] = set()
    for line in lines[start + 2:]:  # skip the header and the |---| row
        if not line.startswith("|"):
            break
        first = line.strip().strip("|").split("|")[0]
        names.update(re.sub(r"<[^>]*>", PLACEHOLDER, n) for n in re.findall(r"`([^`]+)`", first))
    return names


def _rendered(node: ast.expr) -> str:
    """A string literal as written, an f-string with ``<>`` for each placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else PLACEHOLDER for v in node.values)
    raise AssertionError(f"infra/monitoring.py line {node.lineno}: an alarm named by an expression this test cannot read")


def alarms_created() -> set[str]:
    """Every alarm name `infra/monitoring.py` passes to ``self._alarm``."""
    tree = ast.parse(MONITORING.read_text())
    return {
        _rendered(call.args[0])
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "_alarm"
        and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
    }


def test_table_reader_reads_placeholders_and_pairs() -> None:
    text = "| alarm | fires when |\n|---|---|\n| `A` | x |\n| `<Fn>Errors` / `<Fn>Throttles` | y |\n\nafter"
    assert table_names(text, "| alarm | fires when |") == {"A", "<>Errors", "<>Throttles"}


def test_alarm_table_lists_exactly_the_alarms_the_stack_creates() -> None:
    created = alarms_created()
    assert "PodsPending" in created and "<>DlqNewMessages" in created  # the reader sees both kinds
    documented = table_names(README.read_text(), "| alarm | fires when |")
    assert documented == created, (
        f"README alarm table: missing {sorted(created - documented)}, not created {sorted(documented - created)}"
    )


def test_context_table_lists_exactly_the_keys_the_app_reads() -> None:
    documented = table_names(README.read_text(), "| key | default | meaning |")
    assert documented == set(KNOWN_KEYS), (
        f"README context table: missing {sorted(KNOWN_KEYS - documented)}, "
        f"not read by the app {sorted(documented - KNOWN_KEYS)}"
    )


def section(markdown: str, heading: str) -> str:
    """The text under ``heading`` up to the next section heading (``##`` or deeper)."""
    after = markdown.split(f"\n{heading}\n", 1)[1]
    return re.split(r"\n#{2,6} ", after, maxsplit=1)[0]  # "# " alone is a comment in a code block


def test_the_first_deploy_binds_the_rbac_the_default_access_entries_need() -> None:
    """By default the functions' group is granted nothing until `infra/rbac.yaml` is bound to it: the
    README's zero-to-working steps must run the command the stack prints (output KubernetesAccessSetup)."""
    steps = [line.strip() for line in section(README.read_text(), "### From zero to a working autoscaler").splitlines()]
    for command in kubernetes_access_setup(DEFAULT_KUBERNETES_GROUP).split(" && "):
        assert command in steps, f"README's first deploy lacks `{command}`"


def test_the_first_deploy_installs_karpenters_crds_and_applies_the_nodepools() -> None:
    """The config lives in the cluster: the first deploy installs Karpenter's CRDs, at the version carpool
    follows (the chart, or the same files as shipped here), and applies the user's NodePools with kubectl."""
    steps = [line.strip() for line in section(README.read_text(), "### From zero to a working autoscaler").splitlines()]
    helm = [s for s in steps if s.startswith("helm ") and "oci://public.ecr.aws/karpenter/karpenter-crd" in s]
    assert helm and "--version 1.14.1" in helm[0], steps
    crds = REPO / "tests/data/karpenter-crds-v1.14.1"
    assert any("kubectl apply -f tests/data/karpenter-crds-v1.14.1/" in s for s in steps) and crds.is_dir()
    applied = [s for s in steps if s.startswith("kubectl apply -f") and "nodepool" in s]
    assert applied, steps
    assert not [s for s in steps if s.startswith("npx ") and "configFile" in s], "a deploy needs no config file"
