"""The operator commands: ``--explain``, ``--pause``, ``--resume``, ``--rerun``,
``--mark-success``, ``--reset-job``, ``--release``, ``--mute``, ``--unmute``, ``--audit`` and
``--audit-ghosts``. Each
takes the :class:`~crontabber.cli.common.Context`, calls the runner or the store, prints, and
returns an exit code. Every action that changes state is recorded in ``crontabber_audit`` with
who, when, what, why.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from .. import jsonout
from ..catalog import Job, find_job
from ..command import ExitCode
from ..config.settings import Settings
from ..errors import ConfigurationError, JobPaused
from ..formats import day_text, minute_text, utc_text
from ..overrides import check_pause
from ..scheduling import next_run_after, parse_day, parse_until, pause_active, rerun_dates
from ..state import JobState
from ..store import StateStore
from .common import Context, terminate_on_sigterm

DEFAULT_PAUSE = dt.timedelta(hours=24)
DEFAULT_MUTE = dt.timedelta(hours=2)


def explain(ctx: Context) -> int:
    from ..explain import explain_job

    settings, jobs, store, args, out = ctx.settings, ctx.jobs, ctx.store, ctx.args, ctx.out
    job = ctx.job(args.explain)
    runner = ctx.runner()
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
    return ExitCode.OK


def blocked_dependents(job: Job, jobs: list[Job], states: Any, now: dt.datetime) -> dict[str, str]:
    """The jobs depending on ``job`` that its state keeps from running now, and why
    (dependencies seen from the parent's side)."""
    from ..scheduling import dependency_block

    blocked = {}
    for child in jobs:
        if job.app_name in child.depends_on:
            why = dependency_block([job.app_name], states, now)
            if why is not None:
                blocked[child.app_name] = why
    return blocked


def pause(ctx: Context) -> int:
    store, args, out = ctx.store, ctx.args, ctx.out
    job = ctx.job(args.pause)  # its --reason: checked by dispatch.require_reason
    now = store.now()
    try:
        until = parse_until(args.until, now) if args.until else now + DEFAULT_PAUSE
    except ValueError as exc:
        raise ConfigurationError("--until", str(exc)) from None
    if not store.pause(job.app_name, job.depends_on, until,
                       ctx.audit_entry("pause", job.app_name, until=until), args.replace):
        _refuse_paused(store, job.app_name, "pause it again",
                       f"--pause {job.app_name} --replace replaces that pause")
    print(f"{job.app_name}: paused until {minute_text(until)}"
          f"{' (24 h: --until to choose)' if not args.until else ''}; cron ticks skip it, "
          f"--job runs it only with --force --reason TEXT; --resume {job.app_name} ends the "
          "pause", file=out)
    return ExitCode.OK


def _refuse_paused(store: StateStore, app_name: str, action: str, override: str) -> None:
    """Raise :class:`JobPaused` naming the job's pause, if one is in force.

    Raises:
        JobPaused: the job is paused.
    """
    state = store.state(app_name)
    if state is not None and pause_active(state, store.now()):
        raise JobPaused(app_name, action, state.paused_until, state.paused_by,
                        state.paused_reason, override)


def resume(ctx: Context) -> int:
    store, args, out = ctx.store, ctx.args, ctx.out
    job = ctx.job(args.resume)
    state = store.state(job.app_name)
    if state is None or state.paused_until is None or state.paused_until <= store.now():
        print(f"{job.app_name}: not paused", file=out)
        return ExitCode.OK
    store.resume(job.app_name, ctx.audit_entry("resume", job.app_name))
    print(f"{job.app_name}: resumed (was paused until {minute_text(state.paused_until)} "
          f"by {state.paused_by}: {state.paused_reason})", file=out)
    return ExitCode.OK


def rerun(ctx: Context) -> int:
    from ..runner import Status

    settings, store, args, out = ctx.settings, ctx.store, ctx.args, ctx.out
    job = ctx.job(args.rerun)
    if not args.dry_run:
        ctx.refuse_older_code()
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
            print(f"  {minute_text(date)}{': ' + said if said else ''}", file=out)
        return ExitCode.OK
    if len(dates) > settings.rerun_confirm_over and not args.yes:
        raise ConfigurationError(
            "--rerun", f"{len(dates)} intervals of {job.app_name} ({day_text(dates[0])} to "
            f"{day_text(dates[-1])}) is more than rerun_confirm_over ({settings.rerun_confirm_over})"
            "; check the dates (--dry-run lists them) and add --yes")
    check_pause(job.app_name, store.state(job.app_name), store.now(), "rerun it",
                force=args.force, reason=args.reason,
                override="--force --reason TEXT reruns it anyway (the pause stays)")
    store.audit(ctx.audit_entry("rerun", job.app_name, dates=[d.isoformat() for d in dates],
                            **({"force": True} if args.force else {})))
    with terminate_on_sigterm():
        result = ctx.runner().rerun(job, dates)
    if result.error is not None:
        raise result.error
    listed = _span(dates)
    done = [f"  {minute_text(when)}: {text or 'done'}" for when, text in result.summaries]
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


def _planner(settings: Settings, job: Job) -> Callable[[dt.datetime], str | None]:
    """The job's own account of what a run for a date would write (``BaseCronApp.plan``),
    from an instance built as the runner builds it; a job that cannot say says nothing."""
    from ..catalog import job_config

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
    """``2026-11-21 00:00 UTC``, or ``24 intervals, 2026-11-01 00:00 UTC to 2026-11-24 00:00 UTC``."""
    if len(dates) == 1:
        return minute_text(dates[0])
    return f"{len(dates)} intervals, {minute_text(dates[0])} to {minute_text(dates[-1])}"


def mark_success(ctx: Context) -> int:
    store, args, out = ctx.store, ctx.args, ctx.out
    job = ctx.job(args.mark_success)
    runner = ctx.runner()
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
        ctx.audit_entry("mark-success", job.app_name, next_run=next_run),
        {"next_run": next_run},
    )
    if state is None:
        print(f"{job.app_name}: never ran: nothing to mark (a first run is due now)", file=out)
        return ExitCode.OK
    old = state.last_success
    print(f"{job.app_name}: marked successful (last success "
          f"{minute_text(old) if old else 'never'} -> now; errors cleared; next run "
          f"{minute_text(next_run)})", file=out)
    return ExitCode.OK


