"""``--explain NAME``: why a job would or would not run at a tick now.

Pure: the job, every state row, "now" (the database clock), what the
job's marker means (:class:`~crontabber.leases.Marker`) and the lease rules
come in; an :class:`Explanation` comes out. The checks are the runner's own,
in the runner's order: paused, held by a live run, due, parents.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping

from .catalog import Job
from .leases import LeaseRules, Marker, describe_marker, lease_expiry
from .scheduling import backfill_dates, dependency_block, is_due, pause_active
from .state import JobState


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
    return f"{when.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC ({_ago(when, now)})"


def explain(
    job: Job,
    states: Mapping[str, JobState],
    now: dt.datetime,
    marker: Marker,
    rules: LeaseRules,
) -> Explanation:
    """What a cron tick at ``now`` would do with ``job``, and why."""
    state = states.get(job.app_name)
    lines = [f"schedule: every {job.schedule}" + (" (backfill: one run per interval)"
                                                  if job.is_backfill else "")]
    facts: dict[str, Any] = {"name": job.app_name, "schedule": str(job.schedule),
                             "is_backfill": job.is_backfill, "now": now}
    verdicts: list[tuple[bool, str]] = []

    paused = pause_active(state, now)
    facts["paused"] = None
    if state is not None and state.paused_until is not None:
        pause = {"until": state.paused_until, "by": state.paused_by, "reason": state.paused_reason,
                 "active": paused}
        facts["paused"] = pause
        if paused:
            lines.append(f"paused until {_at(state.paused_until, now)} by {state.paused_by}: "
                         f"{state.paused_reason}; --resume {job.app_name} ends it")
            verdicts.append((False, "paused"))
        else:
            lines.append(f"a pause ended {_at(state.paused_until, now)}")

    facts["ongoing"] = None
    if state is not None and state.ongoing is not None:
        expires = lease_expiry(state, rules)
        facts["ongoing"] = {"since": state.ongoing, "by": state.ongoing_by, "run_id": state.run_id,
                            "heartbeat": state.heartbeat, "verdict": marker.value,
                            "lease_expires": expires}
        text = describe_marker(state, marker, now)
        if marker is Marker.LIVE:
            lines.append(f"running: {text}; its lease lasts until {_at(expires, now)}"
                         if expires else f"running: {text}")
            verdicts.append((False, f"running on {state.ongoing_by}"))
        else:
            lines.append(f"marker left by a dead run: {text}; a tick takes the job over")

    facts["last_run"] = state.last_run if state else None
    facts["last_success"] = state.last_success if state else None
    facts["next_run"] = state.next_run if state else None
    facts["error_count"] = state.error_count if state else 0
    if state is None or state.last_run is None:
        lines.append("never ran")
    else:
        success = _at(state.last_success, now) if state.last_success else "never"
        lines.append(f"last run {_at(state.last_run, now)}; last success {success}")
    if state is not None and state.error_count:
        error = state.last_error
        value = (str(error.get("value", "")).strip().splitlines() or [""])[0]
        kind = str(error.get("type", "")).split("'")[1] if "'" in str(error.get("type", "")) \
            else str(error.get("type", ""))
        retry = _at(state.next_run, now) if state.next_run else "now"
        lines.append(f"failed {state.error_count} time(s) in a row (last: {kind}: {value}); "
                     f"error backoff: retry at {retry}")

    due = is_due(state, job.schedule, now)
    facts["due"] = due
    if due:
        lines.append("due now" if state is None or state.next_run is None
                     else f"due since {_at(state.next_run, now)}")
    else:
        when = state.next_run if state is not None else None
        lines.append(f"not due until {_at(when, now)}" if when else
                     f"not due until {job.schedule.time} UTC today")
        verdicts.append((False, "not due yet"))

    blocked = dependency_block(job.depends_on, states, now)
    facts["depends_on"] = [{"name": parent, "blocking": dependency_block((parent,), states, now)}
                           for parent in job.depends_on]
    for parent in facts["depends_on"]:
        lines.append(f"parent {parent['name']}: " + (parent["blocking"] or "ok"))
    if blocked:
        verdicts.append((False, f"waiting: {blocked}"))

    if job.is_backfill:
        pending = backfill_dates(state.last_success if state else None, job.schedule, now)
        facts["backfill_pending"] = pending
        if pending:
            lines.append(f"backfill: {len(pending)} interval(s) pending, "
                         f"{pending[0]:%Y-%m-%d %H:%M} to {pending[-1]:%Y-%m-%d %H:%M} UTC")
        else:
            lines.append("backfill: nothing pending (--rerun NAME --date YYYY-MM-DD redoes a day)")

    blocking = [reason for ok, reason in verdicts if not ok]
    if blocking:
        verdict = "a tick now would skip it: " + "; ".join(blocking)
    elif facts["ongoing"] is not None:
        verdict = "a tick now would take it over and run it"
    else:
        verdict = "a tick now would run it"
    facts["would_run"] = not blocking
    facts["verdict"] = verdict
    return Explanation(job.app_name, not blocking, verdict, lines, facts)
