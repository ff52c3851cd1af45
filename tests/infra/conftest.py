"""Fixtures for the CDK tests: the layer (built once per session), function assets, synthesized stacks.

Synthesis costs seconds per stack, so each deployment variant is synthesized once per session and shared
by every test that asserts on it. These synths skip bundling, as ``cdk ls`` does: the layer's asset hash
is its input digest either way, so the template is the one a bundling synth writes (test_app proves it
for one stack), and no synth copies the ~40 MB layer into a throwaway assembly. What the layer holds,
and that a synth builds and stages it, is tested on the real build (test_layer, test_app).
"""

from __future__ import annotations

import os

# Must be set before the jsii runtime starts (first aws_cdk import).
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import json  # noqa: E402
import shutil  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from aws_cdk import App, Environment  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from cdk_support import (  # noqa: E402
    ACCOUNT,
    CLUSTER_SG,
    NODE_ROLE_ARN,
    POOLS_YAML,
    REGION,
    SKIP_BUNDLING,
    VPC_ID,
    VPC_LOOKUP,
    Synth,
)
from infra.functions import FUNCTIONS_DIR, SPECS  # noqa: E402
from infra.layer import PACKAGE_SOURCE, LayerBuild, build_layer  # noqa: E402
from infra.nag import apply_nag  # noqa: E402
from infra.settings import Settings  # noqa: E402
from infra.stack import CarpoolStack  # noqa: E402

CDK_JSON_CONTEXT: dict[str, Any] = json.loads((Path(__file__).parents[2] / "cdk.json").read_text())["context"]


@pytest.fixture(scope="session")
def layer_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The library the session's layer is built from: a snapshot, so that a test can build the same
    inputs again even while the checkout is being edited. Same relative paths and contents as the
    library, hence the same digest and the same cached layer a synth uses."""
    target = tmp_path_factory.mktemp("layer-source") / "carpool"
    shutil.copytree(PACKAGE_SOURCE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    return target


@pytest.fixture(scope="session")
def layer(layer_source: Path) -> LayerBuild:
    """The real layer, as a synth builds it (cached in build/layer-<digest>: pip runs once per input)."""
    return build_layer(package_source=layer_source, log=lambda _message: None)


@pytest.fixture(scope="session")
def functions_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``functions/`` when every function folder exists; otherwise empty stand-ins outside the repo.

    The handlers are written by someone else, possibly later than these tests: the stack only needs a
    folder to hash for each asset.
    """
    if all((FUNCTIONS_DIR / name).is_dir() for name in SPECS):
        return FUNCTIONS_DIR
    stand_in = tmp_path_factory.mktemp("functions")
    for name in SPECS:
        (stand_in / name).mkdir()
    return stand_in


@pytest.fixture(scope="session")
def synth(functions_dir: Path) -> Callable[..., Synth]:
    """Build a stack from CDK context, the way ``infra/app.py`` does, with both nag packs applied."""

    def make(
        context: dict[str, Any],
        *,
        env: Environment | None = None,
        nag: bool = True,
        customize: Callable[[CarpoolStack], None] | None = None,
    ) -> Synth:
        # cdk.json's feature flags first: the template under test is the one `cdk deploy` produces. One flag
        # is turned off: it changes no template, only makes nag findings raise during synth instead of
        # staying annotations, which is how test_nag reads them.
        app = App(context={**CDK_JSON_CONTEXT, "@aws-cdk/core:annotationsInValidationReport": False,
                           **SKIP_BUNDLING, **context})
        settings = Settings.from_context(app.node.get_all_context())
        stack = CarpoolStack(app, settings.stack_name, settings=settings, functions_dir=functions_dir, env=env)
        if customize is not None:  # lets a test add a deliberately bad resource before the checks run
            customize(stack)
        if nag:
            apply_nag(app, verbose=True)
        return Synth(stack=stack, template=Template.from_stack(stack))

    return make


@pytest.fixture(scope="session")
def default(synth: Callable[..., Synth]) -> Synth:
    """``cdk deploy -c clusterName=demo``: environment-agnostic, every default."""
    return synth({"clusterName": "demo"})


@pytest.fixture(scope="session")
def pools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "nodepools.yaml"
    path.write_text(POOLS_YAML)
    return path


@pytest.fixture(scope="session")
def full(synth: Callable[..., Synth], pools_file: Path) -> Synth:
    """Every option set: own config, existing node role, VPC with a private endpoint, alarm e-mail."""
    return synth(
        {
            "clusterName": "prod",
            "kubernetesAccess": "clusterAdmin",
            "configFile": str(pools_file),
            "nodeRoleArn": NODE_ROLE_ARN,
            "vpcId": VPC_ID,
            "clusterSecurityGroupId": CLUSTER_SG,
            "clusterEndpoint": "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
            "clusterCa": "LS0tLS1CRUdJTi==",
            "alarmEmail": "oncall@example.com",
            "logRetentionDays": "90",
            "logLevel": "debug",
            "retainState": "false",
            **VPC_LOOKUP,
        },
        env=Environment(account=ACCOUNT, region=REGION),
    )


@pytest.fixture(scope="session")
def rbac(synth: Callable[..., Synth]) -> Synth:
    """Least-privilege Kubernetes access through a group, no reserved concurrency, SNS topic only, Karpenter
    installed in a namespace of its own."""
    return synth(
        {
            "clusterName": "rbac_cluster",
            "kubernetesGroup": "carpool-controller",
            "reservedConcurrency": "false",
            "karpenterNamespace": "karpenter",
        }
    )


@pytest.fixture(scope="session")
def no_access_entries(synth: Callable[..., Synth]) -> Synth:
    return synth({"clusterName": "legacy", "accessEntries": "false"}, nag=False)
