"""The operator commands: ``--explain``, ``--pause``, ``--resume``,
``--mark-success``, ``--reset-job``, ``--release``, ``--mute``, ``--unmute``, ``--audit`` and
``--audit-ghosts``. Each takes the :class:`~crontabber.cli.common.Context`, calls the store or
the operator's actions on the runner's jobs (:mod:`crontabber.operator_actions`), prints, and
returns an exit code. Every action that changes state is recorded in ``crontabber_audit`` with
who, when, what, why.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .. import jsonout
from ..alerts.store import AlertStore
from ..audit_store import AuditStore
from ..command import ExitCode
from ..config.catalog import BrokenEntry, Job, find_job
from ..errors import AuditChainBroken, ConfigurationError, JobPaused, MuteInForce
from ..formats import counted, minute_text, one_line, pause_end, printable, utc_text
from ..identity import this_host
from ..operator_actions import OperatorActions
from ..runner import lease_rules, markers_from_here
from ..scheduling import dependency_block, next_run_after, parse_until, pause_active
from ..state import JobState
from ..store import StateStore
from .common import Context

DEFAULT_PAUSE = dt.timedelta(hours=24)
DEFAULT_MUTE = dt.timedelta(hours=2)


def explain(ctx: Context) -> int:
    from ..alerts.rules import alert_rules
    from ..explain import explain_job
    from ..placement import drains_of

    settings, jobs, store, args, out = ctx.settings, ctx.jobs, ctx.store, ctx.args, ctx.out
    broken = ctx.broken_entry(args.explain) if find_job(jobs, args.explain) is None else None
    if broken is not None:
        return _explain_broken(ctx, broken)
    job = ctx.job(args.explain)
    rules = lease_rules(settings, this_host())
    states, now = store.states(), store.now()
    deadline = alert_rules(job, settings.sources).deadline
    fleet = store.fleet(settings.monitor.silence_critical_minutes * 60) if job.hosts else None
    state = states.get(job.app_name)
    line = (
        store.last_errors([job.app_name]).get(job.app_name)
        if state is not None and state.error_count
        else None
    )
    drains = drains_of(store.hosts()) if fleet and any(h.drained for h in fleet) else None
    result = explain_job(
        job, states, now, markers_from_here(rules)(state, now), rules, deadline, fleet, line, drains
    )
    blocks = blocked_dependents(job, jobs, states, now)
    muted = _muted(ctx, job.app_name)
    if args.json:
        jsonout.emit(
            {
                **result.facts,
                "blocks": blocks,
                "muted": muted or None,
                "database": settings.database.target,
            },
            out,
        )
    else:
        print(f"{job.app_name}: {one_line(result.verdict)}", file=out)
        for line in result.lines:  # an error's message, a pause's reason: data from outside
            print(f"  {one_line(line)}", file=out)
        for name, why in blocks.items():
            print(f"  blocks {name}: it would be skipped ({one_line(why)})", file=out)
        for window in muted:
            print(printable(f"  alerts muted: {window}"), file=out)
        print(f"  database: {settings.database.target}", file=out)
    return ExitCode.OK


def _muted(ctx: Context, app_name: str) -> list[str]:
    """The maintenance windows in force over the job's alerts (``--mute NAME|all``), each as
    ``until 2026-11-28 10:00 UTC by ops@bastion: CHG-9 (every job)``; none without alerts."""
    if not ctx.settings.alerts.enabled:
        return []
    from ..alerts.store import AlertStore

    return [
        f"until {minute_text(w.until)} by {w.muted_by}: {one_line(w.reason)}"
        + (" (every job: --mute all)" if w.scope == "*" else "")
        for w in AlertStore(ctx.store).mutes(app_name)
    ]


def _explain_broken(ctx: Context, broken: BrokenEntry) -> int:
    """``--explain`` of a jobs entry that does not load: what a tick does with it (nothing)
    and why."""
    verdict = f"a tick skips it: its jobs entry does not load: {broken.problem}"
    if ctx.args.json:
        jsonout.emit(
            {
                "name": broken.name,
                "entry": broken.entry.text,
                "broken": True,
                "error": broken.problem,
                "would_run": False,
                "verdict": verdict,
                "database": ctx.settings.database.target,
            },
            ctx.out,
        )
        return ExitCode.OK
    print(f"{broken.name}: {verdict}", file=ctx.out)
    print(f"  jobs entry: {broken.entry.text}", file=ctx.out)
    print(
        "  the other jobs run without it; fix the module or the entry and deploy again "
        "(--configtest refuses the file until then)",
        file=ctx.out,
    )
    print(f"  database: {ctx.settings.database.target}", file=ctx.out)
    return ExitCode.OK


def blocked_dependents(job: Job, jobs: list[Job], states: Any, now: dt.datetime) -> dict[str, str]:
    """The jobs depending on ``job`` that its state keeps from running now, and why
    (dependencies seen from the parent's side)."""

    blocked = {}
    for child in jobs:
        if job.app_name in child.depends_on:
            why = dependency_block([job.app_name], states, now)
            if why is not None:
                blocked[child.app_name] = why
    return blocked


def pause(ctx: Context) -> int:
    """``--pause NAME|all [--until WHEN] [--replace] --reason TEXT``: cron ticks skip the job
    (every configured job); a run already going is not stopped."""
    store, args, out = ctx.store, ctx.args, ctx.out
    now = store.now()
    try:
        until = parse_until(args.until, now) if args.until else now + DEFAULT_PAUSE
    except ValueError as exc:
        raise ConfigurationError("--until", str(exc)) from None
    chosen = "" if args.until else " (24 h: --until to choose)"
    if args.pause == ALL:
        return _pause_all(ctx, until, chosen)
    job = ctx.job(args.pause)  # its --reason: checked by dispatch.require_reason
    if not store.pause(
        job.app_name,
        job.depends_on,
        until,
        ctx.audit_entry("pause", job.app_name, until=until),
        args.replace,
    ):
        _refuse_paused(
            store,
            job.app_name,
            "pause it again",
            f"--pause {job.app_name} --replace replaces that pause",
        )
    if args.json:
        state = store.state(job.app_name)
        jsonout.emit(
            {
                "name": job.app_name,
                "paused_until": until,
                "reason": args.reason,
                "running": _running(state),
            },
            out,
        )
        return ExitCode.OK
    print(
        f"{job.app_name}: paused until {minute_text(until)}{chosen}; cron ticks skip it, "
        f"--job runs it only with --force --reason TEXT; {_going(store, job.app_name)}; "
        f"--resume {job.app_name} ends the pause",
        file=out,
    )
    return ExitCode.OK


#: The name that means every configured job to --pause, --resume, --mute and --unmute.
ALL = "all"


def _running(state: JobState | None) -> dict[str, Any] | None:
    """``--json``'s run going on a job (a pause does not stop it), or None."""
    if state is None or state.ongoing is None:
        return None
    return {"run_id": state.run_id, "by": state.ongoing_by, "since": state.ongoing}


def _pause_of(state: JobState) -> dict[str, Any]:
    """``--json``'s pause of a job: until when, by whom, why."""
    return {"until": state.paused_until, "by": state.paused_by, "reason": state.paused_reason}


def _going(store: StateStore, app_name: str) -> str:
    """What a pause does to a run already going: nothing (it ends as it would)."""
    state = store.state(app_name)
    if state is not None and state.ongoing is not None:
        return (
            f"run {state.run_id} on {state.ongoing_by} is going and continues (a pause stops no "
            "run)"
        )
    return "a pause stops no run already going"


def _pause_all(ctx: Context, until: dt.datetime, chosen: str) -> int:
    """``--pause all``: pause every configured job; a job paused already keeps its pause
    (named) unless ``--replace``."""
    store, args, out = ctx.store, ctx.args, ctx.out
    paused, kept, kept_states = [], [], {}
    for job in ctx.jobs:
        audit = ctx.audit_entry("pause", job.app_name, until=until, scope=ALL)
        if store.pause(job.app_name, job.depends_on, until, audit, args.replace):
            paused.append(job.app_name)
            continue
        state = store.state(job.app_name)
        assert state is not None and state.paused_until is not None  # refused: paused
        kept_states[job.app_name] = _pause_of(state)
        kept.append(
            f"{job.app_name}: kept its pause {pause_end(state.paused_until)} by "
            f"{state.paused_by}: {state.paused_reason} (--pause all --replace replaces it)"
        )
    going = {
        name: s for name, s in store.states().items() if name in paused and s.ongoing is not None
    }
    if args.json:
        jsonout.emit(
            {
                "paused": paused,
                "paused_until": until,
                "reason": args.reason,
                "kept": kept_states,
                "running": {name: _running(s) for name, s in going.items()},
            },
            out,
        )
        return ExitCode.OK
    running = [f"{name} (run {s.run_id} on {s.ongoing_by})" for name, s in going.items()]
    print(
        printable(
            f"every job paused until {minute_text(until)}{chosen}: {', '.join(paused) or 'none'}; "
            "cron ticks skip them, --job runs one only with --force --reason TEXT; "
            + (
                f"a run already going continues: {', '.join(running)}; "
                if running
                else "a pause stops no run already going; "
            )
            + "--resume all ends the pauses --pause all made (a job's own pause stays)"
        ),
        file=out,
    )
    for line in kept:  # (another's pause: its actor and reason may be the runner login's text)
        print(printable(f"  {line}"), file=out)
    return ExitCode.OK


def _refuse_paused(store: StateStore, app_name: str, action: str, override: str) -> None:
    """Raise :class:`JobPaused` naming the job's pause, if one is in force.

    Raises:
        JobPaused: the job is paused.
    """
    state = store.state(app_name)
    if state is not None and pause_active(state, store.now()):
        raise JobPaused(
            app_name, action, state.paused_until, state.paused_by, state.paused_reason, override
        )


def resume(ctx: Context) -> int:
    """``--resume NAME|all``: end the job's pause (every paused job's) now."""
    store, args, out = ctx.store, ctx.args, ctx.out
    if args.resume == ALL:
        return _resume_all(ctx)
    job = ctx.job(args.resume)
    state = store.state(job.app_name)
    if state is None or state.paused_until is None or state.paused_until <= store.now():
        if args.json:
            jsonout.emit({"name": job.app_name, "resumed": False, "was": None}, out)
        else:
            print(f"{job.app_name}: not paused", file=out)
        return ExitCode.OK
    store.resume(job.app_name, ctx.audit_entry("resume", job.app_name))
    if args.json:
        jsonout.emit({"name": job.app_name, "resumed": True, "was": _pause_of(state)}, out)
        return ExitCode.OK
    print(
        printable(
            f"{job.app_name}: resumed (was paused {pause_end(state.paused_until)} "
            f"by {state.paused_by}: {state.paused_reason})"
        ),
        file=out,
    )
    return ExitCode.OK


def _resume_all(ctx: Context) -> int:
    """``--resume all``: end every pause ``--pause all`` made, each audited; a job's own pause
    (``--pause NAME``, another operator's decision) and a breach pause (``on_breach = pause``)
    stay, listed with the command that ends each."""
    store, out = ctx.store, ctx.out
    states, scopes = store.states(), store.pause_scopes()
    resumed: dict[str, dict[str, Any]] = {}
    kept: dict[str, dict[str, Any]] = {}
    for job in ctx.jobs:
        state = states.get(job.app_name)
        if state is None or job.app_name not in scopes:
            continue
        if scopes[job.app_name] != ALL:
            kept[job.app_name] = _pause_of(state)
            continue
        store.resume(job.app_name, ctx.audit_entry("resume", job.app_name, scope=ALL))
        resumed[job.app_name] = _pause_of(state)
    if ctx.args.json:
        jsonout.emit({"resumed": resumed, "kept": kept}, out)
        return ExitCode.OK
    for name, was in resumed.items():
        print(
            printable(
                f"{name}: resumed (was paused {pause_end(was['until'])} by {was['by']}: "
                f"{was['reason']})"
            ),
            file=out,
        )
    if not resumed:
        print("no job was paused by --pause all", file=out)
    for name, was in kept.items():
        print(
            printable(
                f"{name}: kept its pause {pause_end(was['until'])} by {was['by']}: {was['reason']} "
                f"(not made by --pause all; --resume {name} ends it)"
            ),
            file=out,
        )
    return ExitCode.OK


def mark_success(ctx: Context) -> int:
    store, args, out = ctx.store, ctx.args, ctx.out
    job = ctx.job(args.mark_success)
    refuse = OperatorActions(ctx.runner()).refuse_live(job.app_name, "mark it successful")
    before: list[JobState] = []

    def decide(state: JobState, now: dt.datetime) -> bool:
        refuse(state, now)
        before.append(state)
        return True

    now = store.now()
    next_run = next_run_after(now, job.schedule, True, 0)
    audit = ctx.audit_entry("mark-success", job.app_name, next_run=next_run)
    state = store.locked_change(
        job.app_name,
        "mark_success",
        decide,
        audit,
        {"next_run": next_run, "by": audit.actor, "reason": audit.reason},
    )
    if state is None:
        print(f"{job.app_name}: never ran: nothing to mark (a first run is due now)", file=out)
        return ExitCode.OK
    old = state.last_success
    before_text = (minute_text(old) if old else "never") + (
        " (a mark too)" if state.success_marked else ""
    )
    print(
        f"{job.app_name}: marked successful by {audit.actor}: {audit.reason} (an operator's "
        f"mark, not a run; the last success before it: {before_text}; errors cleared; next "
        f"run {minute_text(next_run)})",
        file=out,
    )
    return ExitCode.OK


def reset_job(ctx: Context) -> int:
    jobs, args, out = ctx.jobs, ctx.args, ctx.out
    name = ctx.state_name(args.reset_job)
    audit = ctx.audit_entry("reset", name)
    was = OperatorActions(ctx.runner()).reset(name, audit)
    if was is not None:
        ghost = "" if find_job(jobs, name) else " (it was a ghost: not configured)"
        # as --release does, name the run whose marker went (written into the log as abandoned)
        run = f" (run {was.run_id})" if was.run_id is not None else ""
        held = (
            ""
            if was.ongoing is None
            else (
                f"; discarded the marker of {was.ongoing_by or 'an unknown runner'}{run}, recorded "
                f"as abandoned: --history {name}"
            )
        )
        last = minute_text(was.last_success) if was.last_success else "never"
        errors = f", {counted(was.error_count, 'failure')} in a row" if was.error_count else ""
        forgot = f"forgot its last success ({last}){errors}, its next run and its backfill anchor"
        then = (
            "its log and run history stay; the next tick runs it as a new job"
            if not ghost
            else "its log stays"
        )
        print(printable(f"{name}: state reset{ghost}{held}: {forgot}; {then}"), file=out)
    else:
        print(f"{name}: had no state (already reset)", file=out)
    return ExitCode.OK


def release(ctx: Context) -> int:
    args, out = ctx.args, ctx.out
    name = ctx.state_name(args.release)
    released = OperatorActions(ctx.runner()).release(name, ctx.audit_entry("release", name))
    if released:
        print(
            printable(
                f"{name}: released the marker of {released}; last run, last success and backfill "
                "progress are kept"
            ),
            file=out,
        )
    else:
        print(f"{name}: not running: nothing to release", file=out)
    return ExitCode.OK


def audit(ctx: Context) -> int:
    store, args, out = ctx.store, ctx.args, ctx.out
    name = None
    if args.audit_job:
        name = ctx.subject_name(args.audit_job)
    if args.limit is not None and args.limit < 1:
        raise ConfigurationError("--limit", "must be at least 1")
    entries = AuditStore(store).audit_entries(name, args.limit or 20)
    if args.json:
        jsonout.emit(
            [
                {
                    "id": e.id,
                    "at": e.at,
                    "actor": e.actor,
                    "db_user": e.db_user,
                    "action": e.action,
                    "job": e.app_name,
                    "reason": e.reason,
                    "detail": dict(e.detail),
                    "changed": e.changed,
                }
                for e in entries
            ],
            out,
        )
        return ExitCode.OK
    if not entries:
        print("no operator actions recorded" + (f" for {name}" if name else ""), file=out)
    ended = {e.detail.get("started") for e in entries}
    for e in entries:
        detail = ", ".join(f"{k}={_detail_text(v)}" for k, v in dict(e.detail).items())
        assert e.at is not None
        # a forced run or a rerun whose end is not recorded: still going, or its command killed
        open_ = e.detail.get("outcome") == "started" and e.id not in ended
        print(  # (every field but the time and db_user may be the runner login's text)
            printable(
                f"{utc_text(e.at)}  {e.actor}{f' (db: {e.db_user})' if e.db_user else ''}  "
                f"{e.action} {e.app_name}"
                f"{f'  why: {e.reason}' if e.reason else ''}{f'  ({detail})' if detail else ''}"
            )
            + f"{'  [no end recorded: still going, or its command was killed]' if open_ else ''}"
            + f"{'  [CHANGED after it was written: --verify-audit]' if e.changed else ''}",
            file=out,
        )
    return ExitCode.OK


def _detail_text(value: Any) -> str:
    """An audit detail as ``--audit`` prints it: a time (stored as text) in the commands' one
    form (``2026-11-28 07:35:50 UTC``, whatever the session's zone), anything else as is."""
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] in " T":
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            return value
        return utc_text(moment) if moment.tzinfo is not None else value
    return str(value)


