"""A job's schedule changes: its next run recomputed once, the change in the audit trail.

The schedule a job's ``next_run`` was computed under is the last ``schedule`` action of the
job in ``crontabber_audit`` (none: crontabber's form in UTC, what every row before cron
expressions and zones was computed under), so no column is added to crontabber 0.18's
table. A tick whose jobs list has a cron expression or a zoned schedule reads those records
once (:func:`record_schedules`); for each job whose schedule differs it takes the job's lock
(an advisory lock: one host at a time), recomputes ``next_run`` by
:func:`crontabber.scheduling.rescheduled_next_run` (only if no run took the job meanwhile)
and records the schedule, in one transaction. SQL: ``sql/crontabber/schedules.sql``. Not
imported by a tick without cron expressions or zones; a tick with them imports the audit's
modules only when it records a change.
"""

from __future__ import annotations

import datetime as dt
import functools

from . import sqlfiles
from .scheduling import rescheduled_next_run, schedule_key
from .state import JobState
from .store import StateStore, first_row, rows_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .config.catalog import Job
    from .records import AuditEntry

Q = sqlfiles.load("schedules.sql")
Time = dt.datetime | None


def record_schedules(store: StateStore, jobs: list[Job]) -> list[AuditEntry]:
    """Recompute the next run of each job whose schedule changed since it was recorded, and
    record its schedule; return what was recorded (an audit entry each).

    Raises:
        NotPermitted: the database user may not write the audit trail.
        DatabaseUnavailable: as any query of the state store.
    """
    recorded = store.in_transaction(_recorded, "record_schedules")
    done = []
    for job in jobs:
        if recorded.get(job.app_name) != schedule_key(job.schedule):
            entry = store.in_transaction(functools.partial(_record, job=job), "record_schedules")
            if entry is not None:
                done.append(entry)
    return done


def _recorded(cur: Any) -> dict[str, str | None]:
    cur.execute(Q["recorded_schedules"])
    return {row["app_name"]: row["schedule"] for row in rows_of(cur)}


def _record(cur: Any, job: Job) -> AuditEntry | None:
    """Under the job's lock: recompute its next run and record its schedule, unless another
    host just did, or a run holds the job (the next tick tries again)."""
    key = schedule_key(job.schedule)
    cur.execute(Q["schedule_lock"], {"app_name": job.app_name})
    cur.execute(Q["recorded_schedule"], {"app_name": job.app_name})
    row = first_row(cur)
    previous = row["schedule"] if row else None
    if previous == key:
        return None
    cur.execute(Q["schedule_state"], {"app_name": job.app_name})
    row = first_row(cur)
    state = JobState.from_row(row) if row else None
    if state is not None and state.ongoing is not None:
        return None
    was = state.next_run if state else None
    now = rescheduled_next_run(state, job.schedule) if state else None
    if now is not None and now != was:
        cur.execute(Q["reschedule"], {"app_name": job.app_name, "next_run": now, "was": was})
        if first_row(cur) is None:
            return None
    from .audit_store import write_audit  # only when a change is recorded: dataclasses, ~10 ms
    from .records import AuditEntry, actor

    ran = state is not None and state.last_run is not None
    reason = _reason(previous, key, was, now) if ran else f"schedule {_text(key)}: not run yet"
    entry = AuditEntry(actor(), "schedule", job.app_name, reason, _detail(key, previous, was, now))
    write_audit(cur, entry)
    return entry


def _reason(previous: str | None, key: str | None, was: Time, now: Time) -> str:
    change = f"schedule {_text(previous)} -> {_text(key)}"
    if now is None or now == was:
        return f"{change}: next run unchanged"
    return f"{change}: next run recomputed"


def _utc(when: dt.datetime | None) -> str | None:
    return when.astimezone(dt.timezone.utc).isoformat() if when is not None else None


def _text(key: str | None) -> str:
    return key if key is not None else "crontabber's form in UTC"


def _detail(key: str | None, previous: str | None, was: Time, now: Time) -> dict[str, Any]:
    detail: dict[str, Any] = {"schedule": key, "previous": previous, "outcome": "done"}
    if now is not None and now != was:
        detail.update(next_run_before=_utc(was), next_run=_utc(now))
    kept = {name: value for name, value in detail.items() if value is not None}
    return {"previous": previous, **kept}
