"""``--explain NAME``: why a job would or would not run at a tick now.

Pure: the job, every state row, "now" (the database clock), what the
job's marker means (:class:`~crontabber.leases.Marker`) and the lease rules
come in; an :class:`Explanation` comes out. The checks are the runner's own,
in the runner's order: paused, held by a live run, due, parents.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .config.catalog import Job
from .formats import counted, minute_text, pause_end, span_text, utc_text
from .leases import LeaseRules, Marker, describe_marker, lease_expiry
from .placement import may_claim, no_live_host
from .scheduling import (
    backfill_dates,
    dependency_block,
    is_due,
    next_interval,
    pause_active,
    upcoming,
)
from .state import FleetHost, JobState


@dataclass(frozen=True)
class Explanation:
    """The decision (``verdict``, ``would_run``), the facts behind it as lines
    for people, and the same facts as a dict for ``--json``."""

    app_name: str
    would_run: bool
    verdict: str
    lines: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


def _ago(then: dt.datetime, now: dt.datetime) -> str:
    seconds = int((now - then).total_seconds())
    sign, seconds = ("in ", -seconds) if seconds < 0 else ("", seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            text = f"{seconds // size}{unit}"
            break
    else:
        text = f"{seconds}s"
    return f"{sign}{text}" if sign else f"{text} ago"


def _at(when: dt.datetime, now: dt.datetime) -> str:
    return f"{utc_text(when)} ({_ago(when, now)})"


class _Notes:
    """What the checks found: lines for people, facts for ``--json``, and the
    reasons a tick would skip the job."""

    def __init__(self, job: Job, now: dt.datetime) -> None:
        self.now = now
        self.lines: list[str] = []
        self.facts: dict[str, Any] = {
            "name": job.app_name,
            "schedule": str(job.schedule),
            "time_zone": job.schedule.zone,
            "is_backfill": job.is_backfill,
            "now": now,
        }
        self.blocking: list[str] = []

    def at(self, when: dt.datetime) -> str:
        return _at(when, self.now)


BACKFILL_NOTE = " (backfill: one run per interval)"


def explain_job(
    job: Job,
    states: Mapping[str, JobState],
    now: dt.datetime,
    marker: Marker,
    rules: LeaseRules,
    deadline: dt.timedelta = dt.timedelta(0),
    fleet: Sequence[FleetHost] | None = None,
    error_line: str | None = None,
    drains: Mapping[str, str] | None = None,
) -> Explanation:
    """What a cron tick at ``now`` would do with ``job``, and why (the runner's
    checks, in its order: placement, paused, held by a live run, due, parents), and where
    its ``deadline`` (zero: none) stands. ``fleet``: the hosts as placement sees them
    (None: not read; placement is not judged); ``error_line``: its last failure in one plain
    line (the run ledger's), if it has one; ``drains``: the drains in force by host
    (:func:`crontabber.placement.drains_of`: the verdict names them)."""
    state = states.get(job.app_name)
    notes = _Notes(job, now)
    kind = "cron" if job.schedule.is_cron else "every"
    backfill = BACKFILL_NOTE if job.is_backfill else ""
    notes.lines.append(f"schedule: {kind} {job.schedule}{backfill}")
    _placement(notes, job, fleet, drains)
    _pause(notes, job, state)
    _lease(notes, state, marker, rules)
    _last_runs(notes, state, error_line)
    _due(notes, job, state)
    _parents(notes, job, states)
    _deadline(notes, job, state, deadline)
    if job.is_backfill:
        _backfill(notes, job, state)
    if notes.blocking:
        verdict = "a tick now would skip it: " + "; ".join(notes.blocking)
    elif notes.facts["ongoing"] is not None:
        verdict = "a tick now would take it over and run it"
    else:
        verdict = "a tick now would run it"
    notes.facts["would_run"] = not notes.blocking
    notes.facts["verdict"] = verdict
    return Explanation(job.app_name, not notes.blocking, verdict, notes.lines, notes.facts)


def _placement(
    notes: _Notes,
    job: Job,
    fleet: Sequence[FleetHost] | None,
    drains: Mapping[str, str] | None = None,
) -> None:
    notes.facts["hosts"] = list(job.hosts)
    if not job.hosts or fleet is None:
        return
    verdict = no_live_host(job.hosts, fleet, drains)
    if verdict is None:
        able = [h.host for h in fleet if h.live and not h.drained and may_claim(job.hosts, h.tags)]
        notes.lines.append(f"placed on hosts tagged {' or '.join(job.hosts)}: {', '.join(able)}")
        return
    notes.facts["no_live_host"] = verdict
    notes.lines.append(f"{verdict} (a host's tags: crontabber.host_tags; --undrain HOST)")
    notes.blocking.append(verdict)


def _pause(notes: _Notes, job: Job, state: JobState | None) -> None:
    notes.facts["paused"] = None
    if state is None or state.paused_until is None:
        return
    active = pause_active(state, notes.now)
    notes.facts["paused"] = {
        "until": state.paused_until,
        "by": state.paused_by,
        "reason": state.paused_reason,
        "active": active,
    }
    if active:
        notes.lines.append(
            f"paused {pause_end(state.paused_until, notes.at)} by {state.paused_by}: "
            f"{state.paused_reason}; --resume {job.app_name} ends it"
        )
        notes.blocking.append("paused")
    else:
        notes.lines.append(f"a pause ended {notes.at(state.paused_until)}")


def _lease(notes: _Notes, state: JobState | None, marker: Marker, rules: LeaseRules) -> None:
    notes.facts["ongoing"] = None
    if state is None or state.ongoing is None:
        return
    expires = lease_expiry(state, rules)
    notes.facts["ongoing"] = {
        "since": state.ongoing,
        "by": state.ongoing_by,
        "run_id": state.run_id,
        "heartbeat": state.heartbeat,
        "verdict": marker.value,
        "lease_expires": expires,
    }
    text = describe_marker(state, marker, notes.now)
    if marker is Marker.LIVE:
        notes.lines.append(
            f"running: {text}; its lease lasts until {notes.at(expires)}"
            if expires
            else f"running: {text}"
        )
        notes.blocking.append(f"running on {state.ongoing_by}")
    else:
        notes.lines.append(f"marker left by a dead run: {text}; a tick takes the job over")


def _last_runs(notes: _Notes, state: JobState | None, error_line: str | None = None) -> None:
    notes.facts["last_run"] = state.last_run if state else None
    notes.facts["last_success"] = state.last_success if state else None
    notes.facts["next_run"] = state.next_run if state else None
    notes.facts["error_count"] = state.error_count if state else 0
    notes.facts["last_error"] = notes.facts["retry_at"] = None  # while it fails: below
    if state is None or state.last_run is None:
        notes.lines.append("never ran")
        return
    success = notes.at(state.last_success) if state.last_success else "never"
    notes.facts["last_success_marked"] = state.mark_text() if state.success_marked else None
    if state.success_marked:  # an operator's declaration, not a run that succeeded
        success += f" ({state.mark_text()}; no run has succeeded since)"
    notes.lines.append(f"last run {notes.at(state.last_run)}; last success {success}")
    if state.error_count:
        from .views import ErrorInfo  # the one spelling of an error (--list-jobs, --history)

        error = ErrorInfo.of_state(state.last_error, error_line)
        notes.facts["last_error"] = error.as_json() if error else None
        notes.facts["retry_at"] = state.next_run
        retry = notes.at(state.next_run) if state.next_run else "now"
        notes.lines.append(
            f"failed {counted(state.error_count, 'time')} in a row (last: "
            f"{error.summary if error else 'no error recorded'}); "
            f"error backoff: retry at {retry}"
        )


def _due(notes: _Notes, job: Job, state: JobState | None) -> None:
    due = is_due(state, job.schedule, notes.now)
    notes.facts["due"] = due
    schedule = job.schedule
    notes.facts["settle_lag_seconds"] = schedule.lag.total_seconds()
    notes.facts["jitter_seconds"] = schedule.jitter.total_seconds()
    if schedule.delay:
        parts = (
            [f"jitter {span_text(schedule.jitter)} (fixed, from its name)"]
            if schedule.jitter
            else []
        ) + ([f"settle lag {span_text(schedule.lag)}"] if schedule.lag else [])
        notes.lines.append(
            f"starts {span_text(schedule.delay)} after its time: "
            + ", ".join(parts)
            + (
                f"; interval T runs after T + {span_text(schedule.delay)}"
                if job.is_backfill
                else ""
            )
        )
    if due and notes.facts["ongoing"] is not None and notes.facts["ongoing"]["verdict"] == "live":
        # a running job's next_run is the one its run started for: it is not waiting
        notes.lines.append(
            "the run going now is its first run"
            if state is None or state.next_run is None
            else f"the run going now is the one due at {notes.at(state.next_run)}"
        )
        return
    if due:
        notes.lines.append(
            "due now"
            if state is None or state.next_run is None
            else f"due since {notes.at(state.next_run)}"
        )
        return
    when = state.next_run if state is not None else None
    if when is None and job.schedule.is_cron:  # never ran: its first fire time of a day
        when = upcoming(job.schedule, notes.now, 1)[0]
    notes.lines.append(
        f"not due until {notes.at(when)}"
        if when
        else f"not due until {job.schedule.time} {job.schedule.zone} today"
        + (f" + {span_text(job.schedule.delay)}" if job.schedule.delay else "")
    )

    notes.blocking.append("not due yet")


def _parents(notes: _Notes, job: Job, states: Mapping[str, JobState]) -> None:
    parents = [
        {"name": parent, "blocking": dependency_block((parent,), states, notes.now)}
        for parent in job.depends_on
    ]
    notes.facts["depends_on"] = parents
    for parent in parents:
        notes.lines.append(f"parent {parent['name']}: " + (parent["blocking"] or "ok"))
    blocked = dependency_block(job.depends_on, states, notes.now)
    if blocked:
        notes.blocking.append(f"waiting: {blocked}")


def _deadline(notes: _Notes, job: Job, state: JobState | None, deadline: dt.timedelta) -> None:
    """The deadline of the job's next interval (:func:`crontabber.scheduling.next_interval`):
    met so far, or missed since when (what the ``late`` alert says)."""
    notes.facts["deadline"] = None
    if not deadline:
        return
    interval = next_interval(state, job.schedule, job.is_backfill) if state is not None else None
    if interval is None:
        notes.facts["deadline"] = {
            "seconds": deadline.total_seconds(),
            "interval": None,
            "due": None,
            "missed": False,
        }
        notes.lines.append(f"deadline {span_text(deadline)}: counted from its first success")
        return
    due = interval + deadline
    missed = notes.now >= due
    notes.facts["deadline"] = {
        "seconds": deadline.total_seconds(),
        "interval": interval,
        "due": due,
        "missed": missed,
    }
    if missed:
        notes.lines.append(
            f"deadline {span_text(deadline)}: MISSED: the interval of "
            f"{minute_text(interval)} was not done by {notes.at(due)}"
        )
    else:
        notes.lines.append(
            f"deadline {span_text(deadline)}: the interval of {minute_text(interval)} is to be "
            f"done by {notes.at(due)}"
        )


def _backfill(notes: _Notes, job: Job, state: JobState | None) -> None:
    pending = backfill_dates(state.last_success if state else None, job.schedule, notes.now)
    notes.facts["backfill_pending"] = pending
    if pending:
        notes.lines.append(
            f"backfill: {len(pending)} interval(s) pending, {minute_text(pending[0])} to "
            f"{minute_text(pending[-1])}"
        )
    else:
        notes.lines.append(
            "backfill: nothing pending (--rerun NAME --date YYYY-MM-DD redoes a day)"
        )