def reset_job(ctx: Context) -> int:
    jobs, args, out = ctx.jobs, ctx.args, ctx.out
    name = ctx.state_name(args.reset_job)
    audit = ctx.audit_entry("reset", name)
    was = ctx.runner().reset(name, audit)
    if was is not None:
        ghost = "" if find_job(jobs, name) else " (it was a ghost: not configured)"
        # as --release does, name the run whose marker went (written into the log as abandoned)
        run = f" (run {was.run_id})" if was.run_id is not None else ""
        held = "" if was.ongoing is None else (
            f"; discarded the marker of {was.ongoing_by or 'an unknown runner'}{run}, recorded "
            f"as abandoned: --history {name}")
        print(f"{name}: state reset{ghost}{held}", file=out)
    else:
        print(f"{name}: had no state (already reset)", file=out)
    return ExitCode.OK


def release(ctx: Context) -> int:
    args, out = ctx.args, ctx.out
    name = ctx.state_name(args.release)
    released = ctx.runner().release(name, ctx.audit_entry("release", name))
    if released:
        print(f"{name}: released the marker of {released}; last run, last success and "
              "backfill progress are kept", file=out)
    else:
        print(f"{name}: not running: nothing to release", file=out)
    return ExitCode.OK


def audit(ctx: Context) -> int:
    store, args, out = ctx.store, ctx.args, ctx.out
    name = None
    if args.audit_job:
        name = ctx.state_name(args.audit_job)
    if args.limit is not None and args.limit < 1:
        raise ConfigurationError("--limit", "must be at least 1")
    entries = store.audit_entries(name, args.limit or 20)
    if args.json:
        jsonout.emit([{"id": e.id, "at": e.at, "actor": e.actor, "action": e.action,
                       "job": e.app_name, "reason": e.reason, "detail": dict(e.detail)}
                      for e in entries], out)
        return ExitCode.OK
    if not entries:
        print("no operator actions recorded" + (f" for {name}" if name else ""), file=out)
    for e in entries:
        detail = ", ".join(f"{k}={v}" for k, v in dict(e.detail).items())
        assert e.at is not None
        print(f"{utc_text(e.at)}  {e.actor}  {e.action} {e.app_name}"
              f"{f'  why: {e.reason}' if e.reason else ''}{f'  ({detail})' if detail else ''}",
              file=out)
    return ExitCode.OK


def audit_ghosts(ctx: Context) -> int:
    """``--audit-ghosts``: the state rows of jobs that are no longer configured."""
    from ..nagios import ghosts

    found = ghosts(ctx.jobs, ctx.store.states())
    if not found:
        print("No ghosts: every job in the state database is configured.", file=ctx.out)
        return ExitCode.OK
    print("Found the following in the state database but not available as a configured job:",
          file=ctx.out)
    for name in found:
        print(f"\t{name}", file=ctx.out)
    return ExitCode.OK


def _scope(ctx: Context, name: str) -> str:
    """``*`` for ``all``, else the app name a configured job's name means."""
    return "*" if name == "all" else ctx.job(name).app_name


def mute(ctx: Context) -> int:
    """``--mute NAME|all [--until WHEN] --reason TEXT``: a maintenance window of the alerts."""
    store, args = ctx.store, ctx.args
    scope = _scope(ctx, args.mute)
    now = store.now()
    try:
        until = parse_until(args.until, now) if args.until else now + DEFAULT_MUTE
    except ValueError as exc:
        raise ConfigurationError("--until", str(exc)) from None
    store.mute(scope, until, ctx.audit_entry("mute", scope, until=until))
    what = "every job's alerts" if scope == "*" else f"{scope}'s alerts"
    print(f"{what} muted until {minute_text(until)}"
          f"{' (2 h: --until to choose)' if not args.until else ''}: none opens, ends or repeats; "
          f"the jobs still run; --unmute {args.mute} ends it", file=ctx.out)
    return ExitCode.OK


def unmute(ctx: Context) -> int:
    """``--unmute NAME|all``: end a maintenance window now."""
    scope = _scope(ctx, ctx.args.unmute)
    if ctx.store.unmute(scope, ctx.audit_entry("unmute", scope)):
        print(f"{'every job' if scope == '*' else scope}: alerts unmuted", file=ctx.out)
    else:
        print(f"{'every job' if scope == '*' else scope}: not muted", file=ctx.out)
    return ExitCode.OK
