"""A :class:`~crontabber.reruns.request.RerunPlan` shown or carried out: the lines
``--dry-run`` prints (:func:`plan_lines`), the refusals made before anything runs
(:func:`check_run`), the dead runs of a resumed rerun recorded abandoned (:func:`abandon_dead`),
then each job's part run in turn (:func:`execute`), with a line per part saying how it went.
Nothing here prints: the lines go to the caller (``say``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from ..errors import ConfigurationError
from ..formats import day_text, minute_text, one_line
from ..overrides import check_pause
from .plan import RerunRecord, Stage, intervals_text, step_lines, to_run
from .request import RerunPlan, gone_here

if TYPE_CHECKING:
    from ..config.catalog import Job
    from ..config.settings import Settings
    from ..results import JobResult
    from ..store import StateStore
    from .store import RerunStore


class Rerunner(Protocol):
    """What a rerun's execution needs of
    :class:`crontabber.operator_actions.OperatorActions` (the package imports neither it nor
    the runner, which import the package's store)."""

    @property
    def jobs(self) -> Sequence[Job]: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def host(self) -> str: ...

    @property
    def reruns(self) -> RerunStore: ...

    def gone_here(self, holder: str) -> bool: ...

    def rerun(
        self,
        job: Job,
        dates: list[dt.datetime],
        resumed_from: int | None = None,
        parallel: int | None = None,
        downstream: bool = False,
        downstream_of: int | None = None,
    ) -> JobResult: ...


def plan_lines(plan: RerunPlan, jobs: Sequence[Job], settings: Settings) -> list[str]:
    """``--dry-run``: each job of the rerun in the order it would run (the job, then with
    ``--downstream`` its dependants, each after the one before finished), how many intervals
    at once, and every interval in the order it would take them: what it would write (the
    job's ``plan``), why it is skipped, what it would wait for."""
    lines: list[str] = []
    by_name = {job.app_name: job for job in jobs}
    for n, stage in enumerate(plan.stages):
        if n == 1:
            lines.append(
                "then, with --downstream, its dependants for the same days, each after the one "
                f"before has done every interval ({len(plan.stages) - 1}):"
            )
        if stage.not_rerun is not None:
            lines.append(f"{stage.app_name}: not rerun: {stage.not_rerun}")
            continue
        lines.append(_stage_head(plan, stage, n == 0))
        planner = _planner(settings, by_name[stage.app_name])
        lines.extend(f"  {one_line(line)}" for line in step_lines(stage.steps, planner))
    return lines


def _stage_head(plan: RerunPlan, stage: Stage, first: bool) -> str:
    """The dry run's line introducing one job's part."""
    steps = list(stage.steps)
    runs = len(to_run(steps))
    parts = [f"{stage.app_name}: --rerun would run {runs} interval(s)"]
    if stage.record is None:
        parts.append(
            ("newest first" if plan.request.newest_first else "oldest first")
            if first
            else "by day as above"
        )
    if runs < len(steps):
        parts.append(f"{len(steps) - runs} skipped")
    if stage.record is not None:
        live = stage.record.live(gone_here)
        parts.append(
            f"joining run {stage.record.run_id}"
            if live
            else f"continuing run {stage.record.run_id} (its order)"
        )
    parts.extend(_at_once(plan, stage, first))
    return ", ".join(parts) + (" (nothing ran):" if first else ":")


def _at_once(plan: RerunPlan, stage: Stage, first: bool) -> list[str]:
    """The dry run's word on parallelism: nothing for a rerun of one interval at a time."""
    if stage.parallel > 1:
        joins = (
            f" (more runs join it with --rerun {plan.request.name} --resume-run RUN, on this "
            "host or others)"
        )
        return [f"up to {stage.parallel} at once" + (joins if first else "")]
    asked = plan.request.parallel
    if not first and asked and asked > 1:
        return ["one at a time (it does not declare parallel_reruns)"]
    return []


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


def check_run(
    plan: RerunPlan, store: StateStore, settings: Settings, now: dt.datetime, yes: bool
) -> None:
    """The refusals of a rerun about to run: more intervals than ``rerun_confirm_over``
    without ``yes`` (``--yes``); a paused job among its parts without ``--force --reason``.

    Raises:
        ConfigurationError: too many intervals without ``yes``.
        JobPaused, PauseOverrideNeedsReason: :func:`crontabber.overrides.check_pause`.
    """
    dates, name = plan.dates, plan.request.job.app_name
    if len(dates) > settings.rerun_confirm_over and not yes:
        raise ConfigurationError(
            "--rerun",
            f"{len(dates)} intervals of {name} ({day_text(min(dates))} to "
            f"{day_text(max(dates))}) is more than rerun_confirm_over "
            f"({settings.rerun_confirm_over}); check the dates (--dry-run lists them) and add "
            "--yes",
        )
    for stage in plan.stages:
        if stage.dates:
            check_pause(
                stage.app_name,
                store.state(stage.app_name),
                now,
                "rerun it",
                force=plan.request.force,
                reason=plan.request.reason,
                override="--force --reason TEXT reruns it anyway (the pause stays)",
            )


def abandon_dead(runner: Rerunner, record: RerunRecord | None) -> None:
    """Record the runs of ``record`` found dead (lease expired, or gone on this host) as
    abandoned: ``--resume-run`` continues what they held."""
    if record is None:
        return
    for worker in record.dead(runner.gone_here):
        runner.reruns.abandon_run(
            worker.run_id,
            f"killed without recording its end; continued by --resume-run on {runner.host}",
        )


def execute(
    plan: RerunPlan, runner: Rerunner, say: Callable[[str], None]
) -> tuple[bool, int | None]:
    """Run ``plan``'s parts in order with ``runner`` (its first part's dead runs already
    recorded: :func:`abandon_dead`), stopping at the first that fails; ``say`` gets the lines
    of each part. Returns whether every part ran all its intervals, and the rerun's first run
    (``--resume-run`` continues it all; None when nothing ran).

    Raises:
        Exception: what a run raised that the runner did not record (its ``error``).
    """
    top = plan.resumed.run_id if plan.resumed is not None else None
    for n, stage in enumerate(plan.stages):
        if stage.not_rerun is not None:
            say(f"{stage.app_name}: not rerun: {stage.not_rerun}")
            continue
        if not stage.dates:
            continue
        done, top = _run_stage(plan, runner, stage, n == 0, top, say)
        if not done:
            return False, top
    return True, top


def _run_stage(
    plan: RerunPlan,
    runner: Rerunner,
    stage: Stage,
    first: bool,
    top: int | None,
    say: Callable[[str], None],
) -> tuple[bool, int | None]:
    """Run one job's part of the rerun (start it, join it, or continue it), say how it went;
    whether it ran all its intervals, and the rerun's first run (``--resume-run`` continues
    it all)."""
    from ..results import Status

    request, record = plan.request, stage.record
    job = next(j for j in runner.jobs if j.app_name == stage.app_name)
    if record is not None and not first:  # (the first's dead runs: abandon_dead)
        abandon_dead(runner, record)
    dates = [] if record is not None else stage.dates
    resumed = record.run_id if record is not None else None
    if first:
        result = runner.rerun(
            job, dates, resumed, parallel=request.parallel, downstream=request.downstream
        )
        top = resumed if resumed is not None else result.run_id
    else:
        result = runner.rerun(job, dates, resumed, parallel=stage.parallel, downstream_of=top)
    if result.error is not None:
        raise result.error
    continues = f"--rerun {request.job.app_name} --resume-run {top} continues it"
    ran = result.status is Status.RAN
    for line in _said(stage, first, result, continues if not ran else None):
        say(line)
    if not ran:
        return False, top
    after = (
        runner.reruns.rerun_record(result.run_id, runner.settings.lease_seconds)
        if result.run_id is not None
        else None
    )
    left = after.left if after is not None else []
    if left:
        say(
            f"{job.app_name}: {len(left)} interval(s) of the rerun not done "
            f"({intervals_text(left)}): the job failed on them in another run of it "
            f"(--history {job.app_name}); {continues}"
        )
        return False, top
    return True, top


def _said(stage: Stage, first: bool, result: JobResult, failed: str | None) -> list[str]:
    """What a part of the rerun says once its run ended: it reran (``failed`` None), or it
    failed (``failed``: how to continue it); then each interval done with its summary."""
    name, dates = stage.app_name, stage.dates
    skipped = len(stage.steps) - len(dates)
    more = (
        f"; {skipped} interval(s) skipped (--dry-run says why)"
        if skipped and first and stage.record is None
        else ""
    )
    done = [f"  {minute_text(when)}: {one_line(text) or 'done'}" for when, text in result.summaries]
    if failed is not None:
        head = (
            f"{name}: rerun of {intervals_text(dates)} (run {result.run_id}) failed: "
            f"{one_line(result.detail)} ({len(done)} of {len(dates)} intervals done before the "
            f"failure; see --history and --logs {name} --run {result.run_id}; {failed}){more}"
        )
        return [head, *done]
    ran = [when for when, _ in result.summaries]
    did = intervals_text(ran) if ran else "no interval (the other runs of the rerun ran them)"
    listed = ":" if done else ""
    return [
        f"{name}: reran {did} (run {result.run_id}); last success and next run "
        f"unchanged{more}{listed}",
        *done,
    ]
