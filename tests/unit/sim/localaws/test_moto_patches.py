"""The patches to moto's internals are checked against the installed moto before they apply.

`test_every_internal_matches_the_installed_moto` is the test that fails on a moto upgrade that changes
a patched internal: review the named internal against the patch, then record its new fingerprint.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

from carpool.sim.localaws import ec2_pages, motofast
from carpool.sim.localaws import server as localaws
from carpool.sim.localaws.moto_patches import (
    SUPPORTED_MOTO,
    Internal,
    MotoInternalChanged,
    MotoPatch,
    fingerprint,
    in_range,
    installed,
    moto_version,
)

PATCHES = list(MotoPatch.registry)
ROOT = Path(__file__).resolve().parents[4]


def _ids(patch: type[MotoPatch]) -> str:
    return patch.__name__


def _current(patch: type[MotoPatch]) -> list[Any]:
    return [i.current() for i in patch.replaces]


def _original(patch: type[MotoPatch], internal: Internal) -> Any:
    """The internal as moto defines it, also while something in this process holds the patch."""
    if internal in patch.replaces and patch.installed():
        owner, name = internal.owner_and_name()
        return next(o for held, n, o in patch._replaced if held is owner and n == name)
    return internal.current()


@pytest.fixture
def nothing_installed() -> None:
    """Tests that install and tamper need moto unpatched (a LocalAws of another test may run meanwhile)."""
    held = [p.__name__ for p in PATCHES if p.installed()]
    if held:
        pytest.skip(f"held by a running LocalAws or simulation: {held}")


def test_every_patch_of_both_modules_is_registered() -> None:
    assert set(motofast.PATCHES) | set(localaws._PATCHES) == set(PATCHES)
    assert len(PATCHES) == len(motofast.PATCHES) + len(localaws._PATCHES)


def test_the_installed_moto_is_in_the_supported_range() -> None:
    assert in_range(moto_version(), SUPPORTED_MOTO)


def test_the_supported_range_is_the_one_the_project_pins() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [re.sub(r"^moto(\[[^\]]*\])?", "", d) for deps in extras.values() for d in deps if d.startswith("moto")]
    assert pins and set(pins) == {SUPPORTED_MOTO}


@pytest.mark.parametrize("patch", PATCHES, ids=_ids)
def test_every_internal_matches_the_installed_moto(patch: type[MotoPatch]) -> None:
    for internal in patch.replaces + patch.relies_on:
        value = _original(patch, internal)
        assert fingerprint(value) == internal.fingerprint, (
            f"{patch.__name__}: moto internal {internal.where} changed; review the patch against it")


@pytest.mark.usefixtures("nothing_installed")
@pytest.mark.parametrize("patch", PATCHES, ids=_ids)
def test_verify_passes_while_installed(patch: type[MotoPatch]) -> None:
    """A second local AWS in the same process verifies while the first holds the patch: the check reads the
    held originals, not the patch standing in their place."""
    patch.install()
    try:
        patch.verify()
    finally:
        patch.uninstall()


@pytest.mark.usefixtures("nothing_installed")
@pytest.mark.parametrize("patch", PATCHES, ids=_ids)
def test_install_and_uninstall_restore_the_originals_exactly(patch: type[MotoPatch]) -> None:
    originals = _current(patch)
    patch.install()
    try:
        patched = _current(patch)
        assert all(p is not o for p, o in zip(patched, originals, strict=True))
        patch.install()  # nested: shares the installation
        assert all(a is b for a, b in zip(_current(patch), patched, strict=True))
        patch.uninstall()
        assert all(a is b for a, b in zip(_current(patch), patched, strict=True)), "removed while still in use"
    finally:
        patch.uninstall()
    assert all(a is b for a, b in zip(_current(patch), originals, strict=True))
    assert not patch.installed()


@pytest.mark.usefixtures("nothing_installed")
@pytest.mark.parametrize("patch", PATCHES, ids=_ids)
def test_a_changed_internal_fails_the_install_naming_patch_and_internal(
        patch: type[MotoPatch], monkeypatch: pytest.MonkeyPatch) -> None:
    first, *rest = patch.replaces
    monkeypatch.setattr(patch, "replaces", (dataclasses.replace(first, fingerprint="0" * 16), *rest))
    _assert_install_refused(patch, first)


def _assert_install_refused(patch: type[MotoPatch], changed: Internal) -> None:
    """Installing `patch` fails naming it and the `changed` internal, and leaves moto as it was."""
    originals = _current(patch)
    with pytest.raises(MotoInternalChanged, match=rf"^{patch.__name__}: moto internal {re.escape(changed.where)} changed"):
        patch.install()
    assert all(a is b for a, b in zip(_current(patch), originals, strict=True))
    assert not patch.installed()


@pytest.mark.usefixtures("nothing_installed")
def test_a_changed_internal_it_relies_on_fails_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    patch = motofast._PartitionQueries
    internal = dataclasses.replace(patch.relies_on[0], fingerprint="1" * 16)
    monkeypatch.setattr(patch, "relies_on", (internal,))
    with pytest.raises(MotoInternalChanged, match=re.escape(f"_PartitionQueries: moto internal {internal.where}")):
        patch.install()


def test_the_paged_reads_are_checked_against_what_they_replace_and_the_rendering_they_keep() -> None:
    """The EC2 pages replace moto's describe methods, mirror its backends' answers and keep rendered pages:
    all of it is declared, so a moto that changes any of it fails the install."""
    paged = ec2_pages.PagedInstanceTypes
    assert paged in localaws._PATCHES
    assert {i.where for i in paged.replaces} == {
        "moto.ec2.responses.instances.InstanceResponse.describe_instance_types",
        "moto.ec2.responses.instances.InstanceResponse.describe_instance_type_offerings"}
    assert {i.where for i in paged.relies_on} >= {
        "moto.ec2.models.instance_types.InstanceTypeBackend.describe_instance_types",
        "moto.ec2.models.instance_types.InstanceTypeOfferingBackend.describe_instance_type_offerings"}
    for patch in (paged, localaws._ModelledSpotPrices):
        assert set(ec2_pages.RENDERING) <= set(patch.relies_on), patch.__name__


@pytest.mark.usefixtures("nothing_installed")
@pytest.mark.parametrize("patch", [ec2_pages.PagedInstanceTypes, localaws._ModelledSpotPrices], ids=_ids)
def test_a_changed_rendering_fails_the_install_of_the_pages_kept_rendered(
        patch: type[MotoPatch], monkeypatch: pytest.MonkeyPatch) -> None:
    rendering = ec2_pages.RENDERING[0]
    changed = dataclasses.replace(rendering, fingerprint="3" * 16)
    monkeypatch.setattr(patch, "relies_on", tuple(changed if i == rendering else i for i in patch.relies_on))
    _assert_install_refused(patch, rendering)


@pytest.mark.usefixtures("nothing_installed")
def test_a_missing_internal_fails_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    patch = localaws._SqsClock
    gone = Internal("moto.sqs.models", "unix_time_in_a_later_moto", patch.replaces[0].fingerprint)
    monkeypatch.setattr(patch, "replaces", (gone, patch.replaces[1]))
    with pytest.raises(MotoInternalChanged, match=r"_SqsClock: moto internal moto\.sqs\.models\.unix_time_in_a_later_moto is missing"):
        patch.install()
    gone_module = Internal("moto.sqs.models_moved", "unix_time", patch.replaces[1].fingerprint)
    monkeypatch.setattr(patch, "replaces", (gone_module,))
    with pytest.raises(MotoInternalChanged, match=r"moto\.sqs\.models_moved\.unix_time is missing"):
        patch.install()


@pytest.mark.usefixtures("nothing_installed")
def test_a_moto_outside_the_supported_range_fails_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(motofast._ModuleListOnce, "supported", ">=4.0,<5")
    with pytest.raises(MotoInternalChanged, match=rf"_ModuleListOnce: written for moto >=4.0,<5, installed moto is "
                                                  rf"{re.escape(moto_version())}"):
        motofast._ModuleListOnce.install()


@pytest.mark.usefixtures("nothing_installed")
def test_a_patch_must_replace_exactly_what_it_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    patch = motofast._ParsedConditions
    originals = _current(patch)
    monkeypatch.setattr(patch, "replaces", patch.replaces[:-1])  # leaves the validation parser undeclared
    with pytest.raises(MotoInternalChanged, match=r"^_ParsedConditions: replaced .*, declares "):
        patch.install()
    monkeypatch.undo()
    assert all(a is b for a, b in zip(_current(patch), originals, strict=True)), "the undeclared one too"
    assert not patch.installed()


@pytest.mark.usefixtures("nothing_installed")
def test_a_failing_patch_in_a_group_leaves_none_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    last = motofast.PATCHES[-1]
    monkeypatch.setattr(last, "replaces", (dataclasses.replace(last.replaces[0], fingerprint="2" * 16),))
    before = {p: _current(p) for p in motofast.PATCHES[:-1]}
    with pytest.raises(MotoInternalChanged, match=last.__name__), motofast.faster_moto():
        pass
    for patch, originals in before.items():
        assert not patch.installed()
        assert all(a is b for a, b in zip(_current(patch), originals, strict=True))


@pytest.mark.usefixtures("nothing_installed")
def test_installs_on_many_threads_share_one_installation_and_restore_the_originals() -> None:
    originals = {p: _current(p) for p in PATCHES}
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def use() -> None:
        try:
            start.wait()
            for _ in range(20):
                with installed(*PATCHES):
                    assert all(p.installed() for p in PATCHES)
                    assert all(a is not b for p in PATCHES for a, b in zip(_current(p), originals[p], strict=True))
        except BaseException as e:  # surfaced below: a thread's failure must fail the test
            errors.append(e)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for patch, before in originals.items():
        assert not patch.installed()
        assert all(a is b for a, b in zip(_current(patch), before, strict=True))


def test_version_ranges() -> None:
    assert in_range("5.2.5", ">=5.0,<6")
    assert in_range("5.0.0", ">=5.0,<6")
    assert not in_range("6.0.0", ">=5.0,<6")
    assert not in_range("4.9.9", ">=5.0,<6")
    assert not in_range("6.0.0rc1", ">=5.0,<6")


def test_fingerprints_follow_the_source() -> None:
    def one() -> int:
        return 1

    def other() -> int:
        return 2

    assert fingerprint(one) == fingerprint(one)
    assert fingerprint(one) != fingerprint(other)
    assert fingerprint(property(one)) != fingerprint(property(other))
