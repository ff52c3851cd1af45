"""HTTP/1.1 persistent connections for local AWS's server, as AWS endpoints keep them.

botocore keeps a pool of connections per endpoint and sends every request of a client over one of them,
and AWS's endpoints keep them open between requests. Werkzeug's development server, which moto's
`ThreadedMotoServer` runs, answers every request with `Connection: close` instead (its request handler
cannot find where one request's body ends and the next request begins), so against local AWS each call
of a function paid for a new TCP connection and the server for a new thread: a cost the deployed
functions never see, charged to their measured time on every one of the burst's ~2,000 requests.

`PersistentConnectionHandler` serves each request of a connection in turn on the connection's thread:
the request body is read through a stream limited to its `Content-Length`, whatever the application
left unread is drained to that length (and no further: the next request may already be waiting behind
it), and the answer is sent with its length, so the connection stays open for the client's next call.
A request whose body has no length (chunked) is answered with `Connection: close`, as Werkzeug does.
The server closes the connections still open when it stops (`close_connections`), so their threads end
with it instead of waiting on clients that keep their pools.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from moto.moto_server.werkzeug_app import MotoRequestHandler
from werkzeug.exceptions import InternalServerError
from werkzeug.wsgi import LimitedStream

#: headers the handler writes itself from the answer it sends
_FRAMING = frozenset({"content-length", "connection", "transfer-encoding"})


class PersistentConnectionHandler(MotoRequestHandler):
    """moto's request handler with HTTP/1.1 keep-alive (see the module)."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # the answer goes out in two writes (head, body): without this the body waits for the ACK of the
        # head, which the client delays (Nagle's algorithm against delayed ACKs: 40 ms per request)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _open(self.server).add(self.connection)

    def finish(self) -> None:
        _open(self.server).discard(self.connection)
        super().finish()

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        environ = self.make_environ()
        body = None
        if not environ.get("wsgi.input_terminated"):  # not chunked: the body is Content-Length bytes
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = LimitedStream(self.rfile, length)  # type: ignore[arg-type]
            environ["wsgi.input"] = body
        status, headers, payload = _answer(self.server.app, environ)
        head = environ["REQUEST_METHOD"] == "HEAD"  # no body; its Content-Length is the GET's (S3's HeadObject)
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        for key, value in headers:
            if key.lower() not in _FRAMING or (head and key.lower() == "content-length"):
                self.send_header(key, value)
        if not head:
            self.send_header("Content-Length", str(len(payload)))
        if body is None:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(payload)
        self.wfile.flush()
        if body is not None:
            body.exhaust()  # the next request line starts right after this body


def _answer(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """The application's status, headers and whole body; a 500 when it raises (as Werkzeug answers)."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]
        return chunks.append

    try:
        result = app(environ, start_response)
        try:
            chunks.extend(result)
        finally:
            if hasattr(result, "close"):
                result.close()
    except Exception:
        chunks.clear()
        chunks.extend(InternalServerError()(environ, start_response))
    return started[0], started[1], b"".join(chunks)


_LOCK = threading.Lock()


def _open(server: Any) -> set[socket.socket]:
    """The connections `server` holds open (kept on the server object)."""
    with _LOCK:
        found: set[socket.socket] | None = getattr(server, "_carpool_open_connections", None)
        if found is None:
            found = server._carpool_open_connections = set()
        return found


def close_connections(server: Any) -> None:
    """Close every connection `server` still holds open: their threads, waiting for the next request,
    read the end of the stream and finish."""
    for connection in list(_open(server)):
        with contextlib.suppress(OSError):  # already closed by the client
            connection.shutdown(socket.SHUT_RDWR)
