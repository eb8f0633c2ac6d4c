"""One deadline for a request's line and headers, for the standard library's HTTP servers
(``python -m search.server``, ``python -m dashboard``).

A socket timeout bounds each read only: a client sending its headers one byte every few
seconds held a thread (and a connection) as long as it liked; ten of them held ten threads
(security review 2026-11-28, S3-L7). With :class:`RequestDeadline` mixed into the request
handler, a request whose line and headers have not all arrived ``request_seconds`` after the
connection was accepted is dropped: its connection is shut down (no answer: the client is
not waiting for one) and the application never runs. Under gunicorn, its own ``--timeout``
and ``--keep-alive`` (and the proxy in front) do this.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

#: Seconds a client has to send its request line and headers (the servers' default).
REQUEST_SECONDS = 10.0


class RequestDeadline:
    """Mix in before a ``BaseHTTPRequestHandler`` subclass (``class H(RequestDeadline,
    WSGIRequestHandler)``); ``request_seconds`` may be set on the subclass."""

    request_seconds: float = REQUEST_SECONDS
    connection: socket.socket

    def setup(self) -> None:
        super().setup()  # type: ignore[misc]
        self._expired = threading.Event()
        self._timer = threading.Timer(self.request_seconds, self._drop)
        self._timer.daemon = True
        self._timer.start()

    def _drop(self) -> None:
        self._expired.set()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed
            pass

    def parse_request(self) -> bool:
        """The base's parse (the headers are read there), refused once the deadline passed:
        headers cut short by the drop are not a request."""
        try:
            parsed: bool = super().parse_request()  # type: ignore[misc]
        finally:
            self._timer.cancel()
        if self._expired.is_set():
            self.close_connection = True
            return False
        return parsed

    def finish(self) -> None:
        self._timer.cancel()
        super().finish()  # type: ignore[misc]

    close_connection: Any
