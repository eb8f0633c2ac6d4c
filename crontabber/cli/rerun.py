"""``--rerun NAME``: redo a backfill job's past intervals (``--date``/``--to``, ``--only
failed|missing``, ``--newest-first``, ``--parallel N``, ``--downstream``, ``--resume-run RUN``,
``--dry-run``). Parses, asks the rerun store what the ledger knows (:mod:`crontabber.reruns` plans),
calls the runner once per job of the rerun (the job, then its dependants), prints."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Callable

from ..command import ExitCode
from ..config.catalog import Job
from ..config.settings import Settings
from ..errors import ConfigurationError, MarkerIsLive, RunNotFound
from ..formats import day_text, minute_text, one_line
from ..leases import holder_gone
from ..overrides import check_pause
from ..reruns.plan import (
    RerunRecord,
    Stage,
    dependants,
    downstream_steps,
    parse_only,
    plan_steps,
    same_days,
    step_lines,
    to_run,
)
from ..reruns.store import RerunStore
from ..scheduling import dependency_block, parse_day, rerun_dates
from .common import Context, terminate_on_sigterm

if TYPE_CHECKING:
    from ..runner import Runner


def rerun(ctx: Context) -> int:
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
    _check_parallel(ctx, job)
    resumed = _resumed(ctx, job) if args.resume_run is not None else None
    stages = _stages(ctx, job, resumed)
    dates = stages[0].dates
    _warn_blocked(ctx, job)
    if resumed is not None:
        _warn_newer(ctx, job, resumed)
    if args.dry_run:
        _print_plan(ctx, stages, resumed)
        return ExitCode.OK
    if not any(stage.dates for stage in stages):
        print(
            f"{job.app_name}: nothing to rerun: each of the {len(stages[0].steps)} interval(s) is "
            "skipped "
            "(--dry-run says why)",
            file=out,
        )
        return ExitCode.NOT_RUN
    if len(dates) > settings.rerun_confirm_over and not args.yes:
        raise ConfigurationError(
            "--rerun",
            f"{len(dates)} intervals of {job.app_name} ({day_text(min(dates))} to "
            f"{day_text(max(dates))}) is more than rerun_confirm_over "
            f"({settings.rerun_confirm_over})"
            "; check the dates (--dry-run lists them) and add --yes",
        )
    for stage in stages:
        if stage.dates:
            check_pause(
                stage.app_name,
                store.state(stage.app_name),
                store.now(),
                "rerun it",
                force=args.force,
                reason=args.reason,
                override="--force --reason TEXT reruns it anyway (the pause stays)",
            )
    runner = ctx.runner()
    if resumed is not None:
        _abandon_dead(runner, resumed)
    # in the trail from its start (a rerun killed or still going is there too), then its end
    ctx.audit_start(
        "rerun",
        job.app_name,
        dates=[d.isoformat() for d in dates],
        **_audited(args, resumed, stages),
    )
    top = resumed.run_id if resumed is not None else None
    code: int = ExitCode.OK
    with terminate_on_sigterm():
        for n, stage in enumerate(stages):
            if stage.not_rerun is not None:
                print(f"{stage.app_name}: not rerun: {stage.not_rerun}", file=out)
                continue
            if not stage.dates:
                continue
            code, top = _run_stage(ctx, stage, n == 0, top, job)
            if code != ExitCode.OK:
                break
    ctx.audit_end(
        "done" if code == ExitCode.OK else f"failed (exit {code})",
        **({"run_id": top} if top else {}),
    )
    return code


def _run_stage(
    ctx: Context, stage: Stage, first: bool, top: int | None, named: Job
) -> tuple[int, int | None]:
    """Run one job's part of the rerun (start it, join it, or continue it), print how it went;
    the exit code so far and the rerun's first run (``--resume-run`` continues it all)."""
    from ..runner import Status

    args, out = ctx.args, ctx.out
    job = ctx.job(stage.app_name)
    record = stage.record
    runner = ctx.runner()
    if record is not None and not first:  # (the first's dead runs are recorded by rerun())
        _abandon_dead(runner, record)
    if first:
        result = runner.rerun(
            job,
            [] if record is not None else stage.dates,
            record.run_id if record is not None else None,
            parallel=args.parallel,
            downstream=args.downstream,
        )
        top = record.run_id if record is not None else result.run_id
    else:
        result = runner.rerun(
            job,
            [] if record is not None else stage.dates,
            record.run_id if record is not None else None,
            parallel=stage.parallel,
            downstream_of=top,
        )
    if result.error is not None:
        raise result.error
    continues = f"--rerun {named.app_name} --resume-run {top} continues it"
    skipped = len(stage.steps) - len(stage.dates)
    more = (
        f"; {skipped} interval(s) skipped (--dry-run says why)"
        if skipped and first and record is None
        else ""
    )
    ran = [when for when, _ in result.summaries]
    done = [f"  {minute_text(when)}: {one_line(text) or 'done'}" for when, text in result.summaries]
    if result.status is not Status.RAN:
        print(
            f"{job.app_name}: rerun of {_span(stage.dates)} (run {result.run_id}) failed: "
            f"{one_line(result.detail)} "
            f"({len(done)} of {len(stage.dates)} intervals done before the failure; see --history "
            f"and --logs {job.app_name} --run {result.run_id}; {continues}){more}",
            file=out,
        )
        for line in done:
            print(line, file=out)
        return ExitCode.JOB_FAILED, top
    did = _span(ran) if ran else "no interval (the other runs of the rerun ran them)"
    listed = ":" if done else ""
    print(
        f"{job.app_name}: reran {did} (run {result.run_id}); last success and next run "
        f"unchanged{more}{listed}",
        file=out,
    )
    for line in done:
        print(line, file=out)
    after = (
        runner.reruns.rerun_record(result.run_id, ctx.settings.lease_seconds)
        if result.run_id is not None
        else None
    )
    left = after.left if after is not None else []
    if left:
        print(
            f"{job.app_name}: {len(left)} interval(s) of the rerun not done ({_span(left)}): the "
            "job failed on "
            f"them in another run of it (--history {job.app_name}); {continues}",
            file=out,
        )
        return ExitCode.JOB_FAILED, top
    return ExitCode.OK, top


