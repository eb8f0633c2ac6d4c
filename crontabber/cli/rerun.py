"""``--rerun NAME``: redo a backfill job's past intervals (``--date``/``--to``, ``--only
failed|missing``, ``--newest-first``, ``--resume-run RUN``, ``--dry-run``). Parses, asks the
store what the ledger knows (:mod:`crontabber.reruns` plans), calls the runner, prints."""

from __future__ import annotations

import datetime as dt
from typing import Callable

from ..command import ExitCode
from ..config.catalog import Job
from ..config.settings import Settings
from ..errors import ConfigurationError, MarkerIsLive, RunNotFound
from ..formats import day_text, minute_text, one_line
from ..overrides import check_pause
from ..reruns import RerunRecord, Step, parse_only, plan_steps, step_lines, to_run
from ..scheduling import dependency_block, parse_day, rerun_dates
from .common import Context, terminate_on_sigterm


def rerun(ctx: Context) -> int:
    from ..runner import Status

    settings, store, args, out = ctx.settings, ctx.store, ctx.args, ctx.out
    job = ctx.job(args.rerun)
    if not args.dry_run:
        ctx.refuse_older_code()
    if not job.is_backfill:
        raise ConfigurationError(
            "--rerun",
            f"{job.app_name} is not a backfill job (it has no days to redo); "
            f"--job {job.app_name} --force runs it once now",
        )
    resumed = _resumed(ctx, job) if args.resume_run is not None else None
    steps = _steps(ctx, job, resumed)
    dates = to_run(steps)
    _warn_blocked(ctx, job)
    if args.dry_run:
        _print_plan(ctx, job, steps)
        return ExitCode.OK
    if not dates:
        print(
            f"{job.app_name}: nothing to rerun: each of the {len(steps)} interval(s) is skipped (--dry-run says why)",
            file=out,
        )
        return ExitCode.NOT_RUN
    if len(dates) > settings.rerun_confirm_over and not args.yes:
        raise ConfigurationError(
            "--rerun",
            f"{len(dates)} intervals of {job.app_name} ({day_text(min(dates))} to "
            f"{day_text(max(dates))}) is more than rerun_confirm_over ({settings.rerun_confirm_over})"
            "; check the dates (--dry-run lists them) and add --yes",
        )
    check_pause(
        job.app_name,
        store.state(job.app_name),
        store.now(),
        "rerun it",
        force=args.force,
        reason=args.reason,
        override="--force --reason TEXT reruns it anyway (the pause stays)",
    )
    if resumed is not None and resumed.status == "running":
        store.abandon_run(
            resumed.run_id, f"killed without recording its end; continued by --resume-run on {ctx.runner().host}"
        )
    store.audit(ctx.audit_entry("rerun", job.app_name, dates=[d.isoformat() for d in dates], **_audited(args, resumed)))
    with terminate_on_sigterm():
        result = ctx.runner().rerun(job, dates, resumed.run_id if resumed else None)
    if result.error is not None:
        raise result.error
    listed = _span(dates)
    skipped = len(steps) - len(dates)
    more = f"; {skipped} interval(s) skipped (--dry-run says why)" if skipped else ""
    done = [f"  {minute_text(when)}: {one_line(text) or 'done'}" for when, text in result.summaries]
    if result.status is not Status.RAN:
        print(
            f"{job.app_name}: rerun of {listed} (run {result.run_id}) failed: {one_line(result.detail)} "
            f"({len(done)} of {len(dates)} intervals done before the failure; see --history "
            f"and --logs {job.app_name} --run {result.run_id}; --rerun {job.app_name} "
            f"--resume-run {result.run_id} continues it){more}",
            file=out,
        )
        for line in done:
            print(line, file=out)
        return ExitCode.JOB_FAILED
    print(f"{job.app_name}: reran {listed} (run {result.run_id}); last success and next run unchanged{more}:", file=out)
    print("\n".join(done), file=out)
    return ExitCode.OK


def _steps(ctx: Context, job: Job, resumed: RerunRecord | None) -> list[Step]:
    """The rerun's plan: the intervals of ``--date``/``--to`` (or of the run it resumes, in
    its order), each to run or skipped with why.

    Raises:
        ConfigurationError: a bad ``--date``, ``--to`` or ``--only``, or no interval at all.
    """
    settings, store, args = ctx.settings, ctx.store, ctx.args
    try:
        only = parse_only(args.only)
    except ValueError as exc:
        raise ConfigurationError("--only", str(exc)) from None
    if resumed is not None:
        dates = list(resumed.plan)
    else:
        dates = _dates(ctx, job)
    records = store.interval_records(job.app_name, dates, settings.lease_seconds)
    return plan_steps(dates, records, only, args.newest_first, resumed)


