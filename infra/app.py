"""CDK entry point: ``cdk deploy -c clusterName=NAME`` (cdk.json runs ``.venv/bin/python infra/app.py``).

Run directly (``python infra/app.py -c clusterName=demo``) it synthesizes to ``cdk.out`` the same way,
reading cdk.json's context as defaults, so ``make synth`` works without the Node CLI. Configuration
mistakes (a malformed ARN, an invalid NodePool file, a layer that cannot be built) end with one readable
line instead of a jsii stack trace.

The cluster name comes from ``-c clusterName``, else from ``$CLUSTER_NAME`` (the variable Karpenter's
getting-started guide exports and its controller reads). Without either, commands that only need the
app's shape (``cdk ls``, ``cdk bootstrap``, ``cdk synth`` to look at the template) still work: the app
synthesizes a stack for the placeholder cluster ``clusterName-not-set`` with a warning, and that stack
carries a CloudFormation rule that refuses to create or update it, so it can never be deployed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# `python infra/app.py` puts infra/ (not the repo) on sys.path; the library lives in shared/.
for entry in (REPO_ROOT / "shared", REPO_ROOT):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))
# The jsii runtime nags about Node 20 on every start; the versions are pinned on purpose here.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import Annotations, App, CfnRule, CfnRuleAssertion, Environment, Fn  # noqa: E402

from infra.config_file import ConfigError  # noqa: E402
from infra.functions import VpcLookupError  # noqa: E402
from infra.layer import LayerError  # noqa: E402
from infra.nag import apply_nag  # noqa: E402
from infra.settings import Settings, SettingsError  # noqa: E402
from infra.stack import CarpoolStack  # noqa: E402

USER_ERRORS = (SettingsError, ConfigError, VpcLookupError, LayerError)
#: A bad input (a context key, the config file) ends with exit 2, as a usage error; a VPC or a layer that
#: cannot be looked up or built, with 1.
BAD_INPUTS = (SettingsError, ConfigError)
EXIT_BAD_INPUT = 2
#: Environment variable read when ``-c clusterName`` is not given.
CLUSTER_NAME_ENV = "CLUSTER_NAME"
#: Cluster of the undeployable stack synthesized when no cluster name is given at all.
PLACEHOLDER_CLUSTER = "clusterName-not-set"
PLACEHOLDER_MESSAGE = (
    "no cluster name given, so this is an undeployable placeholder: deploy with "
    "`npx aws-cdk@2 deploy -c clusterName=<your EKS cluster>` (or export CLUSTER_NAME)"
)


def build_app(context: dict[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True) -> tuple[App, CarpoolStack]:
    """The app with one ``carpool-<cluster>`` stack; ``context`` adds to what the CDK CLI passes."""
    app = App(context=context or {}, outdir=outdir)
    placeholder = _default_cluster_name(app)
    settings = Settings.from_context(app.node.get_all_context(), base_dir=REPO_ROOT)
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    stack = CarpoolStack(
        app,
        settings.stack_name,
        settings=settings,
        # Environment-agnostic unless the CLI knows the account (needed only for the vpcId lookup).
        env=Environment(account=account, region=region) if account and region else None,
    )
    if placeholder:
        _refuse_deploy(stack)
    if nag:
        apply_nag(app)
    return app, stack


def _default_cluster_name(app: App) -> bool:
    """Fill in ``clusterName`` from the environment or the placeholder; True for the placeholder."""
    given = app.node.try_get_context("clusterName")
    if given is not None and str(given).strip():
        return False
    from_env = os.environ.get(CLUSTER_NAME_ENV, "").strip()
    app.node.set_context("clusterName", from_env or PLACEHOLDER_CLUSTER)
    return not from_env


def _refuse_deploy(stack: CarpoolStack) -> None:
    """Warn at synth and make CloudFormation reject the placeholder stack before it creates anything."""
    Annotations.of(stack).add_warning_v2("carpool:clusterNameRequired", PLACEHOLDER_MESSAGE)
    CfnRule(
        stack,
        "ClusterNameRequired",
        assertions=[
            CfnRuleAssertion(
                # Always false: a rule's assertions are checked before any resource is created.
                assert_=Fn.condition_equals(PLACEHOLDER_CLUSTER, "a real cluster name"),
                assert_description=PLACEHOLDER_MESSAGE,
            )
        ],
    )


def _cli_context(argv: list[str]) -> dict[str, Any]:
    """cdk.json's context plus ``-c key=value`` arguments, for runs without the CDK CLI."""
    context: dict[str, Any] = {}
    if _under_cdk_cli():
        return context  # the CDK CLI already passed cdk.json, cdk.context.json and -c values
    cdk_json = REPO_ROOT / "cdk.json"
    if cdk_json.is_file():
        context.update(json.loads(cdk_json.read_text()).get("context", {}))
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--context"):
            arg = next(args, "")
        elif arg.startswith("--context="):
            arg = arg.removeprefix("--context=")
        else:
            raise SettingsError(f"unexpected argument {arg!r}; use -c key=value")
        key, sep, value = arg.partition("=")
        if not sep:
            raise SettingsError(f"context argument {arg!r} must be key=value")
        context[key] = value
    return context


def _under_cdk_cli() -> bool:
    return "CDK_OUTDIR" in os.environ or "CDK_CONTEXT_JSON" in os.environ


def main(argv: list[str] | None = None) -> int:
    try:
        # The CLI says where to write; a direct run writes where the CLI would have (./cdk.out).
        outdir = None if _under_cdk_cli() else str(REPO_ROOT / "cdk.out")
        app, stack = build_app(_cli_context(sys.argv[1:] if argv is None else argv), outdir=outdir)
        assembly = app.synth()
    except USER_ERRORS as exc:
        print(f"carpool: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(exc, BAD_INPUTS) else 1
    except RuntimeError as exc:  # how jsii reports an exception in the layer's bundler or failed checks
        if str(exc).startswith("ValidationFailed"):  # cdk-nag findings (cdk.json reports them this way)
            print(f"carpool: synth stopped by unsuppressed findings:\n{exc}", file=sys.stderr)
            return 1
        cause = _layer_error(exc)
        if cause is None:
            raise
        print(f"carpool: the Lambda layer could not be built: {cause}", file=sys.stderr)
        return 1
    if not _under_cdk_cli():
        print(f"carpool: synthesized {stack.stack_name} to {assembly.directory}")
        if stack.settings.cluster_name == PLACEHOLDER_CLUSTER:
            print(f"carpool: warning: {PLACEHOLDER_MESSAGE}", file=sys.stderr)
    return 0


def _layer_error(exc: BaseException) -> str | None:
    """The layer builder's message inside a jsii error, or None when the error is about something else.

    jsii re-raises a callback's exception as a RuntimeError whose context is the original; when that link
    is missing, CDK's "Failed to bundle asset .../Layer/..." message still carries the text.
    """
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, LayerError):
            return str(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    text = str(exc)
    if text.startswith("Failed to bundle asset") and "/Layer/" in text:
        return text.rsplit("RuntimeError: ", 1)[-1]
    return None


if __name__ == "__main__":
    raise SystemExit(main())
