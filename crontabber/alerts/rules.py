"""Alert rules as pure functions: which conditions a job is in, and what a tick must do
about the alerts already open (open, resolve, notify again); a job's rules, read from its
options (:func:`alert_rules`); the jobs past their deadline (:func:`deadline_events`, what
``--nagios``, ``--list-jobs``, the metrics file and the dashboard show). ``now`` is passed in;
nothing here reads the database or sends anything (:mod:`crontabber.alerts.alerter` does).

The conditions, per job (its rules: ``alert_*`` in ``[crontabber]`` or ``[[class-X]]``):

- ``failing``: ``error_count >= after_failures``. Its subject names the streak (the last
  success and the first run before it), so a new streak after a success is a new alert;
- ``silent``: not run for longer than ``silence`` after it was due
  (:func:`crontabber.scheduling.lateness`); its subject is the due time it missed;
- ``late``: the job's next interval has not succeeded by its ``deadline`` (counted from the
  interval's time: "the report of day D exists by 06:00 UTC on D+1" is a daily job at 00:00
  with ``deadline = 30h``... see :func:`crontabber.scheduling.next_interval`); its subject
  is the interval;
- ``takeover`` (opened by the runner when it takes over a dead host's run, see
  :meth:`crontabber.alerts.alerter.Alerter.takeover`) and ``recovered`` (when a failing or silent
  alert ends, if ``on_recovery``) are events, never open; so is ``superseded``: a failing
  alert whose streak ended by a success while a new streak began before the next evaluation
  is not "recovered" (the job is failing): it is superseded by the new streak's alert, and
  its notice goes out before the new alert's (receivers see the events in order); so is ``old-code``
  (a host whose
  code is older than the database's schema claims nothing: its app name is ``crontabber``,
  its subject the host and the migrations it lacks, so each host is told of once per
  release); so is ``broken-entry`` (a jobs entry whose class does not load: the other jobs
  run; its app name is ``crontabber``, its subject the entry and its error, so the fleet is
  told once per entry and error). ``broken-entry``, ``old-code`` and ``breach`` (a run broke
  one of its job's checks: :mod:`crontabber.alerts.checks`) are events whose cause can go away:
  they stay open until it does (:data:`ENDING`: the entry loads again, :func:`entries_fixed`;
  the host ticks on code that knows the schema, :func:`code_upgraded`; a later run of the job
  passes the rule, :func:`breaches_passed`), then end with a ``recovered`` notice, which
  resolves their PagerDuty incident;
- ``no-host``: no live host may run the job (its ``hosts`` tags: no host that ticked recently
  carries one, or every one that does is drained: :func:`crontabber.placement.no_live_host`);
  its subject names the tags it needs and the run it is due for; it stays open until a live
  host may run it.

A paused job is muted: no alert opens, resolves or repeats while the pause lasts; so is a job
inside a maintenance window (``--mute NAME|all``), which does not stop it from running.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..config.catalog import Job, job_options
from ..config.settings import Settings, Sources
from ..errors import ConfigurationError
from ..formats import counted, minute_text, utc_iso, utc_text
from ..schedule import Schedule
from ..scheduling import lateness, next_interval, parse_duration, pause_active
from ..state import JobState

#: The kinds of alert that stay open while their condition lasts.
LASTING = ("failing", "silent", "late", "no-host")
#: The kinds of event that stay open until their cause is gone (not re-alerted meanwhile): a
#: jobs entry that does not load, a run that broke a check.
ENDING = ("broken-entry", "breach", "old-code")


@dataclass(frozen=True)
class AlertRules:
    """One job's alert rules (zero durations and counts switch a rule off)."""

    after_failures: int = 2
    on_recovery: bool = True
    silence: dt.timedelta = dt.timedelta(hours=1)
    realert: dt.timedelta = dt.timedelta(hours=4)
    on_takeover: bool = True
    to: tuple[str, ...] = ()  # target names; empty: every target
    deadline: dt.timedelta = dt.timedelta(0)


