"""The tail of what a job logged and printed, kept with its run (the run ledger).

The supervised child's stdout and stderr are pipes the runner reads (its
:class:`~crontabber.supervisor.Supervisor` waits on them with the child's
other descriptors): each chunk is passed on to the runner's own stdout or
stderr, so cron mail and a terminal see what they always saw, and appended to
an :class:`OutputTail`, which keeps the last ``limit`` bytes. The job's log
records reach it through the logging handler the child inherited (on stderr,
at the configured level, already redacted); what a job or its subprocesses
print is redacted when the tail is read, with the secrets the runner's logging
masks. The runner saves the tail with each heartbeat when it grew, sooner after new
output early in a run (1 s, then 2, 4, 8, 16 s: a run killed in its first seconds keeps
what it printed), and at the end.
"""

from __future__ import annotations

import os
import select

from .redaction import masked


class OutputTail:
    """The last ``limit`` bytes written to a run's stdout and stderr, in arrival order."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.dropped = 0  # bytes written before the kept tail
        self._buffer = bytearray()
        self._changed = False

    def add(self, data: bytes) -> None:
        self._buffer += data
        excess = len(self._buffer) - self.limit
        if excess > 0:
            del self._buffer[:excess]
            self.dropped += excess
        self._changed = True

    def kept(self) -> tuple[str, int]:
        """``(text, bytes not kept before it)``: the tail as text (invalid UTF-8
        replaced), starting at a line boundary when bytes were dropped, with secrets masked."""
        raw, skipped = bytes(self._buffer), 0
        if self.dropped and b"\n" in raw:
            skipped = raw.index(b"\n") + 1
            raw = raw[skipped:]
        return masked(raw.decode("utf-8", errors="replace")), self.dropped + skipped

    @property
    def pending(self) -> bool:
        """Whether something was added since the last :meth:`changes`."""
        return self._changed

    def changes(self) -> tuple[str, int] | None:
        """:meth:`kept` when something was added since the last call, else None."""
        if not self._changed:
            return None
        self._changed = False
        return self.kept()


def forward(fd: int, data: bytes) -> None:
    """Pass ``data`` on to the runner's own ``fd`` (1 or 2) without ever blocking: the runner
    writes this between lease renewals, and a reader that stopped reading (a full pipe)
    must not cost the run its lease. Writes go in pieces of at most ``select.PIPE_BUF``
    bytes, each only while ``fd`` is writable (a pipe then has that much room); what does
    not fit is dropped there, never from the tail, which keeps it."""
    view = memoryview(data)
    while view:
        try:
            if not select.select([], [fd], [], 0)[1]:
                return
            written = os.write(fd, view[: select.PIPE_BUF])
        except OSError:  # a closed reader (EPIPE), a closed fd
            return
        view = view[written:]