def _abandon_dead(runner: Runner, record: RerunRecord) -> None:
    """Record the runs of ``record`` found dead (lease expired, or gone on this host) as
    abandoned: ``--resume-run`` continues what they held."""
    for worker in record.dead(runner.gone_here):
        runner.reruns.abandon_run(
            worker.run_id,
            f"killed without recording its end; continued by --resume-run on {runner.host}",
        )


def _check_parallel(ctx: Context, job: Job) -> None:
    """``--parallel N``: N at least 1; above 1 only for a job that declares ``parallel_reruns``;
    ``--parallel``, ``--downstream``, ``--only`` and ``--newest-first`` not with
    ``--resume-run`` (it takes the rerun's own plan and options).

    Raises:
        ConfigurationError: one line naming the job and the option.
    """
    args = ctx.args
    if args.resume_run is not None:
        given = {
            "--parallel": args.parallel is not None,
            "--downstream": args.downstream,
            "--only": bool(args.only),
            "--newest-first": args.newest_first,
        }
        for option, present in given.items():
            if present:
                raise ConfigurationError(
                    option,
                    "--resume-run takes the plan and options of the rerun it continues or joins; "
                    f"leave out {option}",
                )
    if args.parallel is None:
        return
    if args.parallel < 1:
        raise ConfigurationError(
            "--parallel", f"takes a number of intervals at once, 1 or more (not {args.parallel})"
        )
    if args.parallel > 1 and not job.parallel_reruns:
        raise ConfigurationError(
            "--parallel",
            f"{job.app_name} does not declare parallel_reruns = True (its intervals may depend on "
            "each other): "
            "it reruns one interval at a time; leave out --parallel",
        )


