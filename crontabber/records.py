"""Typed records of the rows that operator commands read: run history
(``crontabber_log``), the audit trail, the fleet's hosts, and monitoring's
overview. Not imported by an idle cron tick (see :mod:`crontabber.state`)."""

from __future__ import annotations

import datetime as dt
import getpass
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .identity import this_host
from .state import JobState


def actor() -> str:
    """Who is acting, as the audit trail names them: ``user@host`` (the user behind sudo
    when there is one)."""
    user = os.environ.get("SUDO_USER") or getpass.getuser()
    return f"{user}@{this_host()}"


@dataclass(frozen=True)
class AuditEntry:
    """One operator action (table ``crontabber_audit``): who (``user@host``),
    what (``action`` on ``app_name``), why (``reason``), with details."""

    actor: str
    action: str
    app_name: str
    reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    at: dt.datetime | None = None
    id: int | None = None
    #: The database user that wrote the row (``session_user``: migration 0025; None before it).
    db_user: str | None = None
    #: Its hash is not that of its columns: changed after it was written (``--verify-audit``).
    changed: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "AuditEntry":
        return cls(
            actor=row["actor"],
            action=row["action"],
            app_name=row["app_name"],
            reason=row["reason"],
            detail=row["detail"] or {},
            at=row["at"],
            id=row["id"],
            db_user=row.get("db_user"),
            changed=bool(row.get("changed")),
        )


@dataclass(frozen=True)
class AuditCheck:
    """What ``--verify-audit`` found of the audit trail's hash chain (migration 0025): how many
    rows, the newest row's id, and every break, oldest first (``(row id, what is wrong)``;
    none: the chain is whole)."""

    rows: int
    newest_id: int | None
    breaks: tuple[tuple[int | None, str], ...] = ()

    @property
    def whole(self) -> bool:
        return not self.breaks

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> "AuditCheck":
        """From the ``audit_verify`` query: a row per bad row by id (a changed row, rows
        missing before a row; one row may be both), then a cut tail."""
        first = rows[0]
        breaks: list[tuple[int | None, str]] = []
        for row in rows:
            bad, before = row["bad_id"], row["before"]
            if bad is None:
                continue
            if row["unlinked"]:
                missing = f"after row {before} " if before is not None else ""
                breaks.append((bad, f"rows {missing}before row {bad} are missing (deleted)"))
            if row["changed"]:
                breaks.append((bad, f"row {bad} was changed after it was written"))
        if first["tail_cut"]:
            newest = first["newest_id"]
            which = f"rows after row {newest} are" if newest is not None else "every row is"
            breaks.append(
                (
                    newest,
                    f"{which} missing (deleted; the newest written was row {first['head_id']})",
                )
            )
        return cls(first["rows"], first["newest_id"], tuple(breaks))

    def as_json(self) -> dict[str, Any]:
        """``--verify-audit --json``."""
        return {
            "rows": self.rows,
            "newest_id": self.newest_id,
            "whole": self.whole,
            "breaks": [{"row": row, "problem": problem} for row, problem in self.breaks],
        }


@dataclass(frozen=True)
class LogEntry:
    """One row of table ``crontabber_log``: a successful unit (``success`` set:
    the attempt's start, or a backfill interval's date) or a failed attempt
    (``exc_type`` set; a run fenced off logs ``LeaseLost``). ``duration`` is
    the time since the run's previous unit (or its start). ``log_time`` is the
    database clock when the row was written, so a row covers
    ``log_time - duration`` to ``log_time``. ``run_id``, ``host`` and ``pid``
    are None on rows written before migration 0005 (or by crontabber 0.18)."""

    id: int
    app_name: str
    log_time: dt.datetime
    duration: dt.timedelta | None = None
    success: dt.datetime | None = None
    exc_type: str | None = None
    exc_value: str | None = None
    exc_traceback: str | None = None
    run_id: int | None = None
    host: str | None = None
    pid: int | None = None
    summary: str | None = None  # the job's one-line summary of the unit (ours, 0012)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "LogEntry":
        """Build from a database row (a mapping of column name to value)."""
        return cls(
            id=row["id"],
            app_name=row["app_name"],
            log_time=row["log_time"],
            duration=row.get("duration"),
            success=row.get("success"),
            exc_type=row.get("exc_type"),
            exc_value=row.get("exc_value"),
            exc_traceback=row.get("exc_traceback"),
            run_id=row.get("run_id"),
            host=row.get("host"),
            pid=row.get("pid"),
            summary=row.get("summary"),
        )

    @property
    def failed(self) -> bool:
        return self.exc_type is not None

    @property
    def started(self) -> dt.datetime:
        """When the unit (or the failed attempt's last stretch) began."""
        return self.log_time - (self.duration or dt.timedelta(0))

    @property
    def holder(self) -> str | None:
        """``host:pid``, or None when the row does not say."""
        if self.host is None:
            return None
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host


