"""One deadline for a whole delivery (a webhook's request and answer, an SMTP session).

A socket's timeout bounds each read only: a receiver that answers one byte at a time, each
within the timeout, could hold the sending tick for hours (the security review's N-4). A
:class:`Deadline` watches the connections opened while it runs and, when it passes, shuts
them down: the read in progress returns at once, whatever stage the exchange is at (a TLS
handshake, the status line, a header, an SMTP reply). Looking the name up in DNS is not
covered (the resolver's own timeouts bound it).
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class Deadline:
    """Use as a context manager around one delivery; pass every socket the delivery opens to
    :meth:`watch`. After ``seconds``, :attr:`expired` is true and those sockets are shut down
    (reads and writes on them fail). Leaving the block cancels it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []  # our duplicates: shut down, never in use
        self._over = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._timer.cancel()
        with self._lock:
            self._over = True
            for duplicate in self._watched:
                duplicate.close()
            self._watched.clear()

    def watch(self, sock: socket.socket) -> socket.socket:
        """Watch ``sock`` (returned as is). A duplicate of its descriptor is kept: shutting
        that down stops the connection even after ``sock`` was wrapped in TLS (which
        detaches the original object), and it can never be another connection's."""
        duplicate = sock.dup()
        with self._lock:
            if self._over:
                duplicate.close()
                return sock
            self._watched.append(duplicate)
            if self.expired:
                _shut(duplicate)
        return sock

    @property
    def message(self) -> str:
        """The delivery error of an expired deadline."""
        return f"no answer within {self.seconds:g} s (alerts.timeout_seconds, the whole delivery)"

    def _expire(self) -> None:
        with self._lock:
            if self._over:
                return
            self.expired = True
            for duplicate in self._watched:
                _shut(duplicate)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the other side
        pass
