"""Run one claimed job in a child process and keep its lease.

The runner forks a child per due job (never on an idle tick). The **child**
(:func:`_child_main`) builds the job, iterates ``main()`` and sends each
successful unit, then how it ended, to the parent over a pipe; it never
touches the state database. The **parent** (:class:`Supervisor`, one per run, driven with
every other run of the runner by one loop, :class:`crontabber.runloop.RunLoop`, on one
thread) waits on that pipe and on the child's pidfd, and meanwhile:

- renews the lease every ``heartbeat_seconds`` on the runner's own
  connection; a renewal that finds another run on the row means the job was
  taken over: the run is fenced off and the child stopped;
- writes each unit's progress, conditional on the run id (fencing);
- stops the child (SIGTERM to its process group, SIGKILL after
  ``kill_grace_seconds``) past the job's ``timeout``, when the lease is about
  to be lost (``holds_lease()`` turns False after ``lease_seconds -
  heartbeat_seconds`` without a renewal; half a heartbeat later the job is
  stopped, still half a heartbeat before anyone may take over), and on
  SIGINT/SIGTERM of the runner;
- turns a child that dies without a word (segfault, OOM kill, ``os._exit``)
  into a failure with its exit status;
- reads the child's stdout and stderr (pipes), passes them on to its own and
  keeps their tail (:mod:`crontabber.capture`), saved with each heartbeat; new
  output brings the next heartbeat forward to ``FIRST_SAVE_SECONDS`` after it,
  that delay doubling each time, until it reaches the heartbeat interval (a
  handful of statements per run, none per line): a run killed in its first
  seconds keeps what it printed.

The child is in its own process group (a terminal's Ctrl-C reaches only the
runner, which forwards one signal; a timeout kills the job's own subprocesses
too) and dies with the runner (``PR_SET_PDEATHSIG``): a runner killed with
``kill -9`` never leaves its job running unsupervised. If the runner is
stopped (SIGSTOP) instead, the child's watchdog sees the renewals stop and
stops the job itself at the same point.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import logging
import mmap
import os
import select
import signal
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, NoReturn

from .base import RunContext, serve, units_of
from .capture import OutputTail, forward
from .config.settings import RunLimits
from .errors import (
    DatabaseUnavailable,
    JobProcessDied,
    JobTimeout,
    LeaseLost,
    Terminated,
)
from .failures import describe
from .formats import utc_text
from .lanes import Units
from .redaction import masked
from .state import Claim, RunStatus, Unit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .lanes import Lane

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
# How soon after a run's first output it is saved (the next early save waits twice as long).
FIRST_SAVE_SECONDS = 1.0


class LeaseClock:
    """The lease as both processes see it, in an anonymous shared mapping
    (inherited by the forked child): the monotonic time at which the last
    successful renewal was sent, and whether the lease is known to be lost."""

    _FORMAT = "dd"

    def __init__(self, hold_seconds: float) -> None:
        self.hold_seconds = hold_seconds
        self._map = mmap.mmap(-1, struct.calcsize(self._FORMAT))
        self.renewed(time.monotonic())

    def _read(self) -> tuple[float, float]:
        return struct.unpack_from(self._FORMAT, self._map)

    def renewed(self, sent_at: float) -> None:
        struct.pack_into(self._FORMAT, self._map, 0, sent_at, self._read()[1])

    def lose(self) -> None:
        struct.pack_into(self._FORMAT, self._map, 0, self._read()[0], 1.0)

    def holds(self, grace: float = 0.0) -> bool:
        """Whether the run may still act as the job's only holder (``grace``
        seconds more: how long the job is given to stop by itself)."""
        sent_at, lost = self._read()
        return not lost and time.monotonic() - sent_at < self.hold_seconds + grace


def logged_value(exc: BaseException, message: str) -> str:
    """The log row's ``exc_value``: ``Type('message')``, the form of crontabber's
    ``repr(exc)`` for an exception of one string argument, whatever arguments ``exc`` has,
    so that every view reads back ``str(exc)`` (``URLError: <urlopen error ...>``, never
    ``URLError(ConnectionRefusedError(...))``: :func:`crontabber.views.value_from_repr`)."""
    return f"{type(exc).__name__}({message!r})"


@dataclass
class Failure:
    """How a run failed: crontabber's ``last_error`` record, the exception for the log row
    as ``Type('its message')`` (:func:`logged_value`), and a one-line summary; :meth:`of` masks the
    secrets in each
    (:func:`crontabber.redaction.masked`), so that neither the database nor what reads it
    (the commands, the dashboard, the alerts) ever holds them."""

    error: dict[str, str]
    exc_repr: str
    summary: str
    kind: str = "error"  # "error", "interrupt" (KeyboardInterrupt) or "terminate"
    seconds: float = 0.0  # since the last unit: the log row's duration
    status: RunStatus = RunStatus.FAILED  # the run's status in the ledger

    @classmethod
    def of(cls, exc: BaseException, traceback_text: str | None = None) -> "Failure":
        kind = "error"
        if isinstance(exc, KeyboardInterrupt):
            kind = "interrupt"
        elif isinstance(exc, Terminated):
            kind = "terminate"
        frames = traceback_text
        if frames is None:
            frames = "".join(traceback.format_tb(exc.__traceback__))
        status = RunStatus.FAILED
        if isinstance(exc, JobTimeout):
            status = RunStatus.TIMED_OUT
        elif isinstance(exc, LeaseLost):
            status = RunStatus.FENCED_OFF
        elif kind != "error" or (isinstance(exc, JobProcessDied) and exc.by_signal):
            status = RunStatus.STOPPED
        return cls(  # masked once, here: everything downstream stores and shows these
            error={"type": repr(type(exc)), "value": masked(str(exc)), "traceback": masked(frames)},
            exc_repr=logged_value(exc, masked(str(exc))),
            summary=masked(describe(exc)),
            kind=kind,
            status=status,
        )


@dataclass
class Ending:
    """How a supervised run ended.

    ``failure`` is None for a success. ``fenced`` says why the run lost the
    job, when it did. ``interrupt`` is the SIGINT/SIGTERM that stopped the
    runner (re-raised once the bookkeeping is done).
    """

    failure: Failure | None = None
    fenced: str | None = None
    interrupt: BaseException | None = None
    units: int = 0
    beats: int = 0
    # An ordinary job's unit, written with the end of the run (one transaction).
    deferred: list[Unit] = field(default_factory=list)
    # The job's one-line summary of each successful unit, in order (None: it gave none).
    summaries: list[tuple[dt.datetime, str | None]] = field(default_factory=list)
    # The captured tail of the job's stdout and stderr, and the bytes dropped before it.
    output: str = ""
    dropped: int = 0


# ------------------------------------------------- the messages between the child and the runner


@dataclass(frozen=True)
class UnitDone:
    """Child to runner: the job finished a unit; answered with :class:`Recorded` once written
    (or kept while the database is away): only then does the job start the next one."""

    when: dt.datetime
    seconds: float
    summary: str | None
    metrics: Mapping[str, float] | None


@dataclass(frozen=True)
class Recorded:
    """Runner to child: the unit just sent is written."""


@dataclass(frozen=True)
class AskUnit:
    """Child to runner: the job's next unit (``proposed``: the interval a scheduled backfill
    would run next; None: a rerun's, which the lane picks); answered with :class:`UnitAnswer`."""

    proposed: dt.datetime | None