@dataclass(frozen=True)
class Watched:
    """A job as the plan sees it: its state, rules and schedule."""

    app_name: str
    state: JobState | None
    rules: AlertRules
    schedule: Schedule | None = None  # None: a ghost (no deadline)
    is_backfill: bool = False
    # what a failing alert says besides the state: who ran the failed run (host:pid), the
    # configured jobs its failure keeps from running, its page on the dashboard
    failed_by: str | None = None
    blocks: tuple[str, ...] = ()
    link: str = ""
    error_line: str | None = None  # the failed run's error in one plain line (the ledger's)
    unplaced: str = ""  # why no live host may run it (crontabber.placement.no_live_host)
    hosts: tuple[str, ...] = ()  # the tags it needs (its ``hosts`` option)


@dataclass(frozen=True)
class Event:
    """Something to tell: opened once across the fleet by its (app_name, kind, subject)."""

    app_name: str
    kind: str
    subject: str
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.app_name, self.kind, self.subject)


@dataclass(frozen=True)
class OpenAlert:
    """An alert whose condition had not ended when it was read."""

    id: int
    app_name: str
    kind: str
    subject: str
    message: str
    next_notice: dt.datetime | None
    detail: Mapping[str, Any] = field(default_factory=dict)
    opened_by: str = ""  # host:pid of the tick that opened it

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.app_name, self.kind, self.subject)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "OpenAlert":
        detail = row.get("detail")
        return cls(
            row["id"],
            row["app_name"],
            row["kind"],
            row["subject"],
            row["message"],
            row["next_notice"],
            detail if isinstance(detail, Mapping) else {},
            str(row.get("opened_by") or ""),
        )


@dataclass
class AlertPlan:
    """What a tick does about alerts: open new ones, resolve ended ones, notify again."""

    open: list[Event] = field(default_factory=list)
    resolve: list[OpenAlert] = field(default_factory=list)
    realert: list[OpenAlert] = field(default_factory=list)
    # (the failing alert whose streak ended, the new streak's event that supersedes it)
    supersede: list[tuple[OpenAlert, Event]] = field(default_factory=list)
    # open alerts whose condition now reads differently (a longer streak): their new text
    refresh: list[tuple[OpenAlert, Event]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.open or self.resolve or self.realert or self.supersede or self.refresh)


#: Why a job has not run (``--explain``'s verdict): asked only of a job found silent or late.
Blocker = Callable[[], str]


def late(watched: Watched, now: dt.datetime, blocker: Blocker = lambda: "") -> Event | None:
    """The ``late`` condition: the next interval not done by its time plus ``deadline``. Its
    message states times, never "ago": it is stored and sent later, and quoted again."""
    state, rules, schedule = watched.state, watched.rules, watched.schedule
    if state is None or schedule is None or not rules.deadline:
        return None
    interval = next_interval(state, schedule, watched.is_backfill)
    if interval is None or now < interval + rules.deadline:
        return None
    due, why = interval + rules.deadline, blocker()
    return Event(
        watched.app_name,
        "late",
        f"interval {utc_iso(interval)}",
        f"{watched.app_name}: the interval of {minute_text(interval)} was not done by its "
        f"deadline, {minute_text(due)}" + (f"; {why}" if why else ""),
        {"interval": interval, "deadline": due, "blocker": why},
    )


def failing(
    app_name: str,
    state: JobState | None,
    rules: AlertRules,
    *,
    failed_by: str | None = None,
    blocks: tuple[str, ...] = (),
    link: str = "",
    error_line: str | None = None,
) -> Event | None:
    """The ``failing`` condition: ``after_failures`` failures in a row. The message names
    the last failed run and who ran it (``failed_by``: ``host:pid``), the jobs it blocks (its
    configured dependents, as ``--explain`` names them), the commands that show it, and its
    dashboard page (``link``, when there is a dashboard); the plan refreshes it while the
    streak grows (:func:`refreshed`), so the count is never stale. Its subject (the streak)
    is the alert's key and PagerDuty's dedup key: it names none of these."""
    if state is None or rules.after_failures <= 0 or state.error_count < rules.after_failures:
        return None
    from ..views import ErrorInfo  # imported once a job fails: views is not a tick's

    error = ErrorInfo.of_state(state.last_error, error_line)
    summary = error.summary[:300] if error else "no error recorded"
    streak = (
        f"after {utc_iso(state.last_success) if state.last_success else 'never'}"
        f" (first run {utc_iso(state.first_run) if state.first_run else '?'})"
    )
    run = _which_run(state.run_id, failed_by)
    message = (
        f"{app_name}: failed {counted(state.error_count, 'time')} in a row; last: {summary}"
        + (f" ({run})" if run else "")
        + (f"; blocks {', '.join(blocks)}" if blocks else "")
        + f"; see --show-error {app_name}, --logs {app_name}"
        + (f"; dashboard: {link}" if link else "")
    )
    detail: dict[str, Any] = {
        "error_count": state.error_count,
        "error": summary,
        "run_id": state.run_id,
        "by": failed_by,
        "blocks": list(blocks),
        "last_success": state.last_success,
    }
    if link:
        detail["link"] = link
    return Event(app_name, "failing", streak, message, detail)