def _stages(ctx: Context, job: Job, resumed: RerunRecord | None) -> list[Stage]:
    """The rerun's parts in the order they run: ``job``'s (the intervals of ``--date``/``--to``,
    or of the rerun it continues, in its order), then with ``--downstream`` (given, or
    recorded by the rerun it continues) each dependant's, for the days of ``job``'s intervals.

    Raises:
        ConfigurationError: a bad ``--date``, ``--to`` or ``--only``, or no interval at all.
    """
    settings, store, args = ctx.settings, ctx.store, ctx.args
    reruns = RerunStore(store)
    try:
        only = parse_only(args.only)
    except ValueError as exc:
        raise ConfigurationError("--only", str(exc)) from None
    dates = list(resumed.plan) if resumed is not None else _dates(ctx, job)
    records = reruns.interval_records(job.app_name, dates, settings.lease_seconds)
    steps = plan_steps(dates, records, only, args.newest_first, resumed)
    parallel = resumed.parallel if resumed is not None else (args.parallel or 1)
    stages = [Stage(job.app_name, tuple(steps), parallel, resumed)]
    downstream = resumed.downstream if resumed is not None else args.downstream
    if not downstream:
        return stages
    days = list(resumed.plan) if resumed is not None else to_run(steps)
    # with --only, a dependant's own failed or missing days of the range count too (its
    # parent may have done those days long ago while its own part never ran)
    judged = only and resumed is None
    graph = {j.app_name: j.depends_on for j in ctx.jobs}
    now = store.now()
    for name in dependants(graph, job.app_name):
        child = ctx.job(name)
        if not child.is_backfill:
            stages.append(
                Stage(name, not_rerun=f"not a backfill job (--job {name} --force runs it once)")
            )
            continue
        found = (
            reruns.downstream_record(resumed.run_id, name, settings.lease_seconds)
            if resumed
            else None
        )
        state = store.state(name)
        intervals = _intervals_of(child, state.last_success if state else None, now)
        planned = (
            list(found.plan)
            if found is not None
            else same_days(dates if judged else days, intervals)
        )
        child_records = reruns.interval_records(name, planned, settings.lease_seconds)
        # a resumed rerun's dependants keep its --parallel (its first run recorded it)
        cap = found.parallel if found is not None else parallel if child.parallel_reruns else 1
        child_steps = (
            downstream_steps(planned, child_records, only, same_days(days, intervals))
            if judged and found is None
            else plan_steps(planned, child_records, done_by=found)
        )
        stages.append(Stage(name, tuple(child_steps), cap, found))
    return stages


def _intervals_of(
    job: Job, last_success: dt.datetime | None, now: dt.datetime
) -> Callable[[dt.date], list[dt.datetime]]:
    """A dependant's intervals starting on a day (as ``--date DAY`` would rerun them)."""

    def intervals(day: dt.date) -> list[dt.datetime]:
        return rerun_dates(job.schedule, last_success, day, day, now)

    return intervals


def _dates(ctx: Context, job: Job) -> list[dt.datetime]:
    store, args = ctx.store, ctx.args
    if not args.date:
        raise ConfigurationError(
            "--rerun", "needs --date YYYY-MM-DD [--to YYYY-MM-DD] (or --resume-run RUN)"
        )
    try:
        first = parse_day(args.date)
        last = parse_day(args.to) if args.to else first
        state = store.state(job.app_name)
        dates = rerun_dates(
            job.schedule, state.last_success if state else None, first, last, store.now()
        )
    except ValueError as exc:
        raise ConfigurationError("--date/--to", str(exc)) from None
    if not dates:
        raise ConfigurationError(
            "--date/--to",
            f"no interval of {job.app_name} starts between {first} and {last} before now",
        )
    return dates


def _resumed(ctx: Context, job: Job) -> RerunRecord:
    """The rerun ``--resume-run RUN`` continues or joins: one of the job's reruns (RUN may be
    any run of it) that did not finish. Its runs still recorded as running that are dead
    (lease expired, or a process of this host that is gone) are left to the caller to record
    abandoned.

    Raises:
        ConfigurationError: ``--date``/``--to`` given too, or the run has no plan.
        RunNotFound: no such rerun of the job.
        MarkerIsLive: a run of it is still running (its lease is live) and it runs one
            interval at a time: exit 3 (a ``--parallel`` rerun is joined instead).
    """
    args = ctx.args
    if args.date or args.to:
        raise ConfigurationError(
            "--resume-run", "takes the intervals of the run it continues; leave out --date and --to"
        )
    found = RerunStore(ctx.store).rerun_record(args.resume_run, ctx.settings.lease_seconds)
    if found is None or found.app_name != job.app_name or found.kind != "rerun":
        raise RunNotFound(job.app_name, args.resume_run)
    if not found.plan:
        raise ConfigurationError(
            "--resume-run",
            f"run {found.run_id} of {job.app_name} has no recorded plan (a rerun of an older "
            "release): rerun its dates",
        )
    live = found.live(_gone_here)
    if live and found.parallel <= 1:
        raise MarkerIsLive(
            job.app_name, f"resume run {found.run_id}", f"{live[0].holder} (its lease is live)"
        )
    return found


def _gone_here(holder: str) -> bool:
    """Whether ``holder`` was a process of this host that is gone (it died holding the rerun)."""
    from ..identity import this_host
    from ..runner import pid_alive

    return holder_gone(holder, this_host(), pid_alive)


