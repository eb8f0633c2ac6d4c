"""The operator commands of the command line: ``--explain``, ``--pause``,
``--resume``, ``--rerun``, ``--mark-success``, ``--reset-job``, ``--release``
and ``--audit``. Each parses what :mod:`crontabber.cli` gave it, calls the
runner or the store, prints, and returns an exit code. Every action that
changes state is recorded in ``crontabber_audit`` with who, when, what, why.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import socket
from typing import TYPE_CHECKING, Any, Callable, TextIO

from . import jsonout
from .catalog import Job, find_job
from .cli import runner_for
from .errors import ConfigurationError, JobNotFound, JobPaused
from .records import AuditEntry
from .scheduling import next_run_after, parse_day, parse_until, pause_active, rerun_dates
from .state import JobState

if TYPE_CHECKING:
    from .config import Settings
    from .store import StateStore

DEFAULT_PAUSE = dt.timedelta(hours=24)


def actor() -> str:
    """Who is acting: ``user@host`` (the user behind sudo when there is one)."""
    user = os.environ.get("SUDO_USER") or getpass.getuser()
    return f"{user}@{socket.gethostname()}"


#: The options that override a refusal, recorded with each action that was given one.
OVERRIDES = ("force", "replace", "yes")


def audit_entry(action: str, app_name: str, args: Any, **detail: Any) -> AuditEntry:
    """An audit entry for ``action``: who, the reason, the overrides given, the outcome
    (``done`` unless ``detail`` says otherwise) and ``detail``."""
    overrides = [f"--{name}" for name in OVERRIDES if getattr(args, name, False)]
    detail = {"outcome": "done", **({"overrides": overrides} if overrides else {}), **detail}
    return AuditEntry(actor(), action, app_name, getattr(args, "reason", None) or None, detail)


def configured(jobs: list[Job], name: str) -> Job:
    """The configured job ``name`` means.

    Raises:
        JobNotFound: none does.
    """
    job = find_job(jobs, name)
    if job is None:
        raise JobNotFound(name, [j.app_name for j in jobs])
    return job


def state_name(jobs: list[Job], store: "StateStore", name: str) -> str:
    """The app name an operator command means: a configured job's, or a ghost's.

    Raises:
        JobNotFound: neither.
    """
    job = find_job(jobs, name)
    if job is not None:
        return job.app_name
    if name not in store.states():
        raise JobNotFound(name, [j.app_name for j in jobs])
    return name


def explain(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
            out: TextIO) -> int:
    from .explain import explain_job

    job = configured(jobs, args.explain)
    runner = runner_for(settings, jobs, store)
    states, now = store.states(), store.now()
    result = explain_job(job, states, now, runner.marker(states.get(job.app_name), now), runner.rules)
    blocks = blocked_dependents(job, jobs, states, now)
    if args.json:
        jsonout.emit({**result.facts, "blocks": blocks, "database": settings.database.target}, out)
    else:
        print(f"{job.app_name}: {result.verdict}", file=out)
        for line in result.lines:
            print(f"  {line}", file=out)
        for name, why in blocks.items():
            print(f"  blocks {name}: it would be skipped ({why})", file=out)
        print(f"  database: {settings.database.target}", file=out)
    return 0


def blocked_dependents(job: Job, jobs: list[Job], states: Any, now: dt.datetime) -> dict[str, str]:
    """The jobs depending on ``job`` that its state keeps from running now, and why
    (dependencies seen from the parent's side)."""
    from .scheduling import dependency_block

    blocked = {}
    for child in jobs:
        if job.app_name in child.depends_on:
            why = dependency_block([job.app_name], states, now)
            if why is not None:
                blocked[child.app_name] = why
    return blocked


def pause(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
          out: TextIO) -> int:
    job = configured(jobs, args.pause)  # its --reason: checked by cli.require_reason
    now = store.now()
    try:
        until = parse_until(args.until, now) if args.until else now + DEFAULT_PAUSE
    except ValueError as exc:
        raise ConfigurationError("--until", str(exc)) from None
    if not store.pause(job.app_name, job.depends_on, until,
                       audit_entry("pause", job.app_name, args, until=until), args.replace):
        _refuse_paused(store, job.app_name, "pause it again",
                       f"--pause {job.app_name} --replace replaces that pause")
    print(f"{job.app_name}: paused until {until:%Y-%m-%d %H:%M} UTC"
          f"{' (24 h: --until to choose)' if not args.until else ''}; cron ticks skip it, "
          f"--job runs it only with --force; --resume {job.app_name} ends the pause", file=out)
    return 0


def _refuse_paused(store: "StateStore", app_name: str, action: str, override: str) -> None:
    """Raise :class:`JobPaused` naming the job's pause, if one is in force.

    Raises:
        JobPaused: the job is paused.
    """
    state = store.state(app_name)
    if state is not None and pause_active(state, store.now()):
        raise JobPaused(app_name, action, state.paused_until, state.paused_by,
                        state.paused_reason, override)


def resume(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
           out: TextIO) -> int:
    job = configured(jobs, args.resume)
    state = store.state(job.app_name)
    if state is None or state.paused_until is None or state.paused_until <= store.now():
        print(f"{job.app_name}: not paused", file=out)
        return 0
    store.resume(job.app_name, audit_entry("resume", job.app_name, args))
    print(f"{job.app_name}: resumed (was paused until {state.paused_until:%Y-%m-%d %H:%M} UTC "
          f"by {state.paused_by}: {state.paused_reason})", file=out)
    return 0


def rerun(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
          out: TextIO) -> int:
    from .cli import ExitCode, terminate_on_sigterm
    from .runner import Status

    job = configured(jobs, args.rerun)
    if not job.is_backfill:
        raise ConfigurationError(
            "--rerun", f"{job.app_name} is not a backfill job (it has no days to redo); "
            f"--job {job.app_name} --force runs it once now")
    if not args.date:
        raise ConfigurationError("--rerun", "needs --date YYYY-MM-DD [--to YYYY-MM-DD]")
    try:
        first = parse_day(args.date)
        last = parse_day(args.to) if args.to else first
        state = store.state(job.app_name)
        dates = rerun_dates(job.schedule, state.last_success if state else None, first, last,
                            store.now())
    except ValueError as exc:
        raise ConfigurationError("--date/--to", str(exc)) from None
    if not dates:
        raise ConfigurationError("--date/--to", f"no interval of {job.app_name} starts between "
                                 f"{first} and {last} before now")
    if args.dry_run:
        print(f"{job.app_name}: --rerun would run {len(dates)} interval(s), oldest first "
              "(nothing ran):", file=out)
        plan = _planner(settings, job)
        for date in dates:
            said = plan(date)
            print(f"  {date:%Y-%m-%d %H:%M} UTC{': ' + said if said else ''}", file=out)
        return ExitCode.OK
    if len(dates) > settings.rerun_confirm_over and not args.yes:
        raise ConfigurationError(
            "--rerun", f"{len(dates)} intervals of {job.app_name} ({dates[0]:%Y-%m-%d} to "
            f"{dates[-1]:%Y-%m-%d}) is more than rerun_confirm_over ({settings.rerun_confirm_over})"
            "; check the dates (--dry-run lists them) and add --yes")
    if not args.force:
        _refuse_paused(store, job.app_name, "rerun it",
                       "--force reruns it anyway (the pause stays)")
    store.audit(audit_entry("rerun", job.app_name, args, dates=[d.isoformat() for d in dates],
                            **({"force": True} if args.force else {})))
    with terminate_on_sigterm():
        result = runner_for(settings, jobs, store).rerun(job, dates)
    if result.error is not None:
        raise result.error
    listed = _span(dates)
    done = [f"  {when:%Y-%m-%d %H:%M} UTC: {text or 'done'}" for when, text in result.summaries]
    if result.status is Status.FAILED:
        print(f"{job.app_name}: rerun of {listed} (run {result.run_id}) failed: {result.detail} "
              f"({len(done)} of {len(dates)} intervals done before the failure; see --history "
              f"and --logs {job.app_name} --run {result.run_id})", file=out)
        for line in done:
            print(line, file=out)
        return ExitCode.JOB_FAILED
    print(f"{job.app_name}: reran {listed} (run {result.run_id}); last success and next run "
          "unchanged:", file=out)
    print("\n".join(done), file=out)
    return ExitCode.OK


def _planner(settings: "Settings", job: Job) -> Callable[[dt.datetime], str | None]:
    """The job's own account of what a run for a date would write (``BaseCronApp.plan``),
    from an instance built as the runner builds it; a job that cannot say says nothing."""
    from .catalog import job_config

    try:
        instance = job.cls(job_config(job, settings.sources), None)
        plan = instance.plan
    except Exception:  # noqa: BLE001 - a dry run lists the dates whatever the job can say
        return lambda date: None

    def planned(date: dt.datetime) -> str | None:
        try:
            said = plan(date)
        except Exception:  # noqa: BLE001
            return None
        return said if isinstance(said, str) else None

    return planned


def _span(dates: list[dt.datetime]) -> str:
    """``2026-11-21 00:00 UTC``, or ``24 intervals, 2026-11-01 00:00 to 2026-11-24 00:00 UTC``."""
    if len(dates) == 1:
        return f"{dates[0]:%Y-%m-%d %H:%M} UTC"
    return f"{len(dates)} intervals, {dates[0]:%Y-%m-%d %H:%M} to {dates[-1]:%Y-%m-%d %H:%M} UTC"


def mark_success(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
                 out: TextIO) -> int:
    job = configured(jobs, args.mark_success)
    runner = runner_for(settings, jobs, store)
    refuse = runner.refuse_live(job.app_name, "mark it successful")
    before: list[JobState] = []

    def decide(state: JobState, now: dt.datetime) -> bool:
        refuse(state, now)
        before.append(state)
        return True

    now = store.now()
    next_run = next_run_after(now, job.schedule, True, 0)
    state = store.locked_change(
        job.app_name, "mark_success", decide,
        audit_entry("mark-success", job.app_name, args, next_run=next_run),
        {"next_run": next_run},
    )
    if state is None:
        print(f"{job.app_name}: never ran: nothing to mark (a first run is due now)", file=out)
        return 0
    old = state.last_success
    print(f"{job.app_name}: marked successful (last success "
          f"{f'{old:%Y-%m-%d %H:%M} UTC' if old else 'never'} -> now; errors cleared; next run "
          f"{next_run:%Y-%m-%d %H:%M} UTC)", file=out)
    return 0


def reset_job(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
              out: TextIO) -> int:
    name = state_name(jobs, store, args.reset_job)
    audit = audit_entry("reset", name, args)
    if runner_for(settings, jobs, store).reset(name, audit) is not None:
        ghost = "" if find_job(jobs, name) else " (it was a ghost: not configured)"
        print(f"{name}: state reset{ghost}", file=out)
    else:
        print(f"{name}: had no state (already reset)", file=out)
    return 0


def release(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
            out: TextIO) -> int:
    name = state_name(jobs, store, args.release)
    released = runner_for(settings, jobs, store).release(name, audit_entry("release", name, args))
    if released:
        print(f"{name}: released the marker of {released}; last run, last success and "
              "backfill progress are kept", file=out)
    else:
        print(f"{name}: not running: nothing to release", file=out)
    return 0


def audit(settings: "Settings", jobs: list[Job], store: "StateStore", args: Any,
          out: TextIO) -> int:
    name = None
    if args.audit_job:
        name = state_name(jobs, store, args.audit_job)
    if args.limit is not None and args.limit < 1:
        raise ConfigurationError("--limit", "must be at least 1")
    entries = store.audit_entries(name, args.limit or 20)
    if args.json:
        jsonout.emit([{"id": e.id, "at": e.at, "actor": e.actor, "action": e.action,
                       "job": e.app_name, "reason": e.reason, "detail": dict(e.detail)}
                      for e in entries], out)
        return 0
    if not entries:
        print("no operator actions recorded" + (f" for {name}" if name else ""), file=out)
    for e in entries:
        detail = ", ".join(f"{k}={v}" for k, v in dict(e.detail).items())
        assert e.at is not None
        print(f"{e.at:%Y-%m-%d %H:%M:%S} UTC  {e.actor}  {e.action} {e.app_name}"
              f"{f'  why: {e.reason}' if e.reason else ''}{f'  ({detail})' if detail else ''}",
              file=out)
    return 0