@dataclass(frozen=True)
class HostState:
    """One row of table ``crontabber_host``: a host's last tick (database
    clock), the version it ran, its pid, its clock's skew against the
    database's (host minus database, seconds, measured around one query), and the
    migrations of the database its code lacks (it claims nothing while any)."""

    host: str
    version: str
    last_tick: dt.datetime
    skew_seconds: float
    pid: int | None = None
    schema_behind: tuple[int, ...] = ()
    # migration 0021: its tags (crontabber.host_tags), and an operator's drain in force
    tags: tuple[str, ...] = ()
    drained: bool = False
    drain_until: dt.datetime | None = None  # None while drained: until --undrain
    drained_by: str | None = None
    drain_reason: str | None = None
    serve_seconds: float | None = None  # a server's tick_seconds (migration 0029); None: cron's

    def gone(self, now: dt.datetime, lease_seconds: float) -> bool:
        """A serving host that stopped ticking: silent for longer than its tick and a lease
        (a cron tick's host is judged by ``silence_critical_minutes`` alone)."""
        if not self.serve_seconds:
            return False
        return (now - self.last_tick).total_seconds() > self.serve_seconds + lease_seconds

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "HostState":
        """Build from a database row (a mapping of column name to value)."""
        return cls(
            host=row["host"],
            version=row["version"],
            last_tick=row["last_tick"],
            skew_seconds=float(row["skew_seconds"]),
            pid=row.get("pid"),
            schema_behind=tuple(row.get("schema_behind") or ()),
            tags=tuple(row.get("tags") or ()),
            drained=bool(row.get("drained")),
            drain_until=row.get("drain_until"),
            drained_by=row.get("drained_by"),
            drain_reason=row.get("drain_reason"),
            serve_seconds=row.get("serve_seconds"),
        )


@dataclass(frozen=True)
class Overview:
    """Everything monitoring reads, from one transaction: the database clock,
    every state row (ghosts included), every host that ever ticked, and (when
    asked for) each job's last run duration from ``crontabber_log`` and the metrics of its
    last successful run that returned some (the run ledger's)."""

    now: dt.datetime
    states: Mapping[str, JobState]
    hosts: tuple[HostState, ...]
    durations: Mapping[str, dt.timedelta] = field(default_factory=dict)
    metrics: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # the failing jobs' last error in one plain line (the run ledger's: StateStore.last_errors)
    errors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    """One run in the run ledger (table ``crontabber_run``, migration 0012): written at its
    claim, its heartbeat moved while it holds the job, its end written by the run or by
    whoever found it dead. ``output`` is the captured tail of what the job logged and
    printed (redacted; empty unless asked for), ``output_bytes`` its size, and
    ``output_dropped`` how many bytes before it were not kept. ``options``: the command
    line's option overrides it ran with (``--name=value``, secrets masked; migration 0020).
    ``metrics``: the named numbers the job returned with its summary (migration 0024)."""

    run_id: int
    app_name: str
    kind: str
    host: str
    pid: int
    started: dt.datetime
    status: str
    heartbeat: dt.datetime | None = None
    ended: dt.datetime | None = None
    intervals: int = 0
    first_interval: dt.datetime | None = None
    last_interval: dt.datetime | None = None
    summary: str | None = None
    error: str | None = None
    output_bytes: int = 0
    output_dropped: int = 0
    output: str = ""
    options: tuple[str, ...] = ()
    # The named numbers the job returned with its summary (migration 0024); {}: none.
    metrics: Mapping[str, float] = field(default_factory=dict)
    # The checks it breached (migration 0027): left out of later runs' baseline.
    breach: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRecord":
        """Build from a ``run_records`` or ``run_output`` row."""
        values = {name: row[name] for name in _RUN_COLUMNS if name in row and row[name] is not None}
        if "options" in values:
            values["options"] = tuple(values["options"])
        return cls(**values)

    @property
    def by(self) -> str:
        return f"{self.host}:{self.pid}"

    def as_json(self) -> dict[str, Any]:
        """``--logs --json``: the ledger's row (``output`` empty unless it was read)."""
        return {name: getattr(self, name) for name in _RUN_COLUMNS}


_RUN_COLUMNS = (
    "run_id",
    "app_name",
    "kind",
    "host",
    "pid",
    "started",
    "heartbeat",
    "ended",
    "status",
    "intervals",
    "first_interval",
    "last_interval",
    "summary",
    "error",
    "output_bytes",
    "output_dropped",
    "output",
    "options",
    "metrics",
    "breach",
)
