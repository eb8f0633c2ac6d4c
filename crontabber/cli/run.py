"""The commands that run jobs: a cron tick (no mode: every due job) and ``--job NAME
[--force]`` (one job). Parse, call, print: the tick is :func:`crontabber.tick.run_tick`'s,
the running :class:`crontabber.runner.Runner`'s.
"""

from __future__ import annotations

from ..command import ExitCode
from ..config.catalog import Job
from ..config.settings import Settings
from ..formats import minute_text, one_line
from ..overrides import check_pause
from ..runner import JobResult, Status, first_fenced
from ..tick import run_tick
from .common import Context, terminate_on_sigterm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO


def run_all(ctx: Context) -> int:
    """A cron tick (:func:`crontabber.tick.run_tick`): run every due job, then the alerts
    (when targets are configured) and the metrics file.

    Exits 0 also when jobs failed (recorded) or another runner held one (its row locked that
    moment, or a live run on another host: a fleet's normal case, logged at INFO);
    :data:`crontabber.command.TICK_EXIT_CODES` lists the others: 4 when a run of this tick
    was fenced off, 8 when this host's code is older than the database's schema (then it
    records its tick with the migrations it lacks, raises the ``old-code`` alert, and claims
    nothing), 1 for the configuration or the database, and when a jobs entry did not load
    (the other jobs ran; the ``broken-entry`` alert tells of it)."""
    results = run_tick(
        ctx.settings,
        ctx.jobs,
        ctx.store,
        broken=ctx.broken,
        metrics_file=metrics_path(ctx.settings, ctx.args),
        reporters=ctx.reporters,
        guard=terminate_on_sigterm,
    )
    if first_fenced(results):
        return ExitCode.FENCED
    return ExitCode.ERROR if ctx.broken else ExitCode.OK


def serve(ctx: Context) -> int:
    """``--serve``: stay up (:func:`crontabber.serve.serve`): a pass every ``tick_seconds``,
    the configuration read again when its file changes; 0 once stopped with every run ended
    by itself, 143 when runs had to be stopped, 8 when this host's code is older than the
    database's schema."""
    from ..serve import Configuration
    from ..serve import serve as serve_forever

    config = Configuration(
        ctx.args.conf, ctx.settings.sources.cli, ctx.settings, ctx.jobs, list(ctx.broken)
    )
    return serve_forever(
        config,
        ctx.store,
        metrics_file=lambda settings: metrics_path(settings, ctx.args),
        reporters=ctx.reporters,
    )


def metrics_path(settings: Settings, args: Any) -> str:
    """Where to write the metrics file: ``--metrics-file``, else ``crontabber.metrics_file``
    ('' for nowhere)."""
    return str(getattr(args, "metrics_file", "") or settings.monitor.metrics_file)


def run_one(ctx: Context) -> int:
    """``--job NAME [--force]``: run one job if due (``--force``: anyway; past a pause only
    with ``--reason``: :func:`crontabber.overrides.check_pause`); exit 7 when nothing ran, 6
    when it is paused, 5 when it failed.

    Raises:
        PauseOverrideNeedsReason: ``--force`` on a paused job without ``--reason`` (exit 1).
    """
    args, out = ctx.args, ctx.out
    job = ctx.job(args.job)
    ctx.refuse_older_code()
    if args.force and not _may_force(ctx, job):
        return ExitCode.NOT_RUN
    if args.force:  # in the trail from its start: a run killed or still going is there too
        ctx.audit_start("force", job.app_name)
    with terminate_on_sigterm():
        result = ctx.runner().run_job(job, force=args.force)
    if result.error is not None:
        raise result.error  # locked, running elsewhere, fenced: its end audited by dispatch
    if args.force:
        ctx.audit_end(
            {Status.FAILED: "failed (exit 5)"}.get(result.status, "done"),
            **({"run_id": result.run_id} if result.run_id is not None else {}),
        )
    return _report_run(job, result, out)


def _may_force(ctx: Context, job: Job) -> bool:
    """Whether ``--job NAME --force`` runs ``job``: past a pause only with ``--reason`` (the one
    rule of every data-changing command); False, saying so on ``ctx.out``, when a backfill
    job has no interval left to run.

    Raises:
        PauseOverrideNeedsReason: the job is paused and ``--reason`` is not given.
    """
    check_pause(
        job.app_name,
        ctx.store.state(job.app_name),
        ctx.store.now(),
        "run it",
        force=True,
        reason=ctx.args.reason,
        override="",
    )
    if job.is_backfill and not _backfill_pending(ctx, job):
        print(
            f"{job.app_name}: nothing to backfill (every interval up to now is done); "
            f"--rerun {job.app_name} --date YYYY-MM-DD redoes a past day",
            file=ctx.out,
        )
        return False
    return True


def _report_run(job: Job, result: JobResult, out: TextIO) -> int:
    """Print what ``--job`` did on ``out`` and return its exit code: 6 paused, 7 skipped (a
    script asking for this job learns that nothing ran), 5 failed (recorded: --list-jobs,
    --nagios), else 0 and one line per unit (:func:`unit_lines`)."""
    if result.status is Status.PAUSED:
        print(
            f"{job.app_name}: not run: {result.detail}; --force --reason TEXT runs it anyway",
            file=out,
        )
        return ExitCode.PAUSED
    if result.status is Status.SKIPPED:
        hint = (
            f"; --rerun {job.app_name} --date YYYY-MM-DD redoes a past day"
            if job.is_backfill and result.detail == "not due yet"
            else ""
        )
        print(f"{job.app_name}: skipped ({result.detail}); --force runs it anyway{hint}", file=out)
        return ExitCode.NOT_RUN
    if result.status is Status.FAILED:
        print(f"{job.app_name}: failed: {one_line(result.detail)}", file=out)
        return ExitCode.JOB_FAILED
    for line in unit_lines(job, result):
        print(line, file=out)
    return ExitCode.OK


def unit_lines(job: Job, result: JobResult) -> list[str]:
    """What the run said it did: its summary (an ordinary job), or one line per interval
    (a backfill job); nothing when the job gave no summary."""
    if not any(text for _, text in result.summaries):
        return []
    if not job.is_backfill:
        return [f"{job.app_name}: ran (run {result.run_id}): {one_line(result.summary)}"]
    return [f"{job.app_name}: ran (run {result.run_id}):"] + [
        f"  {minute_text(when)}: {one_line(text) or 'done (no summary)'}"
        for when, text in result.summaries
    ]


def _backfill_pending(ctx: Context, job: Job) -> bool:
    from ..scheduling import backfill_dates

    state = ctx.store.state(job.app_name)
    last_success = state.last_success if state is not None else None
    return bool(backfill_dates(last_success, job.schedule, ctx.store.now()))
