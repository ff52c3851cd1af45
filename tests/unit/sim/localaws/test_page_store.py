"""Rendered local-EC2 pages kept on disk (`carpool.sim.localaws.page_store`): a page served from disk is the page moto
renders, byte for byte; another key, a corrupted or foreign file is never served; concurrent writers leave
whole files; `CARPOOL_SIM_CACHE=off` turns the store off."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto.core.responses import ActionResult

from carpool.sim.localaws import ec2_pages, page_store
from carpool.sim.localaws.ec2_pages import PagedInstanceTypes
from carpool.sim.localaws.moto_patches import Internal
from carpool.sim.localaws.server import LocalAws

from .page_writers import write_many

REGION = "us-east-1"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
#: pages with a `NextToken` (types, offerings, spot prices), a last page, and an answer of other filters
ASKED = [("describe_instance_types", {"MaxResults": 100}),
         ("describe_instance_types", {"MaxResults": 5, "Filters": [{"Name": "instance-type", "Values": ["m5.*"]}]}),
         ("describe_instance_type_offerings", {"LocationType": "availability-zone", "MaxResults": 1000}),
         ("describe_spot_price_history", {"StartTime": NOW, "ProductDescriptions": ["Linux/UNIX"]}),
         ("describe_spot_price_history", {"StartTime": NOW, "InstanceTypes": ["m5.large"], "MaxResults": 5})]


# -- the store itself ------------------------------------------------------------------------------------
def test_a_kept_answer_comes_back_as_it_was_put(tmp_path: Path) -> None:
    store = page_store.PageStore(tmp_path)
    text = (200, {"Content-Type": "text/xml"}, "<a>é</a>")
    raw = (200, {"Content-Type": "application/x-amz-json-1.0"}, b"\x00{\"a\": 1}")
    store.put("text", text)
    store.put("raw", raw)
    assert store.get("text") == text and isinstance(store.get("text")[2], str)  # type: ignore[index]
    assert store.get("raw") == raw and isinstance(store.get("raw")[2], bytes)  # type: ignore[index]
    assert store.get("absent") is None


def test_a_file_written_for_another_key_is_not_served(tmp_path: Path) -> None:
    store = page_store.PageStore(tmp_path)
    store.put("moto 5.2.5", (200, {}, "<kept/>"))
    # the file another key would be read from holds this one (as a hash collision or a copied file would)
    store.path("moto 5.2.6").write_bytes(store.path("moto 5.2.5").read_bytes())
    assert store.get("moto 5.2.6") is None and store.refused == 1
    assert store.get("moto 5.2.5") == (200, {}, "<kept/>")


@pytest.mark.parametrize("damage", ["flip a body byte", "truncate", "empty", "garble the header", "lie in length"])
def test_a_damaged_file_is_ignored_and_replaced(tmp_path: Path, damage: str) -> None:
    store = page_store.PageStore(tmp_path)
    value = (200, {"Content-Type": "text/xml"}, "<page>" + "x" * 1000 + "</page>")
    store.put("k", value)
    path = store.path("k")
    data = path.read_bytes()
    header, _, body = data.partition(b"\n")
    damaged = {"flip a body byte": header + b"\n" + body[:10] + b"y" + body[11:],
               "truncate": data[:-7],
               "empty": b"",
               "garble the header": b"{not json" + data[9:],
               "lie in length": header.replace(b'"length":', b'"length":1') + b"\n" + body}[damage]
    assert damaged != data
    path.write_bytes(damaged)
    assert store.get("k") is None
    store.put("k", value)
    assert store.get("k") == value


def test_concurrent_writers_leave_one_whole_answer(tmp_path: Path) -> None:
    """Processes writing the same key while another reads it: a reader sees nothing or one writer's whole
    answer, never a mix, and no writer's temporary file stays behind."""
    context = multiprocessing.get_context("spawn")
    markers = ["a", "b", "c"]
    writers = [context.Process(target=write_many, args=(str(tmp_path), "shared", m, 30)) for m in markers]
    for w in writers:
        w.start()
    reader = page_store.PageStore(tmp_path)
    seen = 0
    while any(w.is_alive() for w in writers):
        got = reader.get("shared")
        if got is not None:
            seen += 1
            status, headers, body = got
            marker = headers["W"]
            assert marker in markers and status == 200
            assert body in {f"<{marker}>{i}" + marker * 200_000 for i in range(3)}
    for w in writers:
        w.join()
        assert w.exitcode == 0
    final = reader.get("shared")
    assert final is not None and final[1]["W"] in markers
    assert reader.refused == 0, "a reader never met a half-written file"
    assert seen > 0
    assert [p.name for p in tmp_path.iterdir()] == [reader.path("shared").name]


