"""Typed records of the runner's state rows: what every cron tick reads and writes.

The rows that only operator commands read (history, audit, fleet, overview)
are in :mod:`crontabber.records`, so an idle tick does not build their classes
(each class costs import time). The records are :class:`crontabber.frozen.Frozen`: no
dataclass on a tick's path."""

from __future__ import annotations

import datetime as dt
import enum

from .frozen import Frozen, setfield

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping


class JobState(Frozen):
    """One row of table ``crontabber``: crontabber's columns plus ours,
    ``ongoing_by`` (``host:pid``), ``run_id`` (the holding run's fencing token)
    and ``heartbeat`` (its last lease renewal)."""

    app_name: str
    next_run: dt.datetime | None
    first_run: dt.datetime | None
    last_run: dt.datetime | None
    last_success: dt.datetime | None
    ongoing: dt.datetime | None
    ongoing_by: str | None
    error_count: int
    depends_on: tuple[str, ...]
    last_error: Mapping[str, Any]
    run_id: int | None
    heartbeat: dt.datetime | None
    paused_until: dt.datetime | None
    paused_reason: str | None
    paused_by: str | None
    # migration 0027: "all" (--pause all made it), "breach" (on_breach = pause), None (--pause NAME)
    paused_scope: str | None
    success_marked_at: dt.datetime | None
    success_marked_by: str | None
    success_marked_reason: str | None

    def __init__(
        self,
        app_name: str,
        next_run: dt.datetime | None = None,
        first_run: dt.datetime | None = None,
        last_run: dt.datetime | None = None,
        last_success: dt.datetime | None = None,
        ongoing: dt.datetime | None = None,
        ongoing_by: str | None = None,
        error_count: int = 0,
        depends_on: tuple[str, ...] = (),
        last_error: Mapping[str, Any] | None = None,
        run_id: int | None = None,
        heartbeat: dt.datetime | None = None,
        paused_until: dt.datetime | None = None,
        paused_reason: str | None = None,
        paused_by: str | None = None,
        paused_scope: str | None = None,
        success_marked_at: dt.datetime | None = None,
        success_marked_by: str | None = None,
        success_marked_reason: str | None = None,
    ) -> None:
        setfield(self, "app_name", app_name)
        setfield(self, "next_run", next_run)
        setfield(self, "first_run", first_run)
        setfield(self, "last_run", last_run)
        setfield(self, "last_success", last_success)
        setfield(self, "ongoing", ongoing)
        setfield(self, "ongoing_by", ongoing_by)
        setfield(self, "error_count", error_count)
        setfield(self, "depends_on", depends_on)
        setfield(self, "last_error", {} if last_error is None else last_error)
        setfield(self, "run_id", run_id)
        setfield(self, "heartbeat", heartbeat)
        setfield(self, "paused_until", paused_until)
        setfield(self, "paused_reason", paused_reason)
        setfield(self, "paused_by", paused_by)
        setfield(self, "paused_scope", paused_scope)
        setfield(self, "success_marked_at", success_marked_at)
        setfield(self, "success_marked_by", success_marked_by)
        setfield(self, "success_marked_reason", success_marked_reason)

    @property
    def success_marked(self) -> bool:
        """Whether the last success is an operator's ``--mark-success`` rather than a run
        (no run has succeeded since the mark)."""
        return self.success_marked_at is not None and self.last_success == self.success_marked_at

    def mark_text(self) -> str:
        """``marked successful by WHO: WHY`` (the mark of :attr:`success_marked`)."""
        return (
            f"marked successful by {self.success_marked_by or 'an operator'}: "
            f"{self.success_marked_reason or 'no reason given'}"
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "JobState":
        """Build from a database row (a mapping of column name to value)."""
        return cls(
            app_name=row["app_name"],
            next_run=row["next_run"],
            first_run=row["first_run"],
            last_run=row["last_run"],
            last_success=row["last_success"],
            ongoing=row["ongoing"],
            ongoing_by=row.get("ongoing_by"),
            error_count=row["error_count"] or 0,
            depends_on=tuple(row["depends_on"] or ()),
            last_error=row["last_error"] or {},
            run_id=row.get("run_id"),
            heartbeat=row.get("heartbeat"),
            paused_until=row.get("paused_until"),
            paused_reason=row.get("paused_reason"),
            paused_by=row.get("paused_by"),
            paused_scope=row.get("paused_scope"),
            success_marked_at=row.get("success_marked_at"),
            success_marked_by=row.get("success_marked_by"),
            success_marked_reason=row.get("success_marked_reason"),
        )

    def job_information(self) -> dict[str, Any]:
        """The dict crontabber hands to a job's constructor as ``job_information``."""
        return {
            "next_run": self.next_run,
            "first_run": self.first_run,
            "last_run": self.last_run,
            "last_success": self.last_success,
            "depends_on": list(self.depends_on),
            "error_count": self.error_count,
            "last_error": dict(self.last_error),
            "ongoing": self.ongoing,
        }


class RunKind(enum.Enum):
    """Why a run ran, which decides what its end writes to the job's state row.

    The rule, in one place (the ``finish`` query applies it):

    - ``SCHEDULED`` (a tick, ``--job`` of a due job) and ``FORCED`` (``--job --force``): the
      run is the job's current health. A success clears ``error_count`` and ``last_error`` and
      sets ``next_run`` by the schedule; a failure counts one more error, keeps it as
      ``last_error`` and sets ``next_run`` by the retry backoff.
    - ``RERUN`` (``--rerun`` of past intervals): out of band. It never changes
      ``error_count``, ``last_error`` or ``next_run``: a successful rerun of an old day does not
      clear today's failure (and its CRITICAL), a failed one does not make the job CRITICAL or
      delay its schedule. Its outcome is in the log (``--history``) and its exit code (5 when
      it failed); ``last_success`` only moves forward.
    """

    SCHEDULED = "scheduled"
    FORCED = "forced"
    RERUN = "rerun"

    @property
    def keeps_health(self) -> bool:
        """Whether the run leaves ``error_count``, ``last_error`` and ``next_run`` alone."""
        return self is RunKind.RERUN


class FinishRecord(Frozen):
    """How one attempt at a job ended, as written back to its state row (under the rule of
    its :class:`RunKind`)."""

    started: dt.datetime
    succeeded: bool
    error: Mapping[str, Any]
    next_run: dt.datetime | None
    kind: RunKind = RunKind.SCHEDULED
    stopped: bool = False  # stopped by SIGTERM (a deploy): not the job's health

    @property
    def keeps_health(self) -> bool:
        """Whether the end leaves ``error_count``, ``last_error`` and ``next_run`` alone: a
        rerun's (:class:`RunKind`), and a run stopped by SIGTERM (a deploy, ``systemctl stop``):
        it neither failed nor succeeded, and the job stays due, so the next
        tick runs it again."""
        return self.kind.keeps_health or self.stopped


class RunStatus(enum.Enum):
    """How a run stands in the run ledger (``crontabber_run.status``)."""

    RUNNING = "running"  # claimed; its heartbeat moves while it holds the job
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the job raised (or its process exited without reporting)
    TIMED_OUT = "timed out"  # the runner stopped it past its timeout
    STOPPED = "stopped by signal"  # SIGTERM/SIGINT to the runner, or a signal killed the job
    FENCED_OFF = "fenced off"  # it lost its lease: its end changed nothing in the state
    ABANDONED = "abandoned"  # its holder died: written by whoever found the job held


# A successful unit: its time (the interval of a backfill job), its duration, the job's
# one-line summary of what it did (None when the job returned none) and the named numbers it
# returned with it (crontabber.base.Summary; None: none).
Unit = tuple[dt.datetime, dt.timedelta, "str | None", "Mapping[str, float] | None"]


class RunEnd(Frozen):
    """What a run's end writes to its ledger row: its status, the error in one line, and
    the captured output (its tail, redacted) with the number of bytes dropped ahead of it.
    (The job's summary is its last unit's, written with the unit.)"""

    status: RunStatus
    error: str | None = None
    output: str = ""
    dropped: int = 0


class Claim(Frozen):
    """A run's hold on its job, as the claim wrote it: the fencing token
    (``run_id``), who holds it, and the database time it began."""

    app_name: str
    run_id: int
    host: str
    pid: int
    started: dt.datetime

    @property
    def holder(self) -> str:
        return f"{self.host}:{self.pid}"


class Tick(Frozen):
    """What a tick records about itself in ``crontabber_host``: also the migrations the
    database has that its code lacks (``schema_behind``: it claims nothing)."""

    host: str
    version: str
    pid: int
    schema_behind: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()  # crontabber.host_tags: the jobs placed on them it may claim
    live_seconds: float = 900.0  # a host that ticked this recently is in the fleet
    lease_seconds: float = 0.0  # a rerun run without a heartbeat this long is abandoned (0: none)
    serve_seconds: float = 0.0  # a server's tick_seconds (0: a cron tick)


class FleetHost(Frozen):
    """A host as placement sees it (read with the tick's state rows, in the same statement):
    its tags, whether it ticked recently (``live``), and whether an operator drained it."""

    host: str
    tags: tuple[str, ...]
    live: bool
    drained: bool