def verify_audit(ctx: Context) -> int:
    """``--verify-audit [--json]``: check the audit trail's hash chain (migration 0025), and
    report every break in one pass (a line each, oldest first; ``--json``: one document).

    Raises:
        AuditChainBroken: the chain is broken, naming how many breaks and the first (exit 1).
    """
    check = AuditStore(ctx.store).verify_audit()
    if ctx.args.json:
        jsonout.emit(check.as_json(), ctx.out)
    elif check.whole:
        newest = f" (rows up to {check.newest_id})" if check.newest_id is not None else ""
        print(f"audit trail: {check.rows} rows{newest}, hash chain whole", file=ctx.out)
    else:
        for _, problem in check.breaks:
            print(f"audit trail: {problem}", file=ctx.out)
    if not check.whole:
        row, problem = check.breaks[0]
        more = f" (and {len(check.breaks) - 1} more: see above)" if len(check.breaks) > 1 else ""
        raise AuditChainBroken(row, problem + more)
    return ExitCode.OK


def audit_ghosts(ctx: Context) -> int:
    """``--audit-ghosts``: the state rows of jobs that are no longer configured."""
    from ..nagios import ghosts

    found = ghosts(ctx.jobs, ctx.store.states())
    if not found:
        print("No ghosts: every job in the state database is configured.", file=ctx.out)
        return ExitCode.OK
    print(
        "Found the following in the state database but not available as a configured job:",
        file=ctx.out,
    )
    for name in found:
        print(f"\t{name}", file=ctx.out)
    return ExitCode.OK