def test_the_least_recently_used_files_go_beyond_the_budget(tmp_path: Path) -> None:
    store = page_store.PageStore(tmp_path, budget=3 * 1200)
    body = "x" * 1000
    for i in range(3):
        store.put(f"k{i}", (200, {}, body))
        os.utime(store.path(f"k{i}"), (1000 + i, 1000 + i))
    assert store.get("k0") is not None  # read: now the most recently used
    store.put("k3", (200, {}, body))
    assert store.get("k1") is None, "the least recently used went first"
    assert all(store.get(k) is not None for k in ("k0", "k2", "k3"))
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= store.budget


def test_an_unusable_directory_is_a_miss_not_an_error(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    store = page_store.PageStore(blocked / "cache")
    store.put("k", (200, {}, "<a/>"))
    assert store.get("k") is None


def test_the_store_is_where_the_environment_says() -> None:
    assert page_store.location({"CARPOOL_SIM_CACHE": "off"}) is None
    assert page_store.location({"CARPOOL_SIM_CACHE": "OFF"}) is None
    assert page_store.location({"CARPOOL_SIM_CACHE": "/tmp/pages"}) == Path("/tmp/pages")
    repo = Path(__file__).resolve().parents[4]
    assert page_store.location({}) == repo / "build" / "sim-cache"


# -- served through local EC2 ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    with LocalAws(cluster="page-store", region=REGION) as local:
        yield local


class _Renders:
    """How often moto's serializer runs (every rendering `SerializedOnce` does goes through it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = ActionResult.execute_result

        def counted(result: ActionResult, context: Any) -> Any:
            if type(result) is ActionResult:
                self.count += 1
            return original(result, context)

        monkeypatch.setattr(ActionResult, "execute_result", counted)


@pytest.fixture
def fresh_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty in-process memo, so that answers come from the disk store or moto's serializer."""
    monkeypatch.setattr(ec2_pages, "_RENDERED", ec2_pages._Rendered(ec2_pages.MEMO_BUDGET))


def _bodies(aws: LocalAws, asked: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    client = aws.client("ec2")
    bodies: list[bytes] = []
    client.meta.events.register("after-call.ec2", lambda http_response, **_: bodies.append(http_response.content))
    for operation, kwargs in asked:
        getattr(client, operation)(**kwargs)
    return bodies


def _forget_memory() -> None:
    ec2_pages._RENDERED.clear()


def test_a_page_served_from_disk_is_byte_identical_to_a_fresh_rendering(
        aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_memory: None) -> None:
    renders = _Renders(monkeypatch)
    monkeypatch.setenv("CARPOOL_SIM_CACHE", "off")
    fresh = _bodies(aws, ASKED)
    assert renders.count == len(ASKED) and not list(tmp_path.iterdir())

    monkeypatch.setenv("CARPOOL_SIM_CACHE", str(tmp_path))
    _forget_memory()
    stored = _bodies(aws, ASKED)
    assert renders.count == 2 * len(ASKED) and len(list(tmp_path.iterdir())) == len(ASKED)
    _forget_memory()
    store = page_store.current()
    assert store is not None
    hits = store.hits
    from_disk = _bodies(aws, ASKED)
    assert renders.count == 2 * len(ASKED), "nothing rendered again"
    assert store.hits == hits + len(ASKED)
    assert fresh == stored == from_disk
    assert b"<nextToken>" in from_disk[0] and ec2_pages.TOKEN_STAND_IN.encode() not in from_disk[0]


def test_a_page_of_another_request_gets_its_own_token(
        aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_memory: None) -> None:
    """A token is bound to its request (StartTime too): a kept page answers with the asking request's token,
    as a fresh rendering of that request does."""
    renders = _Renders(monkeypatch)
    later = [("describe_spot_price_history", {"StartTime": LATER, "ProductDescriptions": ["Linux/UNIX"]})]
    monkeypatch.setenv("CARPOOL_SIM_CACHE", "off")
    fresh_now, fresh_later = _bodies(aws, ASKED[3:4]), _bodies(aws, later)
    assert fresh_now != fresh_later, "each page carries its own request's token"
    monkeypatch.setenv("CARPOOL_SIM_CACHE", str(tmp_path))
    _forget_memory()
    _bodies(aws, ASKED[3:4])
    before = renders.count
    _forget_memory()
    assert _bodies(aws, later) == fresh_later
    assert renders.count == before, "served from the page kept for the other StartTime"


@pytest.mark.parametrize("change", ["moto version", "rendering fingerprint", "patch fingerprint", "content"])
def test_a_changed_key_misses(aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              fresh_memory: None, change: str) -> None:
    monkeypatch.setenv("CARPOOL_SIM_CACHE", str(tmp_path))
    asked = ASKED[:1]
    first = _bodies(aws, asked)
    store = page_store.current()
    assert store is not None
    _forget_memory()
    hits = store.hits
    assert _bodies(aws, asked) == first and store.hits == hits + 1, "the same key is served from disk"

    monkeypatch.setattr(ec2_pages, "_FIXED", {})
    if change == "moto version":
        monkeypatch.setattr(ec2_pages, "moto_version", lambda: "5.99.0")
    elif change == "rendering fingerprint":
        monkeypatch.setattr(ec2_pages, "fingerprint", lambda value: "0000000000000000")
    elif change == "patch fingerprint":
        moved = tuple(Internal(i.module, i.attribute, "f" * 16) for i in PagedInstanceTypes.relies_on)
        monkeypatch.setattr(PagedInstanceTypes, "relies_on", moved)
    else:
        asked = [("describe_instance_types", {"MaxResults": 99})]
    _forget_memory()
    hits, files = store.hits, len(list(tmp_path.iterdir()))
    _bodies(aws, asked)
    assert store.hits == hits, "not served from the page kept under the old key"
    assert len(list(tmp_path.iterdir())) == files + 1


def test_a_corrupted_page_on_disk_is_rendered_again_and_replaced(
        aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_memory: None) -> None:
    monkeypatch.setenv("CARPOOL_SIM_CACHE", str(tmp_path))
    renders = _Renders(monkeypatch)
    first = _bodies(aws, ASKED[:1])
    (path,) = tmp_path.iterdir()
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x01
    path.write_bytes(bytes(data))
    _forget_memory()
    assert _bodies(aws, ASKED[:1]) == first
    assert renders.count == 2
    store = page_store.current()
    assert store is not None and store.refused >= 1
    _forget_memory()
    assert _bodies(aws, ASKED[:1]) == first and renders.count == 2, "the replaced page is served"


def test_off_keeps_nothing_on_disk(aws: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   fresh_memory: None) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CARPOOL_SIM_CACHE", "off")
    monkeypatch.setattr(page_store, "PageStore", None)  # any attempt to use a store would fail
    renders = _Renders(monkeypatch)
    assert page_store.current() is None
    first = _bodies(aws, ASKED[:1])
    _forget_memory()
    assert _bodies(aws, ASKED[:1]) == first and renders.count == 2
