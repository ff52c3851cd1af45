"""The kubemark patches (`tests/realcluster/patches/`) as ../shared/kube-control-plane/build.sh's PATCH_DIR applies them: each applies with `git apply`
to the Kubernetes source it was made against, and no two touch the same file (the shared build script
recognises an applied patch by reverse-applying it alone, which a later patch on the same lines breaks).
They patch only where the hollow kubelet fakes the machine, and the kubelet's code they reuse."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

PATCH_DIR = Path(__file__).parent / "patches"
PATCHES = sorted(PATCH_DIR.glob("*.patch"))
SRC = Path(os.environ.get("KUBE_APISERVER_HOME", Path.home() / ".cache" / "carpool-kube-apiserver")) / "k8s"
#: where the patches may go: kubemark, the fakes it runs over, and small hooks in the kubelet to reach
#: the real code (config loading, the reservation parsing, the node-IP check against the machine's addresses)
ALLOWED = ("cmd/kubemark/", "pkg/kubemark/", "pkg/kubelet/cadvisor/testing/", "pkg/kubelet/cm/container_manager_hollow",
           "cmd/kubelet/app/hollow.go", "pkg/kubelet/kubelet.go", "pkg/kubelet/kubelet_node_status.go")


def touched(patch: Path) -> set[str]:
    return set(re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), flags=re.M))


def test_there_are_patches() -> None:
    assert len(PATCHES) >= 5, PATCHES


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_touches_only_the_fakes_and_hooks(patch: Path) -> None:
    files = touched(patch)
    assert files
    assert all(f.startswith(ALLOWED) for f in files), files


def test_no_two_patches_touch_one_file() -> None:
    seen: dict[str, str] = {}
    for patch in PATCHES:
        for f in touched(patch):
            assert f not in seen, f"{f} in both {seen[f]} and {patch.name}"
            seen[f] = patch.name


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies_to_a_clean_copy(patch: Path, tmp_path: Path) -> None:
    """The touched files copied out of the shared source; if PATCH_DIR applied the patch there, it is taken
    out of the copy first (which proves it is applied whole), then the patch must apply to the clean copy."""
    if not (SRC / "cmd" / "kubemark").is_dir():
        pytest.skip(f"no Kubernetes source at {SRC}: run ../shared/kube-apiserver/build.sh, then its kube-control-plane build with PATCH_DIR=tests/realcluster/patches")
    for f in touched(patch):
        if (SRC / f).exists():
            (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(SRC / f, tmp_path / f)

    def apply(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "apply", *flags, str(patch)], cwd=tmp_path, capture_output=True, text=True)

    if apply("--reverse", "--check").returncode == 0:
        assert apply("--reverse").returncode == 0
    result = apply("--check")
    assert result.returncode == 0, result.stderr