def _which_run(run_id: int | None, failed_by: str | None) -> str:
    """``run 12 on host:pid``: the failed run and who ran it, each part when known ("" for
    neither)."""
    return " ".join(
        part
        for part in (
            f"run {run_id}" if run_id is not None else "",
            f"on {failed_by}" if failed_by else "",
        )
        if part
    )


def failing_of(watched: Watched) -> Event | None:
    """:func:`failing` of a job as the plan sees it."""
    return failing(
        watched.app_name,
        watched.state,
        watched.rules,
        failed_by=watched.failed_by,
        blocks=watched.blocks,
        link=watched.link,
        error_line=watched.error_line,
    )


def silent(
    app_name: str,
    state: JobState | None,
    rules: AlertRules,
    now: dt.datetime,
    blocker: Blocker = lambda: "",
) -> Event | None:
    """The ``silent`` condition: due longer than ``silence`` ago and not run (its message
    states times, never "ago", as :func:`late`'s)."""
    overdue = lateness(state, now)
    if overdue is None or not rules.silence or overdue < rules.silence:
        return None
    since, why = now - overdue, blocker()
    return Event(
        app_name,
        "silent",
        f"due {utc_iso(since)}",
        f"{app_name}: has not run since it was due at {utc_text(since)}"
        + (f"; {why}" if why else ""),
        {"due": since, "late_seconds": int(overdue.total_seconds()), "blocker": why},
    )


def no_host(watched: Watched) -> Event | None:
    """The ``no-host`` condition: no live host of the fleet may run the job."""
    if not watched.unplaced:
        return None
    # one alert per job and due run: the next episode (after a run) opens a new one
    due = watched.state.next_run if watched.state is not None else None
    return Event(
        watched.app_name,
        "no-host",
        f"needs {', '.join(watched.hosts)}; due {utc_iso(due) if due else 'first run'}",
        f"{watched.app_name}: {watched.unplaced}; it runs nowhere until a host with "
        "the tag ticks (crontabber.host_tags) or one is undrained (--undrain HOST)",
        {"hosts": list(watched.hosts), "verdict": watched.unplaced},
    )


def muted(app_name: str, mutes: Mapping[str, dt.datetime], now: dt.datetime) -> bool:
    """Whether a maintenance window (the job's own, or ``*``) is in force at ``now``."""
    return any(until > now for scope, until in mutes.items() if scope in (app_name, "*"))


def plan(
    jobs: Iterable[Watched],
    open_alerts: Iterable[OpenAlert],
    now: dt.datetime,
    blocker: Callable[[str], str] = lambda app_name: "",
    mutes: Mapping[str, dt.datetime] | None = None,
) -> AlertPlan:
    """What to do at ``now``: for each job (its name, state and rules), the conditions it is in
    against the alerts open. ``blocker(app_name)`` says why a late job has not run (from
    ``--explain``); it is called only for a job that is silent. ``mutes``: the maintenance
    windows in force, ``{scope: until}`` (an app name or ``*``)."""
    result = AlertPlan()
    by_job: dict[str, list[OpenAlert]] = {}
    for alert in open_alerts:
        by_job.setdefault(alert.app_name, []).append(alert)
    for watched in jobs:
        app_name, state, rules = watched.app_name, watched.state, watched.rules
        if pause_active(state, now) or muted(app_name, mutes or {}, now):
            by_job.pop(app_name, None)
            continue  # muted: nothing opens, ends or repeats while paused or in a window
        why = functools.partial(blocker, app_name)
        found = [
            e
            for e in (
                failing_of(watched),
                silent(app_name, state, rules, now, why),
                late(watched, now, why),
                no_host(watched),
            )
            if e is not None
        ]
        _plan_job(result, found, by_job.pop(app_name, []), now, bool(rules.realert))
    return result