def _scope(ctx: Context, name: str) -> str:
    """``*`` for ``all``, else the app name a configured job's name means."""
    return "*" if name == ALL else ctx.job(name).app_name


def mute(ctx: Context) -> int:
    """``--mute NAME|all [--until WHEN] [--replace] --reason TEXT``: a maintenance window of
    the alerts; a window of that scope in force is replaced only with ``--replace``.

    Raises:
        MuteInForce: a window of that scope is in force and ``--replace`` was not given.
    """
    store, args = AlertStore(ctx.store), ctx.args
    scope = _scope(ctx, args.mute)
    now = ctx.store.now()
    try:
        until = parse_until(args.until, now) if args.until else now + DEFAULT_MUTE
    except ValueError as exc:
        raise ConfigurationError("--until", str(exc)) from None
    before = [w for w in store.mutes(scope) if w.scope == scope]
    if not store.mute(scope, until, ctx.audit_entry("mute", scope, until=until), args.replace):
        window = next(iter(w for w in store.mutes(scope) if w.scope == scope), None)
        if window is not None:
            raise MuteInForce(
                args.mute,
                window.until,
                window.muted_by,
                window.reason,
                f"--mute {args.mute} --replace replaces that window",
            )
    what = "every job's alerts" if scope == "*" else f"{scope}'s alerts"
    runs = "the jobs still run" if scope == "*" else "the job still runs"
    replaced = (
        f" (replaced the window until {minute_text(before[0].until)} by {before[0].muted_by}: "
        f"{before[0].reason})"
        if before
        else ""
    )
    print(
        f"{what} muted until {minute_text(until)}"
        f"{' (2 h: --until to choose)' if not args.until else ''}{replaced}: none opens, ends "
        f"or repeats; {runs}; --alerts shows what it holds back; --unmute {args.mute} ends it",
        file=ctx.out,
    )
    return ExitCode.OK


def unmute(ctx: Context) -> int:
    """``--unmute NAME|all``: end a maintenance window now."""
    scope = _scope(ctx, ctx.args.unmute)
    if AlertStore(ctx.store).unmute(scope, ctx.audit_entry("unmute", scope)):
        print(f"{'every job' if scope == '*' else scope}: alerts unmuted", file=ctx.out)
    else:
        print(f"{'every job' if scope == '*' else scope}: not muted", file=ctx.out)
    return ExitCode.OK
