"""The commands of monitoring: ``--nagios`` (text or ``--json``), ``--alerts`` and
``--test-alert``. Parse, call, print: the checks are :func:`crontabber.nagios.nagios_check`,
the alerts :mod:`crontabber.alerts` (a tick's fleet record and its metrics file are
:mod:`crontabber.tick`'s).
"""

from __future__ import annotations

from typing import Any, TextIO

from .. import jsonout
from ..alerts.alerter import Alerter, tick_alerter
from ..alerts.rules import ENDING, LASTING, missed_deadlines
from ..alerts.store import AlertStore
from ..command import ExitCode
from ..errors import ConfigurationError
from ..formats import counted, one_line, printable, utc_text
from ..identity import default_holder, this_host
from ..leases import holder_gone
from ..nagios import NAGIOS_CRITICAL, nagios_check
from ..runner import lease_rules, markers_from_here, pid_alive
from .common import Context


def nagios(ctx: Context) -> int:
    """``--nagios``: print the check (text, or one JSON object with ``--json``); return its
    code."""
    overview = ctx.store.overview()
    marker = markers_from_here(lease_rules(ctx.settings, this_host()))
    result = nagios_check(
        ctx.jobs,
        overview.states,
        overview.hosts,
        overview.now,
        lambda state: marker(state, overview.now),
        ctx.settings.monitor,
        missed_deadlines(ctx.jobs, ctx.settings, overview.states, overview.now),
        {entry.name: entry.problem for entry in ctx.broken},
        overview.errors,
        ctx.settings.lease_seconds,
    )
    if ctx.args.json:
        jsonout.emit(result.as_json(), ctx.out)
    else:
        print("\n".join(result.lines), file=ctx.out)
    return result.code


def nagios_failure(exc: BaseException, args: Any, out: TextIO) -> int:
    """A check that could not be made (bad configuration, no database) is CRITICAL,
    in the format asked for; never a traceback."""
    problem = str(exc) or type(exc).__name__
    if getattr(args, "json", False):
        jsonout.emit(
            {
                "status": "CRITICAL",
                "code": NAGIOS_CRITICAL,
                "summary": f"CRITICAL - {problem}",
                "entries": [{"level": "CRITICAL", "kind": "error", "subject": "", "text": problem}],
                "perfdata": {},
            },
            out,
        )
    else:
        print(f"CRITICAL - {problem}", file=out)
    return NAGIOS_CRITICAL


def alerts(ctx: Context) -> int:
    """``--alerts [--audit-job NAME] [--limit N] [--json]``: the alerts, newest first, each
    with its notices: sent (when, by which host) or not (the error, the attempts, the next)."""
    if ctx.args.limit is not None and ctx.args.limit < 1:
        raise ConfigurationError("--limit", "must be at least 1")
    name = ctx.subject_name(ctx.args.audit_job) if ctx.args.audit_job else None
    store = AlertStore(ctx.store)
    rows = store.alerts(name, ctx.args.limit or 20)
    if ctx.args.json:
        jsonout.emit(rows, ctx.out)
        return ExitCode.OK
    windows = store.mutes(name)
    _print_mutes(ctx, windows, name)
    if not rows:
        print(
            "no alerts"
            + (f" of {name}" if name else "")
            + ("" if ctx.settings.alerts.enabled else " (no alert targets: [alerts] targets)"),
            file=ctx.out,
        )
    for row in rows:
        _print_alert(row, ctx.out)
    return ExitCode.OK


def _print_mutes(ctx: Context, windows: list[Any], name: str | None) -> None:
    """Print each maintenance window in ``windows`` (those of ``name``, or all), then, while
    one is open, the alerts it holds back now (of ``name`` only, when given)."""
    for window in windows:
        scope = "every job" if window.scope == "*" else window.scope
        print(
            printable(
                f"muted: {scope} until {utc_text(window.until)} by {window.muted_by}: "
                f"{one_line(window.reason)}"
            ),
            file=ctx.out,
        )
    if windows:
        for event in held_back_now(ctx, windows):
            if name is None or event.app_name == name:
                print(f"  not alerted (muted): {one_line(event.message)}", file=ctx.out)