def _plan_job(
    result: AlertPlan,
    found: list[Event],
    open_alerts: list[OpenAlert],
    now: dt.datetime,
    realert: bool,
) -> None:
    """Add to ``result`` what to do about one job: the conditions it is in now (``found``)
    against its ``open_alerts``. A condition with no open alert opens one, except a new
    failing streak, which supersedes the failing alert that ended; one with an open alert
    refreshes its text when that changed and, with ``realert``, notifies again when its next
    notice is due; an open alert whose condition is gone is resolved."""
    current = {e.key for e in found}
    opened = {a.key: a for a in open_alerts}
    ended = [a for key, a in opened.items() if key not in current]
    for event in found:
        existing = opened.get(event.key)
        old = next((a for a in ended if a.kind == event.kind == "failing"), None)
        if existing is None and old is not None:
            ended.remove(old)
            result.supersede.append((old, superseding(event, old)))
        elif existing is None:
            result.open.append(event)
        else:
            fresh = refreshed(existing, event)
            if fresh is not None:
                result.refresh.append((existing, fresh))
            if realert and existing.next_notice is not None and existing.next_notice <= now:
                result.realert.append(existing)
    result.resolve += ended


def held_back(
    jobs: Iterable[Watched], now: dt.datetime, mutes: Mapping[str, dt.datetime]
) -> list[Event]:
    """What the maintenance windows ``mutes`` (``{scope: until}``) keep quiet at ``now``: the
    failing, silent and late conditions of each job inside a window (and not paused), which
    :func:`plan` would act on without it (``--alerts`` and the dashboard show them)."""
    found: list[Event] = []
    for watched in jobs:
        if pause_active(watched.state, now) or not muted(watched.app_name, mutes, now):
            continue
        found += [
            e
            for e in (
                failing_of(watched),
                silent(watched.app_name, watched.state, watched.rules, now),
                late(watched, now),
                no_host(watched),
            )
            if e is not None
        ]
    return found


def refreshed(alert: OpenAlert, event: Event) -> Event | None:
    """``event`` (the condition as it is now) as the new text of open ``alert``, or None
    when the stored text still says it: what a re-alert sends, ``--alerts`` shows and a
    recovery quotes is the current count, not the one of the alert's first notice. A
    superseding alert keeps saying which alert it superseded."""
    if alert.message.startswith(event.message):
        return None
    tail = alert.message.rfind(" (supersedes alert ")
    return Event(
        event.app_name,
        event.kind,
        event.subject,
        event.message + (alert.message[tail:] if tail >= 0 else ""),
        event.detail,
    )


def superseding(event: Event, old: OpenAlert) -> Event:
    """The new streak's ``failing`` event, saying which alert it supersedes."""
    return Event(
        event.app_name,
        event.kind,
        event.subject,
        f"{event.message} (supersedes alert {old.id})",
        {**event.detail, "supersedes": old.id},
    )


def superseded(alert: OpenAlert, new_id: int | None, state: JobState | None) -> Event:
    """The ``superseded`` event of failing ``alert``: its streak ended (a success, or a
    ``--mark-success``), and a new streak (alert ``new_id``; None: opened by another host)
    began before the next evaluation. It resolves the old alert's incident (PagerDuty) and
    never says "recovered": the job is failing."""
    by = f"alert {new_id}" if new_id is not None else "a newer alert"
    if state is not None and state.success_marked:
        ended = f"was {state.mark_text()} at {utc_text(state.last_success)}"
    elif state is not None and state.last_success is not None:
        ended = f"succeeded at {utc_text(state.last_success)}"
    else:
        ended = "ended its streak"
    count = f" ({counted(state.error_count, 'time')} in a row now)" if state is not None else ""
    return Event(
        alert.app_name,
        "superseded",
        str(alert.id),
        f"{alert.app_name}: alert {alert.id} superseded by {by}: it {ended}, then failed "
        f"again{count}",
        {
            "resolves": {"id": alert.id, "kind": alert.kind, "subject": alert.subject},
            "superseded_by": new_id,
        },
    )


