"""The ``--nagios`` check (failing, overdue, paused, never-run and ghost jobs; silent, skewed
or mixed-version hosts; perfdata) and the ghost audit. Pure functions of jobs, states, hosts and
``now``; the CLI prints.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from .config.catalog import Job
from .formats import absolute, one_line, pause_end, short_span, stamp
from .leases import Marker, describe_marker
from .placement import drain_line, drain_text, drains_of, fleet_of, unplaced
from .records import HostState
from .scheduling import dependency_block, first_due_at, lateness, next_run_after, pause_active
from .state import JobState

if TYPE_CHECKING:
    from .config.settings import MonitorSettings

MarkerOf = Callable[[JobState], Marker]

NAGIOS_OK, NAGIOS_WARNING, NAGIOS_CRITICAL = 0, 1, 2

NAGIOS_STATUS = {NAGIOS_OK: "OK", NAGIOS_WARNING: "WARNING", NAGIOS_CRITICAL: "CRITICAL"}


@dataclass(frozen=True)
class NagiosEntry:
    """One finding of ``--nagios``.

    ``level`` is ``NAGIOS_*`` (OK for what is only listed: a paused job, a job
    waiting for its parents); ``kind`` one of ``broken``, ``failing``, ``marker``,
    ``overdue``, ``waiting``, ``paused``, ``paused-share``, ``no-host``, ``ghost``,
    ``silence``, ``skew``, ``versions``, ``beyond-schedule``; ``subject`` the job or host;
    ``text`` one line without ``|`` (Nagios reads what follows a ``|`` as performance data).
    ``status_text``, when set, is what the status line shows instead: the
    ``name (Class) | type | value`` of a failing job, crontabber's own.
    """

    level: int
    kind: str
    subject: str
    text: str
    status_text: str = ""

    def __post_init__(self) -> None:
        # An error message may hold a "|": it would cut the long output short; and control
        # characters, which would reach the terminal (or the monitor's page) of whoever reads it.
        object.__setattr__(self, "text", one_line(self.text.replace("|", "/")))
        object.__setattr__(self, "status_text", one_line(self.status_text))


@dataclass(frozen=True)
class NagiosResult:
    """The check's exit code, its lines (status line, one line per entry,
    then ``| perfdata``), its entries worst first, and its perfdata."""

    code: int
    lines: list[str]
    entries: tuple[NagiosEntry, ...] = ()
    perfdata: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return NAGIOS_STATUS[self.code]

    def as_json(self) -> dict[str, Any]:
        """The ``--nagios --json`` document (the dashboard reads the same)."""
        return {
            "status": self.status,
            "code": self.code,
            "summary": self.lines[0],
            "entries": [
                {
                    "level": NAGIOS_STATUS[e.level],
                    "kind": e.kind,
                    "subject": e.subject,
                    "text": e.text,
                }
                for e in self.entries
            ],
            "perfdata": dict(self.perfdata),
        }


def nagios_check(
    jobs: Sequence[Job],
    states: Mapping[str, JobState],
    hosts: Sequence[HostState],
    now: dt.datetime,
    marker: MarkerOf,
    limits: "MonitorSettings",
    missed: Mapping[str, str] | None = None,
    broken: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
    lease_seconds: float = 120.0,
) -> NagiosResult:
    """crontabber's nagios check, plus lateness, deadlines and the fleet: every check's
    entries, worst level first (configuration order within a level), the status line of the
    worst level (:func:`_status_line`, as crontabber's) and the perfdata.

    As crontabber: a failing job is CRITICAL, except a backfill job's first failure, a
    WARNING (:func:`_failing_entry`, showing the job's line of ``errors``, the run ledger's
    last error). Ours also reports, each rule stated by the function that checks it:

    - a job's state: a marker no longer live, a pause, lateness (:func:`_job_entries`);
    - a job past its deadline (``missed``: :func:`_late_entries`);
    - a job with no state row whose first time passed (:func:`_never_ran_entries`);
    - a job no live, undrained host may run (:func:`_no_host_entries`);
    - too large a share of the jobs paused (:func:`_paused_share_entries`);
    - a ghost: a state row no configured job has (:func:`_ghost_entries`);
    - a next run later than the schedule allows (:func:`_beyond_schedule_entries`);
    - a jobs entry that does not load (``broken``: :func:`_broken_entries`);
    - the hosts: silence, skew, old code, mixed versions, a serving host gone after
      ``lease_seconds``, a drain (:func:`_host_entries`).
    """
    found = [
        *_broken_entries(broken or {}),
        *_job_entries(jobs, states, now, marker, limits, errors or {}),
        *_late_entries(missed or {}, states, now),
        *_never_ran_entries(jobs, states, hosts, now, limits),
        *_no_host_entries(jobs, states, hosts, now, limits),
        *_ghost_entries(jobs, states),
        *_beyond_schedule_entries(jobs, states, now),
        *_host_entries(hosts, states, now, limits, lease_seconds),
    ]
    found += _paused_share_entries(jobs, found, limits)
    entries = tuple(sorted(found, key=lambda e: -e.level))  # stable: config order within a level
    code, status = _status_line(entries)
    perfdata = _perfdata(jobs, states, entries, hosts, now, marker, limits)
    lines = [status, *(e.text for e in entries), "| " + perfdata_text(perfdata, limits)]
    return NagiosResult(code, lines, entries, perfdata)


def _broken_entries(broken: Mapping[str, str]) -> Iterator[NagiosEntry]:
    """A CRITICAL for each jobs entry that does not load (``broken``: its class path to its
    error, from :func:`crontabber.config.catalog.load_catalog`); the other jobs are checked."""
    for name, problem in broken.items():
        yield NagiosEntry(
            NAGIOS_CRITICAL, "broken", name, f"jobs entry {name} does not load: {problem}"
        )


def _late_entries(
    missed: Mapping[str, str], states: Mapping[str, JobState], now: dt.datetime
) -> Iterator[NagiosEntry]:
    """A WARNING for each job past its deadline, unless paused (``missed``: app name to the
    line saying so, from :func:`crontabber.alerts.rules.missed_deadlines`)."""
    for name, text in missed.items():
        if not pause_active(states.get(name), now):
            yield NagiosEntry(NAGIOS_WARNING, "late", name, text)


def _host_entries(
    hosts: Sequence[HostState],
    states: Mapping[str, JobState],
    now: dt.datetime,
    limits: "MonitorSettings",
    lease_seconds: float,
) -> Iterator[NagiosEntry]:
    """The hosts' entries: the fleet's (:func:`_fleet_entries`), then the serving hosts gone
    (:func:`_gone_servers`), then the drains (:func:`_drain_entries`)."""
    yield from _fleet_entries(hosts, now, limits)
    yield from _gone_servers(hosts, now, lease_seconds)
    yield from _drain_entries(hosts, states)


def _status_line(entries: Sequence[NagiosEntry]) -> tuple[int, str]:
    """The check's code and status line, from ``entries`` sorted worst first: the worst
    level and, as crontabber's, the status texts of the entries of that level; at OK, ``All
    systems nominal`` and the paused jobs and drained hosts (an operator's decisions)."""
    code = entries[0].level if entries else NAGIOS_OK
    if code != NAGIOS_OK:
        return code, f"{NAGIOS_STATUS[code]} - " + "; ".join(
            e.status_text or e.text for e in entries if e.level == code
        )
    paused = [e.subject for e in entries if e.kind == "paused"]
    drained = [e.status_text for e in entries if e.kind == "drained"]
    return code, (
        "OK - All systems nominal"
        + (f"; paused: {', '.join(paused)}" if paused else "")
        + (f"; {', '.join(drained)}" if drained else "")
    )


def _job_entries(
    jobs: Sequence[Job],
    states: Mapping[str, JobState],
    now: dt.datetime,
    marker: MarkerOf,
    limits: "MonitorSettings",
    errors: Mapping[str, str],
) -> Iterator[NagiosEntry]:
    """The entries of each job with a state row, in configuration order: an ``ongoing``
    marker that is no longer live (WARNING: a runner died holding it and no tick has taken
    the job over yet); then a pause (:func:`_paused_entry`: while it lasts, the job's failure
    and lateness do not count), else its failure (:func:`_failing_entry`) and its lateness
    (:func:`_overdue_entry`). ``errors``: app name to the last error's plain line."""
    for job in jobs:
        state = states.get(job.app_name)
        if state is None:
            continue
        name = f"{job.app_name} ({job.cls.__name__})"
        status = marker(state)
        if status.takeable:
            yield NagiosEntry(
                NAGIOS_WARNING,
                "marker",
                job.app_name,
                f"{name}: ongoing marker not live: {describe_marker(state, status, now)}",
            )
        if pause_active(state, now):
            yield _paused_entry(job.app_name, name, state, now, errors.get(job.app_name))
            continue
        if state.error_count:
            yield _failing_entry(job, name, state, errors.get(job.app_name))
        overdue = _overdue_entry(job, name, state, states, now, limits)
        if overdue is not None:
            yield overdue


def _failing_entry(job: Job, name: str, state: JobState, line: str | None) -> NagiosEntry:
    """A failing job's entry (``state.error_count`` > 0): CRITICAL, except a backfill job's
    first failure, a WARNING; its text shows ``line`` (the run ledger's plain error), its
    status text crontabber's ``name | type | value``."""
    kind, value = _error_parts(state)
    level = NAGIOS_WARNING if state.error_count == 1 and job.is_backfill else NAGIOS_CRITICAL
    return NagiosEntry(
        level,
        "failing",
        job.app_name,
        f"{name}: {_error_line(state, line)}",
        status_text=f"{name} | {kind} | {value}",
    )  # crontabber's, parsed


def _overdue_entry(
    job: Job,
    name: str,
    state: JobState,
    states: Mapping[str, JobState],
    now: dt.datetime,
    limits: "MonitorSettings",
) -> NagiosEntry | None:
    """The entry of a job whose next run is late by more than ``overdue_warning_seconds``
    (WARNING) or ``overdue_critical_seconds`` (CRITICAL); lateness after a pause counts from
    the pause's end. A job waiting for a parent that failed, is late itself or never ran is
    listed OK as ``waiting`` (the parent is the news). None when it is not late."""
    late = lateness(state, now)
    if late is None or late.total_seconds() <= limits.overdue_warning_seconds:
        return None
    due_at = state.next_run or state.paused_until  # no next_run: paused before a first run
    due = f"its next run was due {absolute(due_at, now)}"
    block = dependency_block(job.depends_on, states, now)
    if block:
        return NagiosEntry(
            NAGIOS_OK,
            "waiting",
            job.app_name,
            f"{name}: waiting for its parents: {block}; {due}",
        )
    level = (
        NAGIOS_CRITICAL
        if late.total_seconds() > limits.overdue_critical_seconds
        else NAGIOS_WARNING
    )
    return NagiosEntry(
        level, "overdue", job.app_name, f"{name}: overdue: {due}; no tick has run it"
    )


def _never_ran_entries(
    jobs: Sequence[Job],
    states: Mapping[str, JobState],
    hosts: Sequence[HostState],
    now: dt.datetime,
    limits: "MonitorSettings",
) -> Iterator[NagiosEntry]:
    """Jobs with no state row whose time of day passed today, and a host ticked more than
    ``overdue_warning_seconds`` after it: that tick should have run them (a host without
    the job in its jobs list, or a class that does not load). A job without a time of day
    has no moment to count from and is not listed (``--list-jobs`` shows it ``due``)."""
    newest_tick = max((h.last_tick for h in hosts), default=None)
    for job in jobs:
        due_at = first_due_at(job.schedule, now)
        if job.app_name in states or due_at is None or newest_tick is None:
            continue
        if (newest_tick - due_at).total_seconds() <= limits.overdue_warning_seconds:
            continue
        if dependency_block(job.depends_on, states, now):
            continue
        late = (now - due_at).total_seconds()
        level = NAGIOS_CRITICAL if late > limits.overdue_critical_seconds else NAGIOS_WARNING
        yield NagiosEntry(
            level,
            "overdue",
            job.app_name,
            f"{job.app_name} ({job.cls.__name__}): never ran: due since "
            f"{absolute(due_at, now)}; the last tick ({absolute(newest_tick, now)}) "
            "did not run it",
        )


def _error_parts(state: JobState) -> tuple[str, str]:
    """The last error's type as crontabber stored it and the first line of its value: the
    status line's fields, as crontabber's check printed them."""
    value = (str(state.last_error.get("value", "")).strip().splitlines() or [""])[0]
    return str(state.last_error.get("type", "")), value.replace("|", "/")  # "|": perfdata next


def _error_line(state: JobState, line: str | None = None) -> str:
    """The last error in the one short form of every command: the run ledger's plain ``line``
    (``Elasticsearch at http://...: connection refused``), else ``Type: message``."""
    from .views import ErrorInfo  # only for a failing job: the check of a quiet fleet skips it

    error = ErrorInfo.of_state(state.last_error, line)
    return error.summary.replace("|", "/") if error else "no error recorded"


def _paused_entry(
    app_name: str, name: str, state: JobState, now: dt.datetime, line: str | None = None
) -> NagiosEntry:
    """A paused job: OK (an operator's decision, with a reason and an end), but a WARNING for
    a breach pause (``on_breach = pause``: the runner's), which lasts until someone looks;
    a failure shows in its text without raising the status while the pause lasts."""
    assert state.paused_until is not None
    text = (
        f"{name}: paused {pause_end(state.paused_until, lambda until: absolute(until, now))} by "
        f"{state.paused_by or 'unknown'}: {state.paused_reason or 'no reason given'}"
    )
    if state.error_count:
        text += f"; failing: {_error_line(state, line)}"
    if state.paused_scope == "breach":
        text += (
            "; a breach pause runs nothing until someone looks "
            f"(--history {app_name}; --resume {app_name})"
        )
        return NagiosEntry(NAGIOS_WARNING, "paused", app_name, text)
    return NagiosEntry(NAGIOS_OK, "paused", app_name, text)


def _no_host_entries(
    jobs: Sequence[Job],
    states: Mapping[str, JobState],
    hosts: Sequence[HostState],
    now: dt.datetime,
    limits: "MonitorSettings",
) -> Iterator[NagiosEntry]:
    """A WARNING for each placed job no live, undrained host may run (a job paused is listed
    as paused): it runs nowhere, and a job that never ran is never late."""
    fleet = fleet_of(hosts, recent_hosts(hosts, now, limits))
    for name, verdict in unplaced(jobs, fleet, drains_of(hosts)).items():
        if not pause_active(states.get(name), now):
            yield NagiosEntry(
                NAGIOS_WARNING,
                "no-host",
                name,
                f"{name}: {verdict} (--explain {name}; --undrain HOST, or give a host the tag: "
                "crontabber.host_tags)",
            )


def _paused_share_entries(
    jobs: Sequence[Job], found: Sequence[NagiosEntry], limits: "MonitorSettings"
) -> list[NagiosEntry]:
    """A WARNING when ``paused_warning_percent`` of the configured jobs or more are paused
    (by default every one: a forgotten ``--pause all`` runs nothing): a fleet that runs
    nothing is not nominal."""
    paused = [e.subject for e in found if e.kind == "paused"]
    if not jobs or not paused or len(paused) * 100 < limits.paused_warning_percent * len(jobs):
        return []
    share = (
        "every job is paused"
        if len(paused) == len(jobs)
        else f"{len(paused)} of {len(jobs)} jobs are paused"
    )
    return [
        NagiosEntry(
            NAGIOS_WARNING,
            "paused-share",
            "",
            f"{share} (paused_warning_percent {limits.paused_warning_percent:g}): "
            f"{', '.join(paused)}; --resume all ends the pauses --pause all made, --resume NAME "
            "any one (a job's own pause and a breach pause stay until then)",
        )
    ]


def _beyond_schedule_entries(
    jobs: Sequence[Job], states: Mapping[str, JobState], now: dt.datetime
) -> Iterator[NagiosEntry]:
    """A WARNING for each job whose next run is later than its schedule allows: a run that
    succeeded is next due at the schedule's first time after it, so no run's end writes a
    next run later than the first one after ``now``; a later one was written by hand (a
    runner login may end its own runs with any next run: docs/deploy.md#roles), or the
    schedule was made more frequent and no tick rescheduled it yet. A running or failing
    job is left out (its retry delay is the job's own)."""
    for job in jobs:
        state = states.get(job.app_name)
        if state is None or state.next_run is None or state.ongoing is not None:
            continue
        if state.error_count:  # a failure's retry (its delay is the job's): failing is the news
            continue
        latest = next_run_after(max(now, state.last_run or now), job.schedule, True, 0)
        if state.next_run > latest:
            yield NagiosEntry(
                NAGIOS_WARNING,
                "beyond-schedule",
                job.app_name,
                f"{job.app_name} ({job.cls.__name__}): next run {absolute(state.next_run, now)}"
                f" is later than its schedule ({job.schedule}) allows"
                f" (at the latest {absolute(latest, now)})",
            )


def _ghost_entries(jobs: Sequence[Job], states: Mapping[str, JobState]) -> Iterator[NagiosEntry]:
    """A WARNING for each ghost: a state row no configured job has (a job taken out of the
    jobs list instead of paused)."""
    for name in ghosts(jobs, states):
        yield NagiosEntry(
            NAGIOS_WARNING,
            "ghost",
            name,
            f"{name}: has a state row but no configured job (taken out of the jobs "
            f"list? --pause pauses a job; --reset-job {name} forgets it)",
        )


def recent_hosts(
    hosts: Sequence[HostState], now: dt.datetime, limits: "MonitorSettings"
) -> list[HostState]:
    """The hosts that ticked within ``silence_critical_minutes`` (the fleet that counts)."""
    window = dt.timedelta(minutes=limits.silence_critical_minutes)
    return [host for host in hosts if now - host.last_tick <= window]


def _drain_entries(
    hosts: Sequence[HostState], states: Mapping[str, JobState]
) -> Iterator[NagiosEntry]:
    """A drained host (``--drain``): listed, OK (an operator's decision, with a reason), as
    ``draining: N runs left`` while its runs go on, then ``drained``."""
    for host in hosts:
        if host.drained:
            yield NagiosEntry(
                NAGIOS_OK,
                "drained",
                host.host,
                drain_line(host, states),
                status_text=f"{host.host} {drain_text(host.host, states)}",
            )


def _gone_servers(
    hosts: Sequence[HostState], now: dt.datetime, lease_seconds: float
) -> Iterator[NagiosEntry]:
    """A WARNING for each serving host silent for longer than its tick and a lease."""
    for host in hosts:
        if host.gone(now, lease_seconds):
            yield NagiosEntry(
                NAGIOS_WARNING,
                "gone",
                host.host,
                f"host {host.host}: serving (a pass every {host.serve_seconds:g} s), but no tick "
                f"since {absolute(host.last_tick, now)}: its runner is gone (its runs are taken "
                "over once their leases expire)",
            )


def _fleet_entries(
    hosts: Sequence[HostState], now: dt.datetime, limits: "MonitorSettings"
) -> Iterator[NagiosEntry]:
    """The fleet's entries: no tick recorded by any host for ``silence_critical_minutes``
    (CRITICAL); among the hosts that ticked within it, a clock skew over
    ``max_skew_seconds`` (WARNING), then :func:`_code_entries`."""
    if not hosts:
        yield NagiosEntry(
            NAGIOS_CRITICAL,
            "silence",
            "",
            "no host has ever recorded a tick: is cron running crontabber?",
        )
        return
    last = max(hosts, key=lambda host: host.last_tick)
    recent = recent_hosts(hosts, now, limits)
    if not recent:
        yield NagiosEntry(
            NAGIOS_CRITICAL,
            "silence",
            last.host,
            f"no tick from any host for {short_span((now - last.last_tick).total_seconds())} (the "
            "last: "
            f"{last.host} at {stamp(last.last_tick)} UTC): is cron running "
            "crontabber?",
        )
    for host in recent:
        if abs(host.skew_seconds) > limits.max_skew_seconds:
            yield NagiosEntry(
                NAGIOS_WARNING,
                "skew",
                host.host,
                f"host {host.host}: its clock is {host.skew_seconds:+.1f} s off the "
                f"database's (max_skew_seconds {limits.max_skew_seconds:g})",
            )
    yield from _code_entries(recent)


def _code_entries(recent: Sequence[HostState]) -> Iterator[NagiosEntry]:
    """The code the ``recent`` hosts run: a host older than the database's schema (WARNING;
    CRITICAL when every one is: nothing claims a job any more), more than one version among
    them (WARNING)."""
    old = [host for host in recent if host.schema_behind]
    for host in old:  # all of them: nothing claims a job any more
        listed = ", ".join(f"{number:04d}" for number in host.schema_behind)
        yield NagiosEntry(
            NAGIOS_CRITICAL if len(old) == len(recent) else NAGIOS_WARNING,
            "old-code",
            host.host,
            f"host {host.host} runs code older than the database's schema (it lacks "
            f"migration {listed}): it claims no job until it is upgraded",
        )
    versions: dict[str, list[str]] = {}
    for host in recent:
        versions.setdefault(host.version, []).append(host.host)
    if len(versions) > 1:
        listed = "; ".join(
            f"{version} on {', '.join(names)}" for version, names in sorted(versions.items())
        )
        yield NagiosEntry(NAGIOS_WARNING, "versions", "", f"hosts run different versions: {listed}")


def _perfdata(
    jobs: Sequence[Job],
    states: Mapping[str, JobState],
    entries: Sequence[NagiosEntry],
    hosts: Sequence[HostState],
    now: dt.datetime,
    marker: MarkerOf,
    limits: "MonitorSettings",
) -> dict[str, float | None]:
    """The numbers behind the check (None: unknown, ``U`` in the plugin format)."""
    recent = recent_hosts(hosts, now, limits)
    running = sum(
        1
        for job in jobs
        if (state := states.get(job.app_name)) is not None and marker(state) is Marker.LIVE
    )
    last = max((host.last_tick for host in hosts), default=None)
    return {
        "jobs_failing": sum(e.kind == "failing" for e in entries),
        "jobs_overdue": sum(e.kind == "overdue" for e in entries),
        "jobs_running": running,
        "jobs_paused": sum(e.kind == "paused" for e in entries),
        "hosts": len(recent),
        "max_skew_s": max((abs(h.skew_seconds) for h in recent), default=None),
        "seconds_since_last_tick": (now - last).total_seconds() if last is not None else None,
    }


def _plain(value: float) -> str:
    """Fixed point, at most 3 decimals: the plugin format has no exponent
    (``f"{1e6:g}"`` is ``1e+06``)."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def perfdata_text(perfdata: Mapping[str, float | None], limits: "MonitorSettings") -> str:
    """``label=value[UOM];warn;crit;min`` items, as the Nagios plugin guidelines say."""
    seconds = {
        "max_skew_s": f"{limits.max_skew_seconds:g};",
        "seconds_since_last_tick": f";{limits.silence_critical_minutes * 60:g}",
    }
    items = []
    for label, value in perfdata.items():
        shown = "U" if value is None else _plain(value)
        if label in seconds:
            items.append(f"{label}={shown}{'s' if value is not None else ''};{seconds[label]};0")
        else:
            items.append(f"{label}={shown};;;0")
    return " ".join(items)


def ghosts(jobs: Sequence[Job], states: Mapping[str, JobState]) -> list[str]:
    """App names in the state table that no configured job has, sorted."""
    configured = {job.app_name for job in jobs}
    return sorted(name for name in states if name not in configured)