@dataclass(frozen=True)
class UnitAnswer:
    """Runner to child: the unit claimed for the run (``when``), or why the job waits, or
    nothing left (both None): :meth:`crontabber.lanes.Lane.next_unit`."""

    when: dt.datetime | None
    wait: str | None


@dataclass(frozen=True)
class JobFailed:
    """Child to runner: how the job failed (its last message)."""

    failure: Failure


class Supervisor:
    """Runs one claimed job in a child process; see the module docstring.

    ``make_app()`` builds the job instance in the child, once it serves the run's
    :class:`~crontabber.base.RunContext` (:meth:`context`); ``lane`` (:mod:`crontabber.lanes`)
    gives the run its units, records each, renews the lease and saves the captured output;
    ``report`` sends a job's exception to Sentry (called in the child); ``tail`` keeps the
    job's output (None: not captured, the child writes to the runner's stdout and stderr
    directly); ``inherited_fds``: the runner's connection, closed in the child.
    """

    def __init__(
        self,
        claim: Claim,
        limits: RunLimits,
        make_app: Callable[[], Any],
        lane: Lane,
        report: Callable[[BaseException], object],
        inherited_fds: tuple[int, ...] = (),
        tail: OutputTail | None = None,
    ) -> None:
        self.claim = claim
        self.lane = lane
        self.limits = limits
        self.make_app = make_app
        self.report = report
        self.inherited_fds = inherited_fds
        self.tail = tail
        self._outputs: dict[int, int] = {}  # our read end of a child's pipe -> our fd it goes to
        # An ordinary job's one unit is written with the end of the run, in one
        # transaction: a runner killed between the two would otherwise leave a
        # recorded success with next_run still due, and the job would run again.
        self.defer_units = lane.units is Units.OWN
        self.clock = LeaseClock(limits.hold_seconds)
        self.ending = Ending()
        self._stop_reason: BaseException | None = None
        self._kill_at: float | None = None
        self._child_failure: Failure | None = None
        self._db_down_since: float | None = None
        self._pending_units: list[Unit] = []
        self._last_unit_at = time.monotonic()
        self._save_delay = FIRST_SAVE_SECONDS

    # ---------------------------------------------------------------- parent

    def start(self, also_close: tuple[int, ...] = ()) -> None:
        """Fork the child (it closes the runner's connection and ``also_close``: the other
        runs' pipes); from here on :meth:`fds`, :meth:`deadline` and :meth:`serve` drive the
        run, and :meth:`end` concludes it once :meth:`serve` said the child has exited."""
        from multiprocessing.connection import Pipe

        # duplex: the child waits for each unit's answer (see _on_message)
        reader, writer = Pipe(duplex=True)
        pipes = [os.pipe() for _ in (1, 2)] if self.tail is not None else []
        for stream in (sys.stdout, sys.stderr):  # not written twice by the child's copies
            _flush(stream)
        runner = os.getpid()  # read before the fork: the child's getppid() may already differ
        self.inherited_fds = (*self.inherited_fds, *also_close)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child, measured through its effects
            reader.close()
            for target, (read_end, write_end) in zip((1, 2), pipes):
                os.dup2(write_end, target)
                os.close(read_end)
                os.close(write_end)
            _child_main(self, writer, runner)
        writer.close()
        for target, (read_end, write_end) in zip((1, 2), pipes):
            os.close(write_end)
            os.set_blocking(read_end, False)
            self._outputs[read_end] = target
        self.pid = pid
        self._reader = reader
        self._pidfd = _pidfd(pid)
        self._started = time.monotonic()
        self._next_beat = self._started + self.limits.heartbeat_seconds
        self.status: int | None = None

    def context(self, writer: Any) -> RunContext:
        """The run as the job in the child sees it: the claim's time and run id, the lease
        clock, and its units from its lane (a rerun's picked by the runner, a backfill run's
        claimed one by one over ``writer``, else its own)."""
        app_name = self.claim.app_name
        return RunContext(
            started_at=self.claim.started,
            run_id=self.claim.run_id,
            lease=self.clock,
            dates=_rerun_intervals(writer, app_name) if self.lane.units is Units.PICKED else None,
            gate=_interval_gate(writer, app_name) if self.lane.units is Units.CLAIMED else None,
        )

    def fds(self) -> list[int]:
        """What the run waits on: the child's messages, its pidfd, its output pipes."""
        return (
            [self._reader.fileno()]
            + ([self._pidfd] if self._pidfd is not None else [])
            + list(self._outputs)
        )

    def deadline(self) -> float:
        """The monotonic time by which :meth:`serve` must be called even if no fd is ready:
        the next heartbeat, the timeout, the SIGKILL after the grace (and, without a pidfd,
        a poll of the child every 0.2 s)."""
        deadline = min(self._next_beat, self._next_deadline(self._started))
        return deadline if self._pidfd is not None else min(deadline, time.monotonic() + 0.2)

    def serve(self, ready: set[int]) -> bool:
        """Do what ``ready`` (the fds of :meth:`fds` that are readable) and the clock ask for:
        output, messages, the child's exit, heartbeats, the timeout, the lease; True once the
        child has exited (then :meth:`end`)."""
        for fd in [fd for fd in self._outputs if fd in ready]:
            self._read_output(fd)
        if self._reader.fileno() in ready:
            self._drain(self._reader)
        if self._pidfd is None or self._pidfd in ready:
            self.status = _reap(self.pid)
            if self.status is not None:
                self._drain(self._reader)  # what it sent before exiting
                return True
        now = time.monotonic()
        self._next_beat = self._output_save(now, self._next_beat)
        if now >= self._next_beat:
            self._beat()
            self._next_beat = now + self.limits.heartbeat_seconds
        self._enforce(self._started, now)
        return False

    def interrupt(self, exc: BaseException) -> None:
        """SIGINT/SIGTERM reached the runner: stop the child (a second one: SIGKILL)."""
        self._interrupted(exc)

    def end(self) -> Ending:
        """Once the child has exited: what is left of its output, then how the run ended."""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._stop_reason is not None:
            _kill_group(self.pid, signal.SIGKILL)  # what the job left behind
        try:
            self._read_outputs_to_end()
        finally:
            self._reader.close()
            for read_end in list(self._outputs):
                os.close(read_end)
            self._outputs.clear()
        return self._conclude()

    def _read_output(self, fd: int) -> None:
        """Pass on and keep what the child wrote to one of its pipes; forget the pipe at EOF."""
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            os.close(fd)
            del self._outputs[fd]
            return
        forward(self._outputs[fd], data)
        assert self.tail is not None
        self.tail.add(data)

    def _read_outputs_to_end(self) -> None:
        """Once the child has exited: what is left in its pipes. A process the job started
        and left running may keep a pipe open, so this waits for at most a second."""
        deadline = time.monotonic() + 1.0
        while self._outputs and time.monotonic() < deadline:
            for fd in _wait(list(self._outputs), 0.05):
                self._read_output(fd)
        if self.tail is not None:
            self.ending.output, self.ending.dropped = self.tail.kept()

    def _output_save(self, now: float, next_beat: float) -> float:
        """The next heartbeat, brought forward to save new output ``_save_delay`` from now
        while that delay (doubled at each use) is shorter than the heartbeat interval."""
        if (
            self.tail is None
            or not self.tail.pending
            or self._save_delay >= self.limits.heartbeat_seconds
            or next_beat <= now + self._save_delay
        ):
            return next_beat
        next_beat = now + self._save_delay
        self._save_delay *= 2
        return next_beat

    def _next_deadline(self, started: float) -> float:
        deadlines = [self._kill_at or float("inf")]
        if self.limits.timeout and self._stop_reason is None:
            deadlines.append(started + self.limits.timeout)
        return min(deadlines)

    def _drain(self, reader: Any) -> None:
        while reader.poll():
            try:
                message = reader.recv()
            except (EOFError, OSError):
                return
            self._on_message(message, reader)

    def _on_message(self, message: object, reader: Any = None) -> None:
        answer: object = None
        if isinstance(message, UnitDone):
            self._record(
                (
                    message.when,
                    dt.timedelta(seconds=message.seconds),
                    message.summary,
                    message.metrics,
                )
            )
            answer = Recorded()  # written (or kept while the database is away): the job goes on
        elif isinstance(message, AskUnit):
            answer = UnitAnswer(*self._next_unit(message.proposed))
        elif isinstance(message, JobFailed):
            self._child_failure = message.failure
        if answer is not None and reader is not None:
            try:
                reader.send(answer)
            except OSError:  # (the child is gone)
                pass

    def _next_unit(self, proposed: dt.datetime | None) -> tuple[dt.datetime | None, str | None]:
        """The job's next unit, claimed for the run by the lane: ``(when, None)``; ``(None,
        why)``: it waits; ``(None, None)``: nothing left. With the database away, or the
        lease lost, it waits."""
        if self.ending.fenced is not None:
            return None, "nobody: this run lost its lease"
        try:
            return self.lane.next_unit(proposed)
        except DatabaseUnavailable as exc:
            self._database_down(exc)
            return None, (
                "nobody known: " if proposed is not None else ""
            ) + "the state database is away"

    def _record(self, unit: Unit) -> None:
        """One unit the job finished: ``(when, duration, summary, metrics)``."""
        self._last_unit_at = time.monotonic()
        self.ending.summaries.append((unit[0], unit[2]))
        if self.defer_units:
            self.ending.deferred.append(unit)
            return
        self._pending_units.append(unit)
        self._flush_units()

    def _flush_units(self) -> None:
        """Write the units not yet written; kept for later while the database is away."""
        while self._pending_units:
            when, duration, summary, metrics = self._pending_units[0]
            try:
                held = self.lane.record((when, duration, summary, metrics))
            except DatabaseUnavailable as exc:
                self._database_down(exc)
                return
            self._pending_units.pop(0)
            if not held:
                self._fenced("another run took the job over")
                self._pending_units.clear()
                return
            self.ending.units += 1
            logger.info(
                "%s succeeded for %s%s",
                self.claim.app_name,
                utc_text(when),
                f": {summary}" if summary else "",
                extra={"job": self.claim.app_name},
            )

    def _beat(self) -> None:
        sent_at = time.monotonic()
        try:
            renewed = self.lane.beat(self.tail.changes() if self.tail is not None else None)
        except DatabaseUnavailable as exc:
            self._database_down(exc)
            return
        if self._db_down_since is not None:
            logger.warning(
                "%s: the state database is back; lease renewed",
                self.claim.app_name,
                extra={"job": self.claim.app_name},
            )
            self._db_down_since = None
        if renewed is None:
            self._fenced("another run took the job over")
            return
        self.ending.beats += 1
        self.clock.renewed(sent_at)
        self._flush_units()

    def _database_down(self, exc: DatabaseUnavailable) -> None:
        if self._db_down_since is None:
            self._db_down_since = time.monotonic()
            logger.warning(
                "%s: %s; the job goes on while its lease lasts (%g s more)",
                self.claim.app_name,
                exc,
                self.limits.hold_seconds,
                extra={"job": self.claim.app_name},
            )

    def _holds(self) -> bool:
        """Whether the lease still holds, the job's grace to stop by itself included: when it
        does not, the runner and the job's watchdog (:func:`_watchdog`) both stop the job."""
        return self.clock.holds(self.limits.stop_grace_seconds)

    def _fenced(self, why: str) -> None:
        """The database says another run holds the job now: stop, and claim nothing more."""
        if self.ending.fenced is None:
            self.ending.fenced = why
            self._lost(why)

    def _lost(self, why: str) -> None:
        """The run no longer holds the job (``why``): say so on the log, stop the job."""
        self.clock.lose()
        logger.error(
            "%s: run %s lost the job: %s; stopping it",
            self.claim.app_name,
            self.claim.run_id,
            why,
            extra={"job": self.claim.app_name},
        )
        self._stop(LeaseLost(self.claim.app_name, self.claim.run_id, why))

    def _enforce(self, started: float, now: float) -> None:
        if self._stop_reason is None:
            if self.limits.timeout and now - started >= self.limits.timeout:
                logger.error(
                    "%s: past its timeout of %g s; stopping it",
                    self.claim.app_name,
                    self.limits.timeout,
                    extra={"job": self.claim.app_name},
                )
                self._stop(JobTimeout(self.claim.app_name, self.limits.timeout))
            elif not self._holds():
                self._lost(f"its lease could not be renewed for {self.limits.hold_seconds:g} s")
        if self._kill_at is not None and now >= self._kill_at:
            logger.error(
                "%s: still running %g s after SIGTERM; SIGKILL",
                self.claim.app_name,
                self.limits.kill_grace_seconds,
                extra={"job": self.claim.app_name},
            )
            _kill_group(self.pid, signal.SIGKILL)
            self._kill_at = float("inf")

    def _stop(self, reason: BaseException, signum: int = signal.SIGTERM) -> None:
        """Ask the child to stop (once); SIGKILL follows after the grace period."""
        if self._stop_reason is None:
            self._stop_reason = reason
            _kill_group(self.pid, signum)
            self._kill_at = time.monotonic() + self.limits.kill_grace_seconds

    def _interrupted(self, exc: BaseException) -> None:
        if self.ending.interrupt is not None:  # a second Ctrl-C: no more grace
            _kill_group(self.pid, signal.SIGKILL)
            return
        self.ending.interrupt = exc
        signum = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
        self._stop(exc, signum)

    def _conclude(self) -> Ending:
        ending = self.ending
        self._flush_units()
        child = self._child_failure
        reason = self._stop_reason
        if reason is None and child is not None and child.kind == "terminate" and not self._holds():
            # the job's own lease watchdog stopped it before the runner's check did: the same
            # loss, recorded and logged the same way
            self._lost(f"its lease could not be renewed for {self.limits.hold_seconds:g} s")
            reason = self._stop_reason
        if isinstance(reason, (JobTimeout, LeaseLost)):
            # The runner's reason wins; the child's traceback says where the job was.
            frames = child.error["traceback"] if child else ""
            ending.failure = Failure.of(reason, frames)
            ending.failure.seconds = time.monotonic() - self._last_unit_at
            if isinstance(reason, JobTimeout):
                self.report(reason)
        elif child is not None:
            ending.failure = child
        elif self.status != 0 or reason is not None:
            how = describe_status(self.status if self.status is not None else -1)
            died = JobProcessDied(self.claim.app_name, how)
            ending.failure = Failure.of(reason if reason is not None else died, "")
            ending.failure.seconds = time.monotonic() - self._last_unit_at
            if reason is None:
                logger.error("%s", died, extra={"job": self.claim.app_name})
                self.report(died)
        if (
            ending.failure is not None
            and ending.failure.kind == "interrupt"
            and not ending.interrupt
        ):
            ending.interrupt = KeyboardInterrupt()  # the job itself raised it: stop the run
        return ending


