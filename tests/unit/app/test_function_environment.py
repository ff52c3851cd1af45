"""A function's environment, AWS clients and dependencies belong to the context that installed them, so
simulations running at once in one process never read each other's (`carpool.environment`,
`carpool.adapters.aws.session`, `carpool.app.wiring`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from carpool import environment
from carpool.adapters.aws import session
from carpool.app import wiring
from carpool.app.settings import Settings


def _env(endpoint: str, table: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "a",
            "AWS_SECRET_ACCESS_KEY": "s", "CARPOOL_TABLE": table, "CARPOOL_CLUSTER_NAME": table}


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    session.reset()
    yield
    session.reset()


def test_settings_and_endpoint_come_from_the_installed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARPOOL_TABLE", "from-process")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with environment.using(_env("http://127.0.0.1:1", "blue")):
        assert Settings.from_env().table == "blue"
        assert session.endpoint_url() == "http://127.0.0.1:1"
        assert session.region_name() == "eu-west-1"
    assert Settings.from_env().table == "from-process"
    assert session.endpoint_url() is None


def test_each_environment_has_its_own_clients_and_reset_drops_only_its_own() -> None:
    blue, green = _env("http://127.0.0.1:1", "blue"), _env("http://127.0.0.1:2", "green")
    with environment.using(blue):
        blue_sqs, blue_session = session.client("sqs"), session.session()
        assert session.client("sqs") is blue_sqs
        assert session.clients() == [blue_sqs]
    with environment.using(green):
        green_sqs = session.client("sqs")
        assert green_sqs is not blue_sqs and session.session() is not blue_session
        assert green_sqs.meta.endpoint_url == "http://127.0.0.1:2"
        assert session.clients() == [green_sqs]
    session.reset(blue)
    with environment.using(green):
        assert session.client("sqs") is green_sqs
    with environment.using(blue):
        assert session.client("sqs") is not blue_sqs


def test_credentials_are_the_environments_not_the_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "process-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "process-secret")
    with environment.using(_env("http://127.0.0.1:1", "blue")):
        assert session.session().get_credentials().access_key == "a"


def test_threads_see_their_own_environment_and_dependencies() -> None:
    seen: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def run(name: str) -> None:
        marker: Any = object()
        with environment.using(_env(f"http://127.0.0.1:{len(name)}", name)):
            wiring.use(marker)
            barrier.wait()  # both installed before either reads
            seen[name] = (Settings.from_env().table, wiring.get() is marker)
            wiring.use(None)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("blue", "green")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"blue": ("blue", True), "green": ("green", True)}
    assert wiring.installed() is None
