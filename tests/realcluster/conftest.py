"""The real-cluster tier's fixtures. Every test here needs the built control plane: without it, each skips
saying what to build (`controlplane.require_binaries`), so `make e2e-real` on a bare machine is a list of
skips, never a failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.realcluster.controlplane import ControlPlane, require_binaries

#: the control plane alone (no kubelets): what `test_controlplane.py` needs
PLANE_BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlane]:
    """One control plane for a test module (about 10 s to start); tests name what they create uniquely."""
    require_binaries(PLANE_BINARIES)
    with ControlPlane() as plane:
        yield plane