def _audited(args: object, resumed: RerunRecord | None, stages: list[Stage]) -> dict[str, object]:
    """What the audit records of the rerun's options besides its dates."""
    detail: dict[str, object] = {}
    if getattr(args, "force", False):
        detail["force"] = True
    if getattr(args, "only", ""):
        detail["only"] = getattr(args, "only")
    if getattr(args, "newest_first", False):
        detail["newest_first"] = True
    if getattr(args, "parallel", None):
        detail["parallel"] = getattr(args, "parallel")
    if len(stages) > 1:
        detail["downstream"] = [stage.app_name for stage in stages[1:] if stage.not_rerun is None]
    if resumed is not None:
        detail["resumed_from"] = resumed.run_id
    return detail


def _print_plan(ctx: Context, stages: list[Stage], resumed: RerunRecord | None) -> None:
    """``--dry-run``: each job of the rerun in the order it would run (the job, then with
    ``--downstream`` its dependants, each after the one before finished), how many intervals
    at once, and every interval in the order it would take them: what it would write (the
    job's ``plan``), why it is skipped, what it would wait for."""
    out = ctx.out
    for n, stage in enumerate(stages):
        if n == 1:
            print(
                "then, with --downstream, its dependants for the same days, each after the one "
                "before "
                f"has done every interval ({len(stages) - 1}):",
                file=out,
            )
        if stage.not_rerun is not None:
            print(f"{stage.app_name}: not rerun: {stage.not_rerun}", file=out)
            continue
        steps = list(stage.steps)
        runs = len(to_run(steps))
        parts = [f"{stage.app_name}: --rerun would run {runs} interval(s)"]
        if stage.record is None:
            parts.append(
                ("newest first" if ctx.args.newest_first else "oldest first")
                if n == 0
                else "by day as above"
            )
        if runs < len(steps):
            parts.append(f"{len(steps) - runs} skipped")
        if stage.record is not None:
            live = stage.record.live(_gone_here)
            parts.append(
                f"joining run {stage.record.run_id}"
                if live
                else f"continuing run {stage.record.run_id} (its order)"
            )
        parts.extend(_at_once(ctx, stage, n == 0))
        print(", ".join(parts) + (" (nothing ran):" if n == 0 else ":"), file=out)
        job = ctx.job(stage.app_name)
        for line in step_lines(steps, _planner(ctx.settings, job)):
            print(f"  {one_line(line)}", file=out)


def _at_once(ctx: Context, stage: Stage, first: bool) -> list[str]:
    """The dry run's word on parallelism: nothing for a rerun of one interval at a time."""
    if stage.parallel > 1:
        joins = (
            f" (more runs join it with --rerun {ctx.args.rerun} --resume-run RUN, on this host or "
            "others)"
        )
        return [f"up to {stage.parallel} at once" + (joins if first else "")]
    if not first and ctx.args.parallel and ctx.args.parallel > 1:
        return ["one at a time (it does not declare parallel_reruns)"]
    return []


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


def _warn_newer(ctx: Context, job: Job, resumed: RerunRecord) -> None:
    """One warning line per newer rerun of ``job`` whose runs claimed intervals of the plan of
    ``resumed`` (the rerun ``--resume-run`` continues): two reruns then cover the same days at
    once (each interval still runs once at a time: its claim), and the newer one is likely the
    one meant."""
    reruns, lease = RerunStore(ctx.store), ctx.settings.lease_seconds
    records = reruns.interval_records(job.app_name, list(resumed.plan), lease)
    claimed: dict[int, list[dt.datetime]] = {}
    for record in records.values():
        if record.kind == "rerun" and record.run_id is not None:
            claimed.setdefault(record.run_id, []).append(record.starts)
    newer: dict[int, list[dt.datetime]] = {}
    for run_id in sorted(r for r in claimed if r > resumed.run_id):
        group = reruns.rerun_record(run_id, lease)
        if group is not None and group.run_id > resumed.run_id:
            newer.setdefault(group.run_id, []).extend(claimed[run_id])
    for root, dates in newer.items():
        print(
            f"{job.app_name}: warning: a newer rerun, run {root}, covers {_span(sorted(dates))} "
            f"of run {resumed.run_id}'s plan too: both would work on the same days (each "
            f"interval once at a time); --rerun {job.app_name} --resume-run {root} joins the "
            "newer one",
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
    (the earliest and the latest, whatever order they ran in: parallel runs and --newest-first
    run them out of order)."""
    if len(dates) == 1:
        return minute_text(dates[0])
    return f"{len(dates)} intervals, {minute_text(min(dates))} to {minute_text(max(dates))}"
