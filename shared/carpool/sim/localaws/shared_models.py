"""Local AWS's own botocore sessions read botocore's data files once per process.

Every botocore session builds its own data loader, and a loader reads and decodes each file it is asked
for (EC2's service model is 4 MB of JSON, the endpoint list 1 MB) once per loader. Local AWS itself opens
several sessions for the same files: importing moto's EC2 models opens three (to list EC2's regions per
partition, ~0.15 s each), moto's backends one more (the regions of every service they serve), and the
clients that create and seed local AWS another. Those sessions are local AWS's, not the simulated
functions': here they share one loader per data path (`LocalSession`), so each file is read once.
botocore hands every client of a session the same loaded objects already, and nothing changes them
after loading. carpool's own sessions (each function's, modelled as a process of its own) never share:
the loader is only shared where local AWS asks for it (`LocalSession`, `AccountSpecificBackend.get_session`)
and, while `LocalAws` imports moto, on the importing thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import boto3.session
import botocore.session
from botocore.loaders import Loader, create_loader

from carpool.sim.localaws.moto_patches import Internal, MotoPatch, Replaced

_lock = threading.RLock()
_loaders: dict[str | None, Loader] = {}
#: boto3's own data directory, which every boto3 session adds to its loader's search paths
_BOTO3_DATA = os.path.join(os.path.dirname(boto3.session.__file__), "data")
_sharing = threading.local()


def shared_loader(data_path: str | None) -> Loader:
    """The loader botocore's `create_loader` makes for `data_path` (`AWS_DATA_PATH`), one per process."""
    with _lock:
        loader = _loaders.get(data_path)
        if loader is None:
            loader = _loaders[data_path] = create_loader(data_path)
        return loader


def _with_boto3_data(loader: Loader) -> None:
    """boto3's `Session._setup_loader` adds its data directory to the loader: once is enough for a shared one."""
    with _lock:
        paths = loader.search_paths
        deduplicated = list(dict.fromkeys(paths))
        if _BOTO3_DATA not in deduplicated:
            deduplicated.append(_BOTO3_DATA)
        paths[:] = deduplicated


class LocalSession(boto3.session.Session):
    """A boto3 session on the process's shared loader (for local AWS's own clients)."""

    def __init__(self, **kwargs: Any) -> None:
        core = botocore.session.get_session()
        core.register_component("data_loader", shared_loader(core.get_config_variable("data_path")))
        super().__init__(botocore_session=core, **kwargs)

    def _setup_loader(self) -> None:
        self._loader = self._session.get_component("data_loader")
        _with_boto3_data(self._loader)


class SharedLoadersWhileImporting(MotoPatch):
    """botocore's `create_loader`, as sessions call it to build their loader: on a thread inside
    `importing()` the shared loader for that data path, elsewhere botocore's own."""

    replaces = (Internal("botocore.session", "create_loader", "89050e30206e5ea7"),)
    #: sessions build their loader lazily through the module's `create_loader`; boto3 sessions extend it
    relies_on = (Internal("botocore.session", "Session._register_data_loader", "217146aba7ceda63"),
                 Internal("boto3.session", "Session._setup_loader", "f34c6f3ff93566dd"))

    @classmethod
    def _apply(cls) -> Replaced:
        original = botocore.session.__dict__["create_loader"]

        def shared_on_this_thread(search_path_string: str | None = None) -> Loader:
            if getattr(_sharing, "on", False):
                return shared_loader(search_path_string)
            return original(search_path_string)

        botocore.session.create_loader = shared_on_this_thread  # type: ignore[attr-defined]
        return [(botocore.session, "create_loader", original)]

    @staticmethod
    @contextlib.contextmanager
    def importing() -> Iterator[None]:
        """Sessions created on this thread inside the block share the loader (moto's import-time ones)."""
        before = getattr(_sharing, "on", False)
        _sharing.on = True
        try:
            yield
        finally:
            _sharing.on = before
            for loader in list(_loaders.values()):
                if _BOTO3_DATA in loader.search_paths:
                    _with_boto3_data(loader)


class SharedRegionsSession(MotoPatch):
    """moto's backends list the regions of a service through one session of their own
    (`AccountSpecificBackend.get_session`, made once): made as a `LocalSession`."""

    replaces = (Internal("moto.core.base_backend", "AccountSpecificBackend.get_session", "ff565ab3a09cd1c5"),)
    relies_on = (Internal("moto.core.base_backend", "AccountSpecificBackend._generate_regions", "6f339e32d8fa8024"),)

    @classmethod
    def _apply(cls) -> Replaced:
        from moto.core.base_backend import AccountSpecificBackend

        original = AccountSpecificBackend.__dict__["get_session"]
        made: list[LocalSession] = []

        def get_session(owner: type) -> LocalSession:
            with _lock:
                if not made:  # made when first needed, as moto makes it (after LocalAws set its environment)
                    made.append(LocalSession())
                return made[0]

        AccountSpecificBackend.get_session = classmethod(get_session)  # type: ignore[method-assign,assignment]
        return [(AccountSpecificBackend, "get_session", original)]


__all__ = ["LocalSession", "SharedLoadersWhileImporting", "SharedRegionsSession", "shared_loader"]