def entries_fixed(
    open_alerts: Iterable[OpenAlert], broken: Iterable[Event], host: str
) -> list[OpenAlert]:
    """The open ``broken-entry`` alerts whose cause is gone where it was seen: opened by a
    tick of ``host`` (this tick's), their entry is not among the ``broken`` ones of this tick,
    which loaded the whole jobs list (it loads now, or is no longer listed). Another host's
    tick does not end them: during a rolling deploy its code or list may differ."""
    still = {event.subject for event in broken}
    return [
        a
        for a in open_alerts
        if a.kind == "broken-entry"
        and a.subject not in still
        and a.opened_by.rpartition(":")[0] == host
    ]


def code_upgraded(open_alerts: Iterable[OpenAlert], host: str) -> list[OpenAlert]:
    """The open ``old-code`` alerts of ``host`` whose cause is gone: a tick of ``host`` got
    past the schema check (its code knows every migration of the database now)."""
    return [a for a in open_alerts if a.kind == "old-code" and a.detail.get("host") == host]


def breaches_passed(
    open_alerts: Iterable[OpenAlert], app_name: str, run_id: int, broke: Iterable[str]
) -> list[OpenAlert]:
    """The open ``breach`` alerts of ``app_name`` whose cause is gone: run ``run_id`` (a later
    run, judged) passed their rule (it broke only the rules ``broke``)."""
    broken = set(broke)
    return [
        a
        for a in open_alerts
        if a.app_name == app_name
        and a.kind == "breach"
        and int(a.detail.get("run_id") or 0) < run_id
        and a.detail.get("rule") not in broken
    ]


def event_recovery(alert: OpenAlert, run_id: int | None = None) -> Event:
    """The ``recovered`` event of an :data:`ENDING` event whose cause is gone: a jobs entry
    that loads (or is no longer listed), a host upgraded, a rule run ``run_id`` passed."""
    if alert.kind == "breach":
        how = f"run {run_id} passed {alert.detail.get('rule') or 'the rule'}"
    elif alert.kind == "old-code":
        how = f"{alert.detail.get('host')} runs code that knows the database's schema now"
    else:
        how = (
            f"jobs entry {alert.detail.get('entry', alert.subject)!r} loads, or is no longer listed"
        )
    return Event(
        alert.app_name,
        "recovered",
        str(alert.id),
        f"{alert.app_name}: recovered ({how}); was: {alert.message}",
        {"resolves": {"id": alert.id, "kind": alert.kind, "subject": alert.subject}},
    )


def recovery(alert: OpenAlert, state: JobState | None, now: dt.datetime) -> Event:
    """The ``recovered`` event of an alert whose condition ended."""
    detail: dict[str, Any] = {
        "resolves": {"id": alert.id, "kind": alert.kind, "subject": alert.subject}
    }
    word = "recovered"
    if state is None:
        how = "its state was reset"
    elif alert.kind == "failing":
        ended = _streak_end(alert, state)
        if ended is None:  # no success since: the rules changed (alert_after_failures raised)
            word, how = (
                f"alert {alert.id} ended",
                f"{counted(state.error_count, 'failure')} in a row is below alert_after_failures "
                "now; no success since",
            )
        else:
            how = ended
    elif alert.kind == "no-host":
        how = "a live host may run it again"
    else:
        how = f"ran at {utc_text(state.last_run)}" if state.last_run else "no longer late"
    if state is not None and state.success_marked:
        detail["marked"] = {
            "by": state.success_marked_by,
            "reason": state.success_marked_reason,
            "at": state.success_marked_at,
        }
    return Event(
        alert.app_name,
        "recovered",
        str(alert.id),
        f"{alert.app_name}: {word} ({how}); was: {alert.message}",
        detail,
    )


def _streak_end(alert: OpenAlert, state: JobState) -> str | None:
    """How a failing alert's streak ended, never contradicting itself: a success (a real
    one, or an operator's mark, said as such), with the failures since if any; None when
    there was no success since the streak began (the job still fails, fewer times than its
    rules now alert on)."""
    if state.success_marked:
        how = f"{state.mark_text()} at {utc_text(state.last_success)}; no run has succeeded since"
    elif state.last_success is not None and not alert.subject.startswith(
        f"after {utc_iso(state.last_success)} "
    ):
        how = f"succeeded at {utc_text(state.last_success)}"
    elif state.error_count:
        return None
    else:
        how = "its errors were cleared"
    if state.error_count:
        how += (
            f"; failed {counted(state.error_count, 'time')} since, fewer than alert_after_failures"
        )
    return how