def _dates(ctx: Context, job: Job) -> list[dt.datetime]:
    store, args = ctx.store, ctx.args
    if not args.date:
        raise ConfigurationError("--rerun", "needs --date YYYY-MM-DD [--to YYYY-MM-DD] (or --resume-run RUN)")
    try:
        first = parse_day(args.date)
        last = parse_day(args.to) if args.to else first
        state = store.state(job.app_name)
        dates = rerun_dates(job.schedule, state.last_success if state else None, first, last, store.now())
    except ValueError as exc:
        raise ConfigurationError("--date/--to", str(exc)) from None
    if not dates:
        raise ConfigurationError(
            "--date/--to", f"no interval of {job.app_name} starts between {first} and {last} before now"
        )
    return dates


def _resumed(ctx: Context, job: Job) -> RerunRecord:
    """The rerun ``--resume-run RUN`` continues: one of the job's reruns that did not finish.

    Raises:
        ConfigurationError: ``--date``/``--to`` given too, or the run finished.
        RunNotFound: no such rerun of the job.
        MarkerIsLive: it is still running (its lease is live): exit 3.
    """
    args = ctx.args
    if args.date or args.to:
        raise ConfigurationError(
            "--resume-run", "takes the intervals of the run it continues; leave out --date and --to"
        )
    found = ctx.store.rerun_record(args.resume_run, ctx.settings.lease_seconds)
    if found is None or found.app_name != job.app_name or found.kind != "rerun":
        raise RunNotFound(job.app_name, args.resume_run)
    if found.status == "running" and not found.expired:
        raise MarkerIsLive(job.app_name, f"resume run {found.run_id}", f"{found.holder} (its lease is live)")
    if found.status == "succeeded":
        raise ConfigurationError("--resume-run", f"run {found.run_id} of {job.app_name} succeeded: nothing to continue")
    if not found.plan:
        raise ConfigurationError(
            "--resume-run",
            f"run {found.run_id} of {job.app_name} has no recorded plan (a rerun of an older release): rerun its dates",
        )
    return found


def _audited(args: object, resumed: RerunRecord | None) -> dict[str, object]:
    """What the audit records of the rerun's options besides its dates."""
    detail: dict[str, object] = {}
    if getattr(args, "force", False):
        detail["force"] = True
    if getattr(args, "only", ""):
        detail["only"] = getattr(args, "only")
    if getattr(args, "newest_first", False):
        detail["newest_first"] = True
    if resumed is not None:
        detail["resumed_from"] = resumed.run_id
    return detail


def _print_plan(ctx: Context, job: Job, steps: list[Step]) -> None:
    """``--dry-run``: every interval in the order the rerun would take them, what each
    would write (the job's ``plan``) or why it is skipped, and what it would wait for."""
    runs = len(to_run(steps))
    order = "newest first" if ctx.args.newest_first else "oldest first"
    skipped = f", {len(steps) - runs} skipped" if runs < len(steps) else ""
    resumes = f", continuing run {ctx.args.resume_run} (its order)" if ctx.args.resume_run is not None else ""
    print(
        f"{job.app_name}: --rerun would run {runs} interval(s), {order}{skipped}{resumes} (nothing ran):", file=ctx.out
    )
    for line in step_lines(steps, _planner(ctx.settings, job)):
        print(f"  {one_line(line)}", file=ctx.out)


def _warn_blocked(ctx: Context, job: Job) -> None:
    """One warning line when a tick would not run ``job`` now because of its parents (one
    failing, say): a rerun goes on, but may work from what the parent did not produce."""
    if not job.depends_on:
        return
    why = dependency_block(job.depends_on, ctx.store.states(), ctx.store.now())
    if why is not None:
        print(
            f"{job.app_name}: warning: {one_line(why)} (a tick would skip {job.app_name} "
            "now); the rerun goes on, but its data may be incomplete",
            file=ctx.out,
        )


def _planner(settings: Settings, job: Job) -> Callable[[dt.datetime], str | None]:
    """The job's own account of what a run for a date would write (``BaseCronApp.plan``),
    from an instance built as the runner builds it; a job that cannot say says nothing."""
    from ..config.catalog import job_config

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
    """``2026-11-21 00:00 UTC``, or ``24 intervals, 2026-11-01 00:00 UTC to 2026-11-24 00:00 UTC``
    (first and last in the order they ran)."""
    if len(dates) == 1:
        return minute_text(dates[0])
    return f"{len(dates)} intervals, {minute_text(dates[0])} to {minute_text(dates[-1])}"
