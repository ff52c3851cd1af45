"""Local AWS's server keeps connections open between requests, as AWS endpoints do, without letting one
request's body run into the next (`carpool.sim.localaws.persistent_http`)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.serving import make_server

from carpool.sim.localaws import persistent_http


class _Quiet(persistent_http.PersistentConnectionHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def _app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Echoes the body, except on /skip (reads nothing) and /boom (raises)."""
    path = environ["PATH_INFO"]
    if path == "/boom":
        raise RuntimeError("boom")
    if environ["REQUEST_METHOD"] == "HEAD":  # what an object's HEAD answers: its length, no body
        start_response("200 OK", [("Content-Length", "1234")])
        return []
    body = b"" if path == "/skip" else environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Connection", "close")])
    return [b"echo:", body]


@pytest.fixture
def server() -> Iterator[Any]:
    served = make_server("127.0.0.1", 0, _app, True, request_handler=_Quiet)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    persistent_http.close_connections(served)
    served.server_close()


def _accepted(server: Any) -> list[int]:
    count = [0]
    original = server.process_request

    def counted(request: Any, address: Any) -> None:
        count[0] += 1
        original(request, address)

    server.process_request = counted
    return count


def test_requests_of_a_client_share_one_connection(server: Any) -> None:
    accepted = _accepted(server)
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    for i in range(5):
        conn.request("POST", "/", body=f"n{i}".encode())
        answer = conn.getresponse()
        assert answer.read() == f"echo:n{i}".encode()
        assert answer.getheader("Connection") is None  # the application's "close" is not passed on
    assert accepted[0] == 1


def test_an_unread_body_does_not_become_the_next_request(server: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    conn.request("POST", "/skip", body=b"GET /evil HTTP/1.1\r\n\r\n" * 100)
    assert conn.getresponse().read() == b"echo:"
    conn.request("POST", "/", body=b"second")
    assert conn.getresponse().read() == b"echo:second"


def test_a_failing_application_answers_500_and_the_connection_goes_on(server: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    conn.request("POST", "/boom", body=b"x")
    answer = conn.getresponse()
    assert answer.status == 500
    answer.read()
    conn.request("POST", "/", body=b"after")
    assert conn.getresponse().read() == b"echo:after"


def test_a_head_answer_keeps_its_length_and_has_no_body(server: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    conn.request("HEAD", "/object")
    answer = conn.getresponse()
    assert answer.getheader("Content-Length") == "1234" and answer.read() == b""
    conn.request("POST", "/", body=b"next")
    assert conn.getresponse().read() == b"echo:next"


def test_a_chunked_request_closes_its_connection(server: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    conn.request("POST", "/", body=iter([b"a", b"b"]), encode_chunked=True,
                 headers={"Transfer-Encoding": "chunked"})
    answer = conn.getresponse()
    assert answer.read() == b"echo:ab"
    assert answer.getheader("Connection") == "close"


def test_stopping_closes_the_connections_clients_keep(server: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    conn.request("POST", "/", body=b"x")
    conn.getresponse().read()
    assert len(persistent_http._open(server)) == 1
    persistent_http.close_connections(server)
    deadline = time.monotonic() + 5
    while persistent_http._open(server) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not persistent_http._open(server)  # the connection's thread saw the end and finished
    assert conn.sock is not None
    conn.sock.settimeout(5)
    assert conn.sock.recv(1) == b""  # the client sees the connection closed


def test_answers_go_out_without_waiting_for_acks(server: Any) -> None:
    """Head and body are two writes: with Nagle's algorithm on, each body would wait for the client's
    delayed ACK of its head (about 40 ms a request), so the server's side of the connection has it off."""
    conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    conn.request("POST", "/", body=b"x")
    conn.getresponse().read()
    (served,) = persistent_http._open(server)
    assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
