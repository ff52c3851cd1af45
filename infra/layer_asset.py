"""The layer as a CDK asset: built by the app itself during synth (local bundling), hashed by its inputs.

``lambda.Code.from_asset`` with a ``bundling`` whose ``local`` runs :func:`infra.layer.build_layer` in this
process, so ``cdk synth``/``cdk deploy`` need no Docker and no separate build step. The asset hash is
``AssetHashType.CUSTOM`` with :func:`infra.layer.layer_digest`, not a fingerprint of the built folder: it
is known before anything is built (so ``cdk ls`` and stacks that skip bundling never build), the same in
every checkout of a commit, and it changes with every edit to the library or the lock.

CDK only calls the local bundler when ``cdk.out/asset.<hash>`` does not exist yet and the stack is one
being bundled; the build itself is cached under ``build/layer-<digest>``, so a second synth, or another
stack in the same run, copies instead of running pip.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from infra.layer import LAYER_CACHE_DIR, LOCK_FILE, PACKAGE_SOURCE, build_layer, layer_digest

#: Never pulled: ``try_bundle`` always succeeds or raises, so CDK never falls back to Docker. CDK needs
#: an image in ``BundlingOptions`` all the same.
UNUSED_IMAGE = "carpool/no-docker-bundling"


@jsii.implements(ILocalBundling)
class LocalLayerBundling:
    """Builds the layer into the folder CDK stages as the asset."""

    def __init__(self, cache_dir: Path, package_source: Path, lock_file: Path) -> None:
        self._cache_dir = cache_dir
        self._package_source = package_source
        self._lock_file = lock_file

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:
        """Build (or reuse) the layer and copy it to ``output_dir``; True tells CDK it is done."""
        build_layer(
            Path(output_dir),
            cache_dir=self._cache_dir,
            package_source=self._package_source,
            lock_file=self._lock_file,
            log=_stderr,
        )
        return True


def layer_code(
    cache_dir: Path = LAYER_CACHE_DIR, *, package_source: Path | None = None, lock_file: Path | None = None
) -> lambda_.AssetCode:
    """The layer's code: ``python/`` with the library and the locked dependencies (defaults: this repo's)."""
    package_source = package_source or PACKAGE_SOURCE
    lock_file = lock_file or LOCK_FILE
    bundler = LocalLayerBundling(cache_dir, package_source, lock_file)
    return lambda_.Code.from_asset(
        # CDK requires an existing source folder; with a custom hash and local bundling it reads nothing
        # from it, but the library folder is the honest answer to "built from what".
        str(package_source),
        asset_hash=layer_digest(package_source, lock_file),
        asset_hash_type=AssetHashType.CUSTOM,
        # cast: jsii calls try_bundle(output_dir, options) positionally, while the generated Protocol spells
        # the options out as keyword arguments, which mypy then expects of every implementation.
        bundling=BundlingOptions(image=DockerImage.from_registry(UNUSED_IMAGE), local=cast(ILocalBundling, bundler)),
    )


def _stderr(message: str) -> None:
    # Progress goes where CDK's own "Bundling asset ..." line goes.
    print(message, file=sys.stderr)