#: The app name of the alerts about the runner itself rather than a job (``old-code``).
RUNNER = "crontabber"


def old_code(host: str, behind: tuple[int, ...]) -> Event:
    """The ``old-code`` event: ``host``'s code lacks the database's migrations ``behind``."""
    listed = ", ".join(f"{number:04d}" for number in behind)
    return Event(
        RUNNER,
        "old-code",
        f"{host}: {listed}",
        f"{host} runs code older than the database's schema (it lacks migration "
        f"{listed}): it claims no job until it is upgraded",
        {"host": host, "migrations": list(behind)},
    )


def broken_entry(text: str, problem: str) -> Event:
    """The ``broken-entry`` event: the jobs entry ``text`` does not load (``problem``); told
    once across the fleet per entry and error (its subject), as ``old-code`` is."""
    return Event(
        RUNNER,
        "broken-entry",
        f"{text}: {problem}",
        f"jobs entry {text!r} does not load: {problem}; the other jobs run without it "
        "(--list-jobs shows it; --configtest refuses the file)",
        {"entry": text, "error": problem},
    )


def takeover(app_name: str, before: JobState, run_id: int) -> Event:
    """The ``takeover`` event: run ``run_id`` took the job over from a run whose host died
    or whose lease expired (``before`` is the state as the new run found it)."""
    beat = utc_text(before.heartbeat) if before.heartbeat else "never"
    return Event(
        app_name,
        "takeover",
        f"run {before.run_id}",
        f"{app_name}: run {run_id} took over from {before.ongoing_by or 'an unknown runner'}"
        f" (run {before.run_id}, started {utc_text(before.ongoing)}, last heartbeat {beat}):"
        " that run stopped without ending",
        {"abandoned_run": before.run_id, "by": before.ongoing_by, "new_run": run_id},
    )


def alert_rules(job: Job, sources: Sources) -> AlertRules:
    """The job's alert rules (its ``[[class-X]]`` options, else ``[crontabber]``'s).

    Raises:
        ConfigurationError: a value that does not parse, naming the option.
    """
    options = {
        option.name: option
        for path, option in job_options(job.cls).walk(job.namespace)
        if path == job.namespace and (option.name.startswith("alert_") or option.name == "deadline")
    }
    values = {name: sources.value(job.namespace, option) for name, option in options.items()}
    try:
        after = int(values["alert_after_failures"])
        silence, realert = (
            parse_duration(values["alert_silence"]),
            parse_duration(values["alert_realert"]),
        )
        deadline = parse_duration(values["deadline"])
    except ValueError as exc:
        raise ConfigurationError(f"crontabber.class-{job.cls.__name__}.alert_*", str(exc)) from None
    if after < 0:
        raise ConfigurationError(
            f"crontabber.class-{job.cls.__name__}.alert_after_failures", "must not be negative"
        )
    to = tuple(name.strip() for name in str(values["alert_to"] or "").split(",") if name.strip())
    return AlertRules(
        after,
        bool(values["alert_on_recovery"]),
        silence,
        realert,
        bool(values["alert_on_takeover"]),
        to,
        deadline,
    )


def missed_deadlines(
    jobs: list[Job], settings: Settings, states: Mapping[str, JobState], now: dt.datetime
) -> dict[str, str]:
    """The jobs past a deadline at ``now`` (``deadline`` set, next interval not done by it),
    with the line that says so: what ``--nagios``, the metrics file and the dashboard show.
    A job whose rules do not load is left out (``--configtest`` names the option)."""
    return {
        name: event.message for name, event in deadline_events(jobs, settings, states, now).items()
    }


def deadline_events(
    jobs: list[Job], settings: Settings, states: Mapping[str, JobState], now: dt.datetime
) -> dict[str, Event]:
    """The ``late`` event (:func:`crontabber.alerts.rules.late`) of each job past its deadline at
    ``now``, by app name; its ``detail`` has the ``interval`` and its ``deadline``."""
    missed = {}
    for job in jobs:
        try:
            rules = alert_rules(job, settings.sources)
        except ConfigurationError:
            continue
        event = late(
            Watched(job.app_name, states.get(job.app_name), rules, job.schedule, job.is_backfill),
            now,
        )
        if event is not None:
            missed[job.app_name] = event
    return missed
