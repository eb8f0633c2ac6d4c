"""One supervisor loop for every run of a runner: it waits on all the runs' pipes and pidfds
at once and serves the earliest deadline (a heartbeat, a timeout, a SIGKILL after the grace),
so a runner keeps many children (:class:`crontabber.supervisor.Supervisor`, one per run) on
one thread and one database connection.

Runs may be added while others are in flight (:meth:`RunLoop.add`, between two
:meth:`RunLoop.wait`): what a pass of due jobs does with ``max_parallel_jobs``, and what a
long-lived server would do with the claims of each of its ticks.

SIGINT/SIGTERM, raised in the runner as ``KeyboardInterrupt`` or
:class:`~crontabber.errors.Terminated` while it waits, stops every child (each run is then
recorded as stopped by signal) and is kept in :attr:`RunLoop.interrupt` for the caller to
re-raise once every run is recorded; a second one SIGKILLs them.
"""

from __future__ import annotations

import time

from .errors import Terminated
from .supervisor import Ending, Supervisor, _wait


class RunLoop:
    """The runs in flight and the loop that serves them."""

    def __init__(self) -> None:
        self.runs: list[Supervisor] = []
        #: The SIGINT/SIGTERM that reached the runner (None: none): nothing new may start.
        self.interrupt: BaseException | None = None

    def __len__(self) -> int:
        return len(self.runs)

    def add(self, run: Supervisor) -> None:
        """Fork ``run``'s child (it closes the other runs' pipes) and serve it from now on.

        Raises:
            OSError: the fork failed (the run is not added).
        """
        run.start(tuple(fd for other in self.runs for fd in other.fds()))
        self.runs.append(run)

    def stop(self, exc: BaseException) -> None:
        """Stop every run in flight for ``exc`` (a SIGINT/SIGTERM caught elsewhere)."""
        if self.interrupt is None:
            self.interrupt = exc
        for run in self.runs:
            run.interrupt(exc)

    def wait(self, until: float | None = None) -> list[tuple[Supervisor, Ending]]:
        """Serve the runs until at least one has ended; those runs with their endings, in
        the order they were added (each run's output read to its end and concluded).
        ``until``: a monotonic time at which to return anyway, [] when none ended by then
        (a server's next tick: it claims more and adds them)."""
        while self.runs:
            if until is not None and time.monotonic() >= until:
                return []
            try:
                deadline = min(
                    [run.deadline() for run in self.runs] + ([until] if until is not None else [])
                )
                ready = _wait(
                    [fd for run in self.runs for fd in run.fds()],
                    max(0.0, deadline - time.monotonic()),
                )
                ended = [run for run in list(self.runs) if run.serve(ready)]
            except (KeyboardInterrupt, Terminated) as exc:
                self.stop(exc)
                continue
            if ended:
                for run in ended:
                    self.runs.remove(run)
                return [(run, self._end(run)) for run in ended]
        return []

    def _end(self, run: Supervisor) -> Ending:
        try:
            return run.end()
        except (KeyboardInterrupt, Terminated) as exc:  # while its output was read to its end
            self.stop(exc)
            return run.end()