def describe_status(status: int) -> str:
    """A wait status in words: ``exit status 3`` or ``killed by signal 11 (SIGSEGV)``."""
    if status < 0:
        return "unknown exit status"
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = "?"
        return f"killed by signal {signum} ({name})"
    return f"exit status {os.WEXITSTATUS(status)} without reporting how the job ended"


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: poll waitpid instead
        return None


def _wait(fds: list[int], timeout: float) -> set[int]:
    try:
        ready, _, _ = select.select(fds, [], [], timeout)
    except InterruptedError:
        return set()
    return set(ready)


def _reap(pid: int) -> int | None:
    """The child's wait status once it has exited, else None."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return status if done == pid else None


def _kill_group(pid: int, signum: int) -> None:
    """Signal the child's process group (the job and what it started)."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------ child


class _StopOnce:
    """The child's SIGTERM handler: raise :class:`Terminated` once; later
    SIGTERMs are ignored so the job's failure can still be reported (the
    parent's SIGKILL ends it if it hangs)."""

    def __init__(self) -> None:
        self.raised = False

    def __call__(self, signum: int, frame: object) -> None:
        if not self.raised:
            self.raised = True
            raise Terminated(signum)


def _child_main(supervisor: Supervisor, writer: Any, runner: int) -> NoReturn:  # pragma: no cover
    """The forked child: run the job, report units and the ending, exit.

    Never returns: ``os._exit`` skips the parent's atexit handlers and never
    closes the parent's database connection (whose socket it shares).
    """
    code = 0
    try:
        _become_child(supervisor, runner)
        _run_job(supervisor, writer)
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's code
        code = 70
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):  # os._exit does not flush them
            _flush(stream)
        os._exit(code)


