"""CDK entry point: ``cdk deploy -c clusterName=NAME`` (cdk.json runs ``.venv/bin/python infra/app.py``).

Run directly (``python infra/app.py -c clusterName=demo``) it synthesizes to ``cdk.out`` the same way,
reading cdk.json's context as defaults, so ``make synth`` works without the Node CLI. Configuration
mistakes (missing clusterName, a malformed ARN, an unbuilt layer, an invalid NodePool file) end with one
readable line instead of a jsii stack trace.
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

from aws_cdk import App, Environment  # noqa: E402

from infra.config import ConfigError  # noqa: E402
from infra.functions import LayerMissingError, VpcLookupError  # noqa: E402
from infra.nag import apply_nag  # noqa: E402
from infra.settings import Settings, SettingsError  # noqa: E402
from infra.stack import CarpoolStack  # noqa: E402

USER_ERRORS = (SettingsError, ConfigError, LayerMissingError, VpcLookupError)


def build_app(context: dict[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True) -> tuple[App, CarpoolStack]:
    """The app with one ``carpool-<cluster>`` stack; ``context`` adds to what the CDK CLI passes."""
    app = App(context=context or {}, outdir=outdir)
    settings = Settings.from_context(app.node.get_all_context(), base_dir=REPO_ROOT)
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    stack = CarpoolStack(
        app,
        settings.stack_name,
        settings=settings,
        # Environment-agnostic unless the CLI knows the account (needed only for the vpcId lookup).
        env=Environment(account=account, region=region) if account and region else None,
    )
    if nag:
        apply_nag(app)
    return app, stack


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
        return 1
    if not _under_cdk_cli():
        print(f"carpool: synthesized {stack.stack_name} to {assembly.directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
