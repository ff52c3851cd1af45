"""Handlers' output goes to the decision log of the simulation whose context writes it, even with two
simulations writing at once on two threads, and stdout is as it was once both end."""

from __future__ import annotations

import io
import logging
import sys
import threading

from carpool.sim.run import decision_log


def _log() -> decision_log.DecisionLog:
    return decision_log.DecisionLog(lambda: 0.0)


def test_two_runs_at_once_each_keep_their_own_lines() -> None:
    logs = {"blue": _log(), "green": _log()}
    function_logger = logging.getLogger("carpool-provisioner")
    stale = logging.StreamHandler(io.StringIO())  # created under another stdout (an earlier test's capture)
    function_logger.addHandler(stale)
    level = function_logger.level
    function_logger.setLevel(logging.INFO)
    stdout = sys.stdout
    both_in = threading.Barrier(2)

    def run(name: str) -> None:
        with decision_log.captured_output(logs[name]):
            both_in.wait()
            for i in range(50):
                print(f"{name} print {i}")
                logging.getLogger("carpool.app.provision").info("%s record %d", name, i)
                function_logger.info("%s powertools %d", name, i)
            both_in.wait()

    threads = [threading.Thread(target=run, args=(name,)) for name in logs]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        function_logger.removeHandler(stale)
        function_logger.setLevel(level)
    assert sys.stdout is stdout
    assert stale.stream.getvalue() == ""  # type: ignore[attr-defined]
    for name, log in logs.items():
        # (the function logger may carry a Powertools handler from an earlier run too: a line can come twice)
        messages = {d.message for d in log.decisions}
        assert messages == {f"{name} {kind} {i}" for kind in ("print", "record", "powertools") for i in range(50)}
    assert decision_log._sink.get() is None


def test_output_outside_a_run_is_not_captured() -> None:
    log = _log()
    with decision_log.captured_output(log):
        print("inside")
    print("outside")
    logging.getLogger("carpool.app.provision").warning("after")
    assert [d.message for d in log.decisions] == ["inside"]