def _print_alert(row: dict[str, Any], out: TextIO) -> None:
    """Print one alert ``row`` of the alert store on ``out``: its kind, job, state (open,
    ended, or a one-off event), who opened it and when, what was sent; its message; then one
    line per notice. Every field may be the runner login's text: each line is made printable
    (security review 2026-11-28, N-5)."""
    state = (
        ("open" if row["resolved_at"] is None else f"ended {utc_text(row['resolved_at'])}")
        if row["kind"] in (*LASTING, *ENDING)
        else "event"
    )
    print(
        printable(
            f"alert {row['id']}  {row['kind']}  {row['app_name']}  {state}; opened "
            f"{utc_text(row['opened_at'])} by {row['opened_by']}; {_sent_text(row)}"
        ),
        file=out,
    )
    print(f"  {one_line(row['message'])}", file=out)
    for notice in row["notices"]:
        print(
            printable(f"  {notice['target']} (notice {notice['notice']}): {_notice_text(notice)}"),
            file=out,
        )


def held_back_now(ctx: Context, windows: list[Any]) -> list[Any]:
    """The conditions the maintenance ``windows`` keep from alerting now
    (:meth:`crontabber.alerts.alerter.Alerter.held_back`), from the state as it is."""
    overview = ctx.store.overview()
    return _alerter(ctx).held_back(overview.states, overview.now, windows)


def _alerter(ctx: Context) -> Alerter:
    """The alerts of this command, held by this process."""
    rules = lease_rules(ctx.settings, this_host())
    return tick_alerter(
        ctx.settings, ctx.jobs, ctx.store, default_holder(), rules, markers_from_here(rules)
    )


def _sent_text(row: dict[str, Any]) -> str:
    """``notices: 1 of 3 sent`` (with ``in 2 rounds`` once re-alerted): what was delivered,
    never the number of notices made."""
    notices = row["notices"]
    sent = sum(1 for notice in notices if notice["sent_at"])
    rounds = f" in {row['notified']} rounds" if row["notified"] > 1 else ""
    return f"notices: {sent} of {len(notices)} sent{rounds}"


def _notice_text(notice: dict[str, Any]) -> str:

    if notice["sent_at"]:
        return f"sent {utc_text(notice['sent_at'])} by {notice['sent_by']}"
    error = f": {one_line(notice['last_error'])}" if notice["last_error"] else ""
    tries = counted(notice["attempts"], "attempt")
    if notice["given_up"]:
        return f"NOT SENT, given up{error} ({tries})"
    if notice["claimed_by"] and not notice["last_error"]:
        if holder_gone(notice["claimed_by"], this_host(), pid_alive):
            return (
                f"claimed by {notice['claimed_by']} (dead: that process no longer exists); "
                "the next tick on this host sends it again, a tick on another host after "
                f"{utc_text(notice['claim_until'])} (its claim's end)"
            )
        return (
            f"being sent by {notice['claimed_by']} (its claim lasts until "
            f"{utc_text(notice['claim_until'])})"
        )
    return f"not sent yet{error} ({tries}; next attempt {utc_text(notice['next_attempt'])})"


def test_alert(ctx: Context) -> int:
    """``--test-alert NAME``: a test alert of the job to each of its targets, now; one line
    per target; exit 5 when one was not delivered."""
    if not ctx.settings.alerts.enabled:
        raise ConfigurationError(
            "--test-alert", "no alert targets: set targets in [alerts] (see docs/alerts.md)"
        )
    job = ctx.job(ctx.args.test_alert)
    deliveries = _alerter(ctx).test(job)
    for delivery in deliveries:
        outcome = "delivered" if delivery.error is None else f"NOT delivered: {delivery.error}"
        print(
            f"{job.app_name}: test alert {delivery.alert_id} to {delivery.target}: {outcome}",
            file=ctx.out,
        )
    failed = [d for d in deliveries if d.error is not None]
    return ExitCode.JOB_FAILED if failed else ExitCode.OK
