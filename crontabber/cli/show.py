"""The read-only commands: ``--list-jobs [NAME ...]`` (``--wide``), ``--history NAME
[--limit N | --run ID]``, ``--show-error NAME [--run ID]`` and ``--logs NAME [--run ID]``, each
as text or ``--json``. Parse, call, print: the data is built by :mod:`crontabber.views` and
gathered by :mod:`crontabber.inspection` (which the dashboard calls too, so its JSON is the
same), the text by :mod:`crontabber.render`.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, TextIO

from .. import jsonout, render, views
from ..config.catalog import find_job
from ..errors import ConfigurationError, RunNotFound
from ..formats import one_line, printable
from ..inspection import job_runs, job_views_now, known_name, one_run
from ..leases import Beats
from ..records import RunRecord
from ..render import DEFAULT_WIDTH
from ..state import JobState, RunKind, RunStatus
from ..store import StateStore
from ..views import FailureView
from .common import Context

if TYPE_CHECKING:
    from ..inspection import JobRuns
    from ..reruns.plan import RerunGroup

DEFAULT_LIMIT = 20


def _width(out: TextIO) -> int:
    """100 columns, or the terminal's width when printing to a wider one."""
    try:
        if out.isatty():
            return max(DEFAULT_WIDTH, os.get_terminal_size(out.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return DEFAULT_WIDTH


def list_jobs(ctx: Context) -> int:
    """``--list-jobs [NAME ...]``: the table (``--wide``: every column) or ``--json``."""
    settings, jobs, store, args, out = ctx.settings, ctx.jobs, ctx.store, ctx.args, ctx.out
    found, now = job_views_now(settings, jobs, store, list(args.list_jobs), ctx.broken)
    if args.json:
        jsonout.emit(views.jobs_document(found, now), out)
        return 0
    beats = Beats(ctx.settings.heartbeat_seconds, ctx.settings.lease_seconds)
    lines = (
        render.wide_table(found, now, beats)
        if args.wide
        else render.list_table(found, now, _width(out), beats)
    )
    print("\n".join(lines), file=out)
    for line in host_lines(store, settings.lease_seconds):  # under the table
        print(one_line(line), file=out)
    _database_line(ctx)
    return 0


def host_lines(store: StateStore, lease_seconds: float) -> list[str]:
    """The hosts that need saying under the table: each drained host (``host web-1:
    draining: 2 runs left (...)``, then ``drained`` once its runs are done:
    :func:`crontabber.placement.drain_line`), and each serving host (``--serve``): ``serving
    (a pass every 60 s), last tick ...``, or ``gone`` once silent for its tick and a lease."""
    from ..formats import relative
    from ..placement import drain_line

    overview = store.overview()
    lines = [drain_line(host, overview.states) for host in overview.hosts if host.drained]
    for host in overview.hosts:
        if not host.serve_seconds:
            continue
        state = "gone: silent" if host.gone(overview.now, lease_seconds) else "serving"
        lines.append(
            f"host {host.host}: {state} (a pass every {host.serve_seconds:g} s), last tick "
            f"{relative(host.last_tick, overview.now)}"
        )
    return lines


def _offset(ctx: Context, app_name: str) -> dt.timedelta:
    """The configured job's ``data_offset`` (none for a ghost): its intervals as processed."""
    job = find_job(ctx.jobs, app_name)
    return (
        getattr(job.cls, "data_offset", render.NO_OFFSET) if job is not None else render.NO_OFFSET
    )


def _database_line(ctx: Context) -> None:
    """The last line of a table: which database it was read from (an environment variable
    may point a shell at another one than the INI file names)."""
    print(f"database: {ctx.settings.database.target}", file=ctx.out)


def _rerun_group(ctx: Context, found: JobRuns) -> RerunGroup | None:
    """The rerun a run of ``--history NAME --run ID`` belongs to, whole, when it is a
    rerun's (:meth:`crontabber.reruns.store.RerunStore.rerun_group`), else None."""
    if not found.runs or found.runs[0].kind != RunKind.RERUN.value or found.runs[0].run_id is None:
        return None
    from ..reruns.store import RerunStore

    return RerunStore(ctx.store).rerun_group(found.runs[0].run_id, ctx.settings.lease_seconds)


def history(ctx: Context) -> int:
    """``--history NAME [--limit N]``: the job's newest runs, one line per run;
    ``--run ID``: one line per log row (interval) of that run."""
    settings, jobs, store, args, out = ctx.settings, ctx.jobs, ctx.store, ctx.args, ctx.out
    if args.run is not None:
        if args.limit is not None:
            raise ConfigurationError("--limit", "lists runs; --run ID shows one")
        found = one_run(settings, jobs, store, args.history, args.run)
        group = _rerun_group(ctx, found)
        if args.json:
            jsonout.emit({**found.as_json(), "rerun": group.as_json() if group else None}, out)
        else:
            print(
                "\n".join(
                    render.run_rows_table(
                        found.runs,
                        found.now,
                        found.is_backfill,
                        _width(out),
                        _offset(ctx, found.app_name),
                    )
                ),
                file=out,
            )
            for line in render.rerun_group_lines(group, found.now) if group else ():
                print(printable(line), file=out)
            _database_line(ctx)
        return 0
    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    found = job_runs(settings, jobs, store, args.history, limit)
    app_name, runs, now = found.app_name, found.runs, found.now
    if args.json:
        jsonout.emit(found.as_json(), out)
        return 0
    if not runs:
        print(f"{app_name}: no runs in the run log (crontabber_log)", file=out)
        _database_line(ctx)
        return 0
    print(
        "\n".join(
            render.history_table(runs, now, found.is_backfill, _width(out), _offset(ctx, app_name))
        ),
        file=out,
    )
    if found.is_backfill:
        print(f"(a backfill job: --history {app_name} --run RUN lists a run's intervals)", file=out)
    if found.more:
        print(f"(older runs not shown: --limit {limit * 2})", file=out)
    _database_line(ctx)
    return 0


def show_error(ctx: Context) -> int:
    """``--show-error NAME [--run ID]``: the full error of the job's last
    failed run (or of run ID), or one line saying there is none.

    Raises:
        RunNotFound: ``--run`` names a run the log does not have.
    """
    jobs, store, args, out = ctx.jobs, ctx.store, ctx.args, ctx.out
    app_name, _ = known_name(jobs, store, args.show_error)
    state, now = store.state(app_name), store.now()
    if args.run is None:
        failure = views.last_failure(store.last_failure(app_name), state)
        message = f"{app_name}: no failed run in the run log"
    else:
        failure, message = _run_failure(store, app_name, args.run, state)
    if failure is not None:
        message = render.failure_headline(failure, now)
    record = (
        store.run_output(app_name, failure.run_id)
        if failure is not None and failure.run_id is not None
        else None
    )
    # the last failure of a job that is healthy now is history: say so
    superseded = (
        render.superseded_note(state.error_count, state.last_run, now)
        if failure is not None and state is not None and args.run is None
        else None
    )
    note = (
        render.abandoned_note(failure, state.last_run)
        if failure is not None and state is not None and not state.error_count
        else None
    )
    if args.json:
        document = views.failure_document(app_name, failure, message)
        document["run"] = record.as_json() if record is not None else None
        if failure is not None:
            document["superseded"] = None if note else superseded
            document["note"] = note
        jsonout.emit(document, out)
    elif failure is not None:
        print("\n".join(render.failure_report(failure, now, record, superseded, note)), file=out)
        tail = render.output_tail(record, SHOWN_OUTPUT_LINES) if record is not None else []
        if tail:
            print("\n".join(tail), file=out)
    else:
        print(message, file=out)
    return 0


# --show-error shows the end of the failed run's output; --logs shows all that was kept.
SHOWN_OUTPUT_LINES = 40


def logs(ctx: Context) -> int:
    """``--logs NAME [--run ID]``: what the job's newest run (or run ID) logged and
    printed, as the run ledger kept it: a header line, then the text.

    Raises:
        RunNotFound: the ledger has no such run (or none of the job: it never ran since
            migration 0012, or its runs were pruned).
    """
    jobs, store, args, out = ctx.jobs, ctx.store, ctx.args, ctx.out
    app_name, _ = known_name(jobs, store, args.logs)
    record = store.run_output(app_name, args.run)
    if record is None:
        if args.run is not None:
            raise RunNotFound(app_name, args.run)
        print(f"{app_name}: no run in the run ledger (crontabber_run) yet", file=out)
        return 0
    if args.json:
        jsonout.emit(record.as_json(), out)
        return 0
    now = store.now()
    print(
        "\n".join(
            render.output_report(
                record, now, _gone(ctx, record, now), _offset(ctx, record.app_name)
            )
        ),
        file=out,
    )
    return 0


def _gone(ctx: Context, record: RunRecord, now: dt.datetime) -> str | None:
    """Why a run the ledger still says is running is not (its marker's verdict, as
    ``--list-jobs``' ``orphaned``), or None: it is not running, or it is as far as anyone
    can tell."""
    from ..identity import this_host
    from ..leases import Marker
    from ..runner import lease_rules, markers_from_here

    if record.status != RunStatus.RUNNING.value:
        return None
    if record.kind == RunKind.RERUN.value:  # its own lane: judged by its ledger row's heartbeat
        from ..views import lane_state

        verdict = markers_from_here(lease_rules(ctx.settings, this_host()))(lane_state(record), now)
        return {
            Marker.DEAD: "its process no longer exists",
            Marker.EXPIRED: "its lease has expired",
        }.get(verdict)
    state = ctx.store.state(record.app_name)
    if state is None or state.run_id != record.run_id or state.ongoing is None:
        return "it no longer holds the job"
    return {
        Marker.DEAD: "its process no longer exists",
        Marker.EXPIRED: "its lease has expired",
        Marker.STALE: "its marker is older than max_ongoing_age_hours",
    }.get(markers_from_here(lease_rules(ctx.settings, this_host()))(state, now))


def _run_failure(
    store: StateStore, app_name: str, run_id: int, state: JobState | None
) -> tuple[FailureView | None, str]:
    """The failure of run ``run_id`` (or None) and the line saying why there is none."""
    entries = store.run_log(app_name, run_id)
    failed = [entry for entry in entries if entry.failed]
    if failed:
        return FailureView.of_entry(failed[-1]), ""
    if state is not None and state.run_id == run_id and state.ongoing is not None:
        return None, f"{app_name}: run {run_id} is running: no error (yet)"
    if not entries:
        raise RunNotFound(app_name, run_id)
    units = f"{len(entries)} intervals" if len(entries) > 1 else "1 row"
    return None, f"{app_name}: run {run_id} succeeded ({units} in the log): no error"
