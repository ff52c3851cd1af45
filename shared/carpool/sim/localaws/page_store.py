"""Rendered local-EC2 answers kept on disk, so that a fresh interpreter does not render them again.

`carpool.sim.localaws.ec2_pages.SerializedOnce` keeps each rendered page in memory for the life of a process. Every
new interpreter (a test worker, a scenario run in a subprocess, a benchmark) would otherwise pay the same
~5 s of moto's response serializer for answers that are identical byte for byte. This store keeps them
in files that every process on the machine reads.

What makes this safe is the key, not the store: the caller's key names everything the rendering depends
on (library versions, the fingerprints of the rendering code, the answer's content digest), and the store
serves a file only for exactly that key. Each file carries a header holding its full key and a SHA-256 of
its body; a file whose header does not match (an other key hashed to the same name, a torn or corrupted
write, a truncated body) is never served: it is treated as absent, and the caller's fresh rendering
replaces it. Writes go to a temporary file that is then renamed over the target (`os.replace`, atomic on
POSIX and Windows), so concurrent writers (xdist workers, subprocesses) leave one whole file or the other.

Location: `CARPOOL_SIM_CACHE` when set (`off` disables the store), else `build/sim-cache/` of the
repository when carpool runs from its source tree (`build/` is git-ignored), else the user's cache
directory. The store holds at most `BUDGET` bytes; beyond that the least recently used files go first.
Any failure to read or write (read-only disk, full disk) makes the store a miss, never an error: the
rendering is always available.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the environment variable naming the store's directory, or `off`
ENV = "CARPOOL_SIM_CACHE"
OFF = "off"
#: bytes kept on disk (a region's rendered types, offerings and spot prices take ~8 MB; spot prices are
#: re-rendered each hour their timestamp changes)
BUDGET = 256 * 1024 * 1024
#: the file layout; part of every file's header, so another layout is never read as this one
FORMAT = 1
SUFFIX = ".page"
#: a writer's temporary file older than this was left by a process that died mid-write
STALE_TEMP_SECONDS = 600.0

#: (status, headers, body) as moto's serializer returns them
Rendered = tuple[int, dict[str, Any], "str | bytes"]


@dataclass
class PageStore:
    """Rendered answers under `root`, one file per key."""

    root: Path
    budget: int = BUDGET
    #: answers served from disk / asked for and absent or refused / files refused (for measuring and tests)
    hits: int = 0
    misses: int = 0
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def path(self, key: str) -> Path:
        return self.root / f"{hashlib.sha256(key.encode()).hexdigest()}{SUFFIX}"

    def get(self, key: str) -> Rendered | None:
        """The answer kept for exactly `key`, or None (absent, unreadable, or not a whole file for `key`)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self._count(miss=True)
            return None
        value = _decode(data, key)
        if value is None:
            self._count(miss=True, refused=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: eviction goes by modification time
        self._count(miss=False)
        return value

    def put(self, key: str, value: Rendered) -> None:
        """Keep `value` under `key`: written whole to a temporary file, then renamed into place."""
        data = _encode(key, value)
        if len(data) > self.budget:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=SUFFIX)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temp, self.path(key))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return
        self.evict()

    def evict(self) -> None:
        """Remove the least recently used files until the store holds at most `budget` bytes, and the
        temporary files of writers that died."""
        now = time.time()
        files: list[tuple[float, int, Path]] = []
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return
        for entry in entries:
            if not entry.name.endswith(SUFFIX):
                continue
            try:
                stat = entry.stat()
            except OSError:
                continue  # removed by another process meanwhile
            if entry.name.startswith(".tmp-"):
                if now - stat.st_mtime > STALE_TEMP_SECONDS:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                continue
            files.append((stat.st_mtime, stat.st_size, Path(entry.path)))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.budget:
                break
            with contextlib.suppress(OSError):
                path.unlink()
            total -= size

    def _count(self, miss: bool, refused: bool = False) -> None:
        with self._lock:
            if miss:
                self.misses += 1
            else:
                self.hits += 1
            if refused:
                self.refused += 1


def _encode(key: str, value: Rendered) -> bytes:
    """A header line (JSON: layout, full key, status, headers, body kind, length and SHA-256), then the body."""
    status, headers, body = value
    raw = body.encode() if isinstance(body, str) else bytes(body)
    header = {"format": FORMAT, "key": key, "status": status, "headers": headers,
              "kind": "str" if isinstance(body, str) else "bytes", "length": len(raw),
              "sha256": hashlib.sha256(raw).hexdigest()}
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + raw


def _decode(data: bytes, key: str) -> Rendered | None:
    """The answer in a file, only when the file is whole and was written for `key`."""
    line, newline, raw = data.partition(b"\n")
    if not newline:
        return None
    try:
        header = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
        return None
    if header.get("length") != len(raw) or header.get("sha256") != hashlib.sha256(raw).hexdigest():
        return None
    status, headers, kind = header.get("status"), header.get("headers"), header.get("kind")
    if not isinstance(status, int) or not isinstance(headers, dict) or kind not in ("str", "bytes"):
        return None
    try:
        body: str | bytes = raw.decode() if kind == "str" else raw
    except UnicodeDecodeError:
        return None
    return status, headers, body


def location(environ: Any = None) -> Path | None:
    """Where the store lives for this environment; None when disabled (`CARPOOL_SIM_CACHE=off`)."""
    environ = os.environ if environ is None else environ
    chosen = environ.get(ENV, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    repo = Path(__file__).resolve().parents[4]
    if (repo / "pyproject.toml").is_file() and (repo / "shared" / "carpool").is_dir():
        return repo / "build" / "sim-cache"
    cache = environ.get("XDG_CACHE_HOME")
    if not cache:
        try:
            cache = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory to keep it in
            return None
    return Path(cache) / "carpool" / "sim-cache"


_STORES: dict[Path, PageStore] = {}
_STORES_LOCK = threading.Lock()


def current() -> PageStore | None:
    """The store the environment names now (one object per directory, so its counters add up)."""
    root = location()
    if root is None:
        return None
    with _STORES_LOCK:
        store = _STORES.get(root)
        if store is None:
            store = _STORES[root] = PageStore(root)
        return store
