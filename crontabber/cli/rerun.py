"""``--rerun NAME``: redo a backfill job's past intervals (``--date``/``--to``, ``--only
failed|missing``, ``--newest-first``, ``--parallel N``, ``--downstream``, ``--resume-run RUN``,
``--dry-run``). Parses the options into a request, asks :func:`crontabber.reruns.plan_rerun`
for the plan, prints it (``--dry-run``) or runs that same plan
(:func:`crontabber.reruns.execute.execute`), printing what it says."""

from __future__ import annotations

from ..command import ExitCode
from ..operator_actions import OperatorActions
from ..reruns import RerunRequest, plan_rerun
from ..reruns.execute import abandon_dead, check_run, execute, plan_lines
from .common import Context, terminate_on_sigterm


def rerun(ctx: Context) -> int:
    """``--rerun NAME``: 0 (done, or the dry run printed), 7 (every interval skipped), 5 (a
    part failed); a refusal raises (:func:`crontabber.reruns.plan_rerun`,
    :func:`crontabber.reruns.execute.check_run`)."""
    args, out = ctx.args, ctx.out
    job = ctx.job(args.rerun)
    if not args.dry_run:
        ctx.refuse_older_code()
    request = RerunRequest(
        job,
        args.rerun,
        date=args.date,
        to=args.to,
        only=args.only,
        newest_first=args.newest_first,
        parallel=args.parallel,
        downstream=args.downstream,
        resume_run=args.resume_run,
        force=args.force,
        reason=args.reason,
    )
    now = ctx.store.now()
    plan = plan_rerun(ctx.store, ctx.jobs, ctx.settings, request, now)
    for line in plan.warnings:
        print(line, file=out)
    if args.dry_run:
        for line in plan_lines(plan, ctx.jobs, ctx.settings):
            print(line, file=out)
        return ExitCode.OK
    nothing = plan.nothing_to_run()
    if nothing is not None:
        print(nothing, file=out)
        return ExitCode.NOT_RUN
    check_run(plan, ctx.store, ctx.settings, now, yes=args.yes)
    runner = OperatorActions(ctx.runner())
    abandon_dead(runner, plan.resumed)
    # in the trail from its start (a rerun killed or still going is there too), then its end
    ctx.audit_start(
        "rerun", job.app_name, dates=[d.isoformat() for d in plan.dates], **plan.audited()
    )
    with terminate_on_sigterm():
        done, top = execute(plan, runner, lambda line: print(line, file=out))
    code = ExitCode.OK if done else ExitCode.JOB_FAILED
    ctx.audit_end("done" if done else f"failed (exit {code})", **({"run_id": top} if top else {}))
    return code