def _flush(stream: Any) -> None:
    try:
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _become_child(supervisor: Supervisor, runner: int) -> None:
    """Tie the forked child to ``runner`` (the pid that forked it, read *before* the fork):
    a runner killed at any moment after the fork takes the job with it. The death signal
    only covers deaths after ``prctl``; a runner that died earlier shows as a parent other
    than ``runner`` (a child that read its parent's pid itself could read the reaper's)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the lease watchdog still stops the job
    if os.getppid() != runner:  # the runner died before prctl
        os._exit(71)
    os.setpgid(0, 0)
    signal.signal(signal.SIGTERM, _StopOnce())
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for fd in supervisor.inherited_fds:  # the runner's state connection: not ours
        try:
            os.close(fd)
        except OSError:
            pass
    threading.Thread(
        target=_watchdog,
        args=(supervisor.clock, supervisor.limits.stop_grace_seconds),
        daemon=True,
        name="lease-watchdog",
    ).start()


def _watchdog(clock: LeaseClock, grace: float) -> None:  # pragma: no cover
    """Stop the job when the runner stops renewing the lease (it is SIGSTOPped
    or cut off): SIGTERM to itself, raised as Terminated in the job's thread,
    ``grace`` seconds after ``holds_lease()`` turned False."""
    while clock.holds(grace):
        time.sleep(min(0.2, grace / 2))
    os.kill(os.getpid(), signal.SIGTERM)


def _wait_recorded(connection: Any) -> None:  # pragma: no cover
    """Wait until the runner has written the unit just sent (or keeps it while the database
    is away) before the job goes on to its next one: a kill of the runner then never loses
    a unit the job had finished while a later one runs, so a killed backfill never redoes a
    finished interval. The lease watchdog's SIGTERM still stops the wait; a runner that died
    takes the job with it (PR_SET_PDEATHSIG)."""
    try:
        connection.recv()
    except (EOFError, OSError):
        pass


#: How often a job waiting for an interval another run holds asks for it again (seconds).
CLAIM_POLL_SECONDS = 1.0


def _interval_gate(connection: Any, app_name: str) -> Callable[[dt.datetime], None]:
    """The child's side of an interval claim: ask the runner for the interval, and while
    another run holds it wait, asking again every ``CLAIM_POLL_SECONDS`` (one log line)."""

    def gate(when: dt.datetime) -> None:  # pragma: no cover - the child
        said = False
        while True:
            connection.send(AskUnit(when))
            answer = connection.recv()
            if answer.when is not None:
                return
            held_by = answer.wait
            if not said:
                logger.info(
                    "%s: waiting for %s: held by %s",
                    app_name,
                    utc_text(when),
                    held_by,
                    extra={"job": app_name},
                )
                said = True
            time.sleep(CLAIM_POLL_SECONDS)

    return gate


def _rerun_intervals(connection: Any, app_name: str) -> Iterator[dt.datetime]:
    """The child's side of a rerun: each next interval of its rerun, asked of the runner when
    the last is done (the runner has claimed it for this run); while it must wait (another
    run holds what is left, or the rerun runs as many intervals as it may at once) it asks
    again every ``CLAIM_POLL_SECONDS`` (one log line per reason); it ends when nothing is left."""
    said = None
    while True:  # pragma: no cover - the child
        connection.send(AskUnit(None))
        answer = connection.recv()
        when, wait = answer.when, answer.wait
        if when is not None:
            said = None
            yield when
            continue
        if wait is None:
            return
        if wait != said:
            logger.info("%s: waiting: %s", app_name, wait, extra={"job": app_name})
            said = wait
        time.sleep(CLAIM_POLL_SECONDS)


def _run_job(supervisor: Supervisor, writer: Any) -> None:  # pragma: no cover
    unit_start = time.monotonic()
    try:
        serve(supervisor.context(writer))
        for unit in units_of(supervisor.make_app()):
            seconds = time.monotonic() - unit_start
            writer.send(UnitDone(unit.when, seconds, unit.summary, unit.metrics))
            _wait_recorded(writer)
            unit_start = time.monotonic()
    except BaseException as exc:  # noqa: BLE001 - any error of the job's is recorded
        failure = Failure.of(exc)
        failure.seconds = time.monotonic() - unit_start
        if failure.kind != "terminate":
            # One line; the traceback is in crontabber_log, Sentry and the DEBUG log.
            logger.error(
                "%s failed: %s",
                supervisor.claim.app_name,
                failure.summary,
                extra={"job": supervisor.claim.app_name},
            )
            logger.debug(
                "%s failed",
                supervisor.claim.app_name,
                exc_info=exc,
                extra={"job": supervisor.claim.app_name},
            )
            supervisor.report(exc)
        writer.send(JobFailed(failure))
