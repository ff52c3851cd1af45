"""EventBridgePublisher: batches of 10, sent concurrently; per-entry and whole-call failures retried once."""

from __future__ import annotations

import threading
from typing import Any

from botocore.exceptions import ClientError

from carpool.adapters.aws.events import EventBridgePublisher


class FakeEvents:
    """PutEvents that fails chosen entries (by DetailType) the first time it sees them."""

    def __init__(self, flaky: frozenset[str] = frozenset(), broken: frozenset[str] = frozenset()) -> None:
        self.flaky, self.broken = set(flaky), set(broken)
        self.calls: list[list[dict[str, Any]]] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()
        self._barrier = threading.Barrier(2, timeout=5)

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        with self._lock:
            self.calls.append(Entries)
            self.threads.add(threading.get_ident())
            first_two = len(self.calls) <= 2
            # a call holding one of `broken` fails as a whole, the first time
            broken = bool(self.broken & {e["DetailType"] for e in Entries})
            self.broken -= {e["DetailType"] for e in Entries}
        if first_two:  # the first two calls meet: proof that two are in flight at once
            self._barrier.wait()
        if broken:
            raise ClientError({"Error": {"Code": "InternalException", "Message": "down"}}, "PutEvents")
        results, failed = [], 0
        for e in Entries:
            with self._lock:
                fail = e["DetailType"] in self.flaky
                self.flaky.discard(e["DetailType"])
            results.append({"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"} if fail else {"EventId": "x"})
            failed += fail
        return {"FailedEntryCount": failed, "Entries": results}


def _entries(n: int) -> list[dict[str, Any]]:
    return [{"Source": "carpool.cluster", "DetailType": f"e{i}", "Detail": "{}"} for i in range(n)]


def test_batches_of_ten_go_out_concurrently_and_all_arrive() -> None:
    client = FakeEvents()
    failed = EventBridgePublisher("bus", client, sleep=lambda _s: None).put_events(_entries(95))
    assert failed == 0
    assert sorted(len(c) for c in client.calls) == [5] + [10] * 9
    sent = sorted(e["DetailType"] for c in client.calls for e in c)
    assert sent == sorted(f"e{i}" for i in range(95))
    assert all(e["EventBusName"] == "bus" for c in client.calls for e in c)
    assert len(client.threads) >= 2


def test_failed_entries_are_retried_once_and_the_rest_counted() -> None:
    client = FakeEvents(flaky=frozenset({"e13", "e41"}), broken=frozenset({"e25"}))
    failed = EventBridgePublisher("bus", client, sleep=lambda _s: None).put_events(_entries(50))
    assert failed == 0  # the two throttled entries and the failed call's ten all went through again
    retried = {e["DetailType"] for c in client.calls[5:] for e in c}
    assert retried == {"e13", "e41", *(f"e{i}" for i in range(20, 30))}
    assert all("_error" not in e for c in client.calls for e in c)


def test_what_fails_twice_is_counted() -> None:
    class AlwaysThrottled(FakeEvents):
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
            self.calls.append(Entries)
            return {"FailedEntryCount": len(Entries), "Entries": [{"ErrorCode": "Throttling"} for _ in Entries]}

    client = AlwaysThrottled()
    assert EventBridgePublisher("bus", client, sleep=lambda _s: None, workers=1).put_events(_entries(12)) == 12
    assert len(client.calls) == 4  # 2 batches, then both again
