"""The dashboard as HTML, rendered on the server from the same data the JSON
endpoints serve: the jobs table, a job's history page, the pipeline panels and
the fleet. Pure functions of views, documents and ``now`` (the database
clock); every text is escaped here.

Times are shown in UTC with a relative time beside them
(``<span class="rel" data-t="ISO">``) that the page's script keeps current
between refreshes. Elements carrying a number or a state for people and
tests have a ``data-k`` name (``data-k="uploads.queue_depth"``).
"""

from __future__ import annotations

import datetime as dt
import html
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

from crontabber.formats import interval_range, iso_z, one_line, relative, stamp, took, until_resumed
from crontabber.inspection import (
    ENDING,
    LASTING,
    JobStatus,
    JobView,
    Marker,
    Outcome,
    RunView,
    detail,
    rerun_group_lines,
    short_host,
)

SPARK_WIDTH, SPARK_HEIGHT, SPARK_BAR = 124, 26, 6

# What each status means to someone glancing at the page.
STATUS_TITLES = {
    JobStatus.BROKEN: "its jobs entry does not load; the other jobs run",
    JobStatus.RUNNING: "a run holds the job and its lease is live",
    JobStatus.ORPHANED: "its runner is gone; the next tick takes it over",
    JobStatus.PAUSED: "paused by an operator",
    JobStatus.NO_HOST: (
        "no live host may run it (its hosts tags: none carries one, or all are drained)"
    ),
    JobStatus.FAILING: "its last attempt failed",
    JobStatus.LATE: "its next interval is past its deadline",
    JobStatus.WAITING: "due, but a parent blocks it",
    JobStatus.OVERDUE: "due for too long and no tick ran it",
    JobStatus.DUE: "the next tick runs it",
    JobStatus.NEW: "never ran, not due yet",
    JobStatus.OK: "its last run succeeded",
}


#: The overview's order: the jobs that need someone first (a failing job is never below the
#: fold behind healthy ones), by how urgent; config order within a status and for the rest.
ATTENTION = {
    status: rank
    for rank, status in enumerate(
        (
            JobStatus.BROKEN,
            JobStatus.NO_HOST,
            JobStatus.FAILING,
            JobStatus.ORPHANED,
            JobStatus.LATE,
            JobStatus.OVERDUE,
            JobStatus.WAITING,
            JobStatus.PAUSED,
        )
    )
}


# The outcomes a chart marks and counts as failed.
UNSUCCESSFUL = (
    Outcome.FAILED,
    Outcome.FENCED_OFF,
    Outcome.ABANDONED,
    Outcome.TIMED_OUT,
    Outcome.STOPPED,
)


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def when_html(when: dt.datetime | None, now: dt.datetime, empty: str = "-") -> str:
    """``2026-11-23 12:00:00`` and ``(3m ago)`` that the script keeps current."""
    if when is None:
        return f'<span class="none">{esc(empty)}</span>'
    return (
        f'<time datetime="{iso_z(when)}">{stamp(when)}</time> '
        f'<span class="rel" data-t="{iso_z(when)}">{esc(relative(when, now))}</span>'
    )


def pause_until_html(until: dt.datetime, now: dt.datetime) -> str:
    """``until <time>`` of a pause, or ``until resumed`` for one without an end
    (``on_breach = pause``): never a made-up date."""
    if until_resumed(until):
        return '<span class="until-resumed">until resumed</span>'
    return f"until {when_html(until, now)}"


def number(value: int | float | None, key: str, empty: str = "-") -> str:
    shown = empty if value is None else f"{value:,}"
    return f'<b class="num" data-k="{esc(key)}">{esc(shown)}</b>'


def size(count: int) -> str:
    """Bytes in the largest binary unit that keeps a number of at least 1."""
    value, unit = float(count), "B"
    for name in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    return f"{count:,} B" if unit == "B" else f"{value:.1f} {unit}"


def table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table of already-escaped cells."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return '<p class="none">none</p>'
    head_html = "".join(f"<th>{esc(name)}</th>" for name in head)
    return f'<table class="{cls}"><thead><tr>{head_html}</tr></thead><tbody>{body}</tbody></table>'


# ---------------------------------------------------------------------------- jobs


def sparkline(runs: Sequence[RunView], now: dt.datetime) -> str:
    """Recent run durations as bars, oldest left; failures red and marked
    with a dot above, the running run blue (its duration so far), one whose holder is gone
    orange (orphaned, as its row says)."""
    shown = list(reversed(runs[: SPARK_WIDTH // SPARK_BAR]))
    if not shown:
        return '<span class="none">no runs</span>'
    # Scaled to the longest finished run: a run in progress for an hour would
    # flatten every other bar (its bar is cut at the top instead).
    finished = [run.duration(now).total_seconds() for run in shown if run.ended is not None]
    longest = max(finished or [run.duration(now).total_seconds() for run in shown]) or 1.0
    bars = []
    for index, run in enumerate(shown):
        seconds = run.duration(now).total_seconds()
        height = max(2.0, (SPARK_HEIGHT - 6) * min(1.0, seconds / longest))
        x, y = index * SPARK_BAR, SPARK_HEIGHT - height
        gone = _gone(run)
        shown_as = f"orphaned ({gone})" if gone else run.outcome_text
        label = f"{stamp(run.started)} UTC: {took(run.duration(now))} {shown_as}"
        bars.append(
            f'<rect class="bar {"orphaned" if gone else run.outcome.value}" x="{x}" y="{y:.1f}" '
            f'width="{SPARK_BAR - 1}" height="{height:.1f}"><title>{esc(label)}</title></rect>'
        )
        if run.outcome in UNSUCCESSFUL:
            bars.append(f'<circle class="mark" cx="{x + (SPARK_BAR - 1) / 2}" cy="2.5" r="2"/>')
    failed = sum(run.outcome in UNSUCCESSFUL for run in shown)
    return (
        f'<svg class="spark" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" role="img" '
        f'data-runs="{len(shown)}" data-failed="{failed}" '
        f'aria-label="{len(shown)} recent runs, {failed} failed">{"".join(bars)}</svg>'
    )


def status_html(view: JobView, now: dt.datetime) -> str:
    """The status word and what it is about, with live relative times."""
    word = (
        f'<span class="badge {view.status.value}" data-k="status" '
        f'title="{esc(STATUS_TITLES[view.status])}">{view.status.value}</span>'
    )
    ongoing, paused = view.ongoing, view.paused
    if ongoing is not None and view.status in (JobStatus.RUNNING, JobStatus.ORPHANED):
        verdict = "" if ongoing.verdict is Marker.LIVE else f"{ongoing.verdict.value}: "
        run = f" (run {ongoing.run_id})" if ongoing.run_id is not None else ""
        about = (
            f"{esc(verdict)}since {when_html(ongoing.since, now)} by "
            f'<span class="holder">{esc(ongoing.by or "an unknown runner")}</span>{esc(run)}, '
            f"last heartbeat {when_html(ongoing.heartbeat, now, 'none')}"
        )
    elif paused is not None and view.status is JobStatus.PAUSED:
        about = (
            f"{pause_until_html(paused.until, now)} by {esc(paused.by or '?')}: "
            f'<span class="reason">{esc(paused.reason or "no reason given")}</span>'
        )
    elif view.status is JobStatus.BROKEN and view.last_error is not None:
        about = f'<span class="errs">does not load: {esc(one_line(view.last_error.value))}</span>'
    elif view.status is JobStatus.FAILING:
        times = "once" if view.error_count == 1 else f"{view.error_count} times in a row"
        about = f"failed {times}, last {when_html(view.last_run, now)}"
    else:
        text = detail(view, now)
        about = "" if text == "-" else esc(text)
    return f'{word}<div class="about">{about}</div>' if about else word


def traceback_html(error: Any) -> str:
    """An error as Python prints it: the frames (crontabber stores frames
    only), then ``Type: value``."""
    frames = error.traceback.rstrip() or "  (no traceback recorded)"
    return (
        f'<pre class="traceback">Traceback (most recent call last):\n{esc(frames)}\n'
        f"{esc(error.type)}: {esc(error.value)}</pre>"
    )


def error_html(view: JobView) -> str:
    """The last error in one line; its traceback one click away."""
    error = view.last_error
    if error is None or not view.error_count:
        return '<span class="none">-</span>'
    return (
        f'<details class="error" id="err-{esc(view.name)}"><summary>{esc(error.summary)}'
        f"</summary>{traceback_html(error)}</details>"
    )


def next_run_html(view: JobView, now: dt.datetime) -> str:
    """The next run as a tick would make it: a paused job's once its pause ends (``when
    resumed`` for a pause without an end), never a time that has passed shown as ``(now)``."""
    paused = view.paused
    if paused is None or view.status is not JobStatus.PAUSED:
        return when_html(view.next_run, now)
    if until_resumed(paused.until):
        return '<span class="none" data-k="next.paused">when resumed</span>'
    if view.next_run is not None and view.next_run > paused.until:
        return when_html(view.next_run, now)
    return (
        f'{when_html(paused.until, now)}<div class="sched" data-k="next.paused">when the pause '
        "ends</div>"
    )


def job_row(view: JobView, runs: Sequence[RunView], now: dt.datetime) -> str:
    name = (
        f'<a class="job" href="jobs/{quote(view.name)}">{esc(view.name)}</a>'
        f'<div class="sched">{esc(view.schedule)}</div>'
    )
    errors = f'<span class="{"errs" if view.error_count else "zero"}">{view.error_count}</span>'
    success = when_html(view.last_success, now, "never") + (  # an operator's mark, not a run
        f'<div class="marked">{esc(view.marked)}</div>' if view.marked else ""
    )
    cells = [
        name,
        status_html(view, now),
        success,
        next_run_html(view, now),
        errors,
        sparkline(runs, now),
        error_html(view),
    ]
    return (
        f'<tr class="st-{view.status.value}" data-job="{esc(view.name)}" '
        f'data-status="{view.status.value}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
    )


def jobs_panel(
    views: Sequence[JobView], runs: Mapping[str, Sequence[RunView]], now: dt.datetime
) -> str:
    """The table of every configured job: those that need someone first (:data:`ATTENTION`),
    then the rest, in config order within each."""
    head = "".join(
        f"<th>{name}</th>"
        for name in (
            "job",
            "status",
            "last success",
            "next run",
            "errors",
            "recent runs",
            "last error",
        )
    )
    ordered = sorted(views, key=lambda view: ATTENTION.get(view.status, len(ATTENTION)))
    rows = "".join(job_row(view, runs.get(view.name, ()), now) for view in ordered)
    counts: dict[str, int] = {}
    for view in views:
        counts[view.status.value] = counts.get(view.status.value, 0) + 1
    summary = " · ".join(
        f'<span class="badge {name}">{count} {name}</span>' for name, count in counts.items()
    )
    return (
        f"<h2>Jobs <small>{len(views)} configured: {summary}</small></h2>"
        f'<table class="jobs"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    )


# ---------------------------------------------------------------------------- history


def history_rows(
    runs: Sequence[RunView], now: dt.datetime, is_backfill: bool = False
) -> list[list[str]]:
    """One row per run; a backfill job's runs name the intervals they did (one too)."""
    rows = []
    for run in runs:
        error = ""
        if run.error is not None:
            error = (
                f'<details class="error"><summary>{esc(run.error.summary)}</summary>'
                f"{traceback_html(run.error)}</details>"
            )
        elif run.ongoing is not None:
            error = f"heartbeat {when_html(run.ongoing.heartbeat, now, 'none')}"
        elif run.summary:
            error = f'<span class="summary">{esc(run.summary)}</span>'
        # "+": at least (still running; or abandoned: up to its last heartbeat), as --history
        span = took(run.duration(now)) + (
            "+" if run.outcome in (Outcome.RUNNING, Outcome.ABANDONED) else ""
        )
        done = run.intervals
        covered = (
            f' <small data-k="run.intervals">{interval_range(done[0], done[-1], len(done))}</small>'
            if done and (is_backfill or len(done) > 1)
            else ""
        )
        rows.append(
            [
                when_html(run.started, now),
                esc(span),
                esc(short_host(run.by, pid=True) if run.by else "-"),
                esc(run.run_id if run.run_id is not None else "-"),
                esc(run.kind or "-"),
                f"{outcome_html(run)}{covered}",
                error,
            ]
        )
    return rows


def _gone(run: RunView) -> str | None:
    """The verdict (``dead``, ``expired``, ``stale``) of a running run whose holder is gone;
    None for any other run."""
    ongoing = run.ongoing
    if run.outcome is not Outcome.RUNNING or ongoing is None or ongoing.verdict is Marker.LIVE:
        return None
    return ongoing.verdict.value


def outcome_html(run: RunView) -> str:
    """A run's outcome badge; the run holding the job whose holder is gone (dead, expired) is
    ``orphaned``, as the job's status says, not a blue ``running``."""
    gone = _gone(run)
    if gone:
        return (
            f'<span class="badge {JobStatus.ORPHANED.value}" data-k="run.orphaned">'
            f"{JobStatus.ORPHANED.value} ({esc(gone)})</span>"
        )
    return f'<span class="badge {run.outcome.value}">{esc(run.outcome_text)}</span>'


def reruns_panel(groups: Sequence[Any], now: dt.datetime) -> str:
    """The reruns the job's recent runs belong to (``RerunGroup``s:
    :func:`crontabber.inspection.rerun_groups`), each whole, as ``--history NAME --run ID``
    ends: its outcome and how many of its intervals are done, every run of it (killed ones
    too: their ledger status) and what is left, with the command that continues it."""
    parts = []
    for group in groups:
        head, *rest = rerun_group_lines(group, now)
        parts.append(
            f'<div class="rerun" data-k="rerun.{group.root.run_id}">'
            f'<p><span class="badge {esc(group.outcome)}">{esc(group.outcome)}</span> '
            f"{esc(head)}</p>"
            f'<pre class="rerun-runs">{esc(chr(10).join(line.strip() for line in rest))}</pre>'
            "</div>"
        )
    return "<h2>Reruns</h2>" + "".join(parts)


def state_panel(app_name: str, view: JobView | None, now: dt.datetime) -> str:
    """The job as it stands, above its runs: status (and what it is about), next run, last
    success, errors in a row and the last one, pause, missed deadline, parents (what
    ``--list-jobs NAME`` says); a ghost (no longer configured) says so."""
    if view is None:
        return (
            f'<h2>{esc(app_name)} now</h2><p class="warn" data-k="job.ghost">not configured: '
            "a ghost (its state and runs remain; --reset-job forgets them)</p>"
        )
    error = (
        f"{view.error_count} in a row; last: {esc(one_line(view.last_error.summary))}"
        if view.error_count and view.last_error is not None
        else "0"
    )
    pause = (
        f"{pause_until_html(view.paused.until, now)} by {esc(view.paused.by or '?')}: "
        f'<span class="reason">{esc(view.paused.reason or "no reason given")}</span>'
        if view.paused is not None
        else '<span class="none">not paused</span>'
    )
    missed = view.deadline_missed
    deadline = (
        f'<span class="warn">missed {when_html(missed.due, now)}: the interval of '
        f"{esc(stamp(missed.interval))} UTC is not done</span>"
        if missed is not None
        else '<span class="none">none missed</span>'
    )
    rows = [
        ("status", status_html(view, now)),
        ("schedule", esc(view.schedule)),
        ("next run", _next_run_cell(view, now)),
        ("last success", when_html(view.last_success, now, "never")),
        ("errors", error),
        ("pause", pause),
        ("deadline", deadline),
        ("depends on", esc(", ".join(view.depends_on)) or '<span class="none">-</span>'),
    ]
    body = "".join(
        f'<tr><th>{esc(name)}</th><td data-k="job.{esc(name.replace(" ", "_"))}">{cell}</td></tr>'
        for name, cell in rows
    )
    return f'<h2>{esc(app_name)} now</h2><table class="state small"><tbody>{body}</tbody></table>'


def _next_run_cell(view: JobView, now: dt.datetime) -> str:
    """The next run's cell of :func:`state_panel`: :func:`next_run_html`, then its time of day
    in the job's zone when that is not UTC."""
    local = (
        f' <span class="local">({esc(view.next_run_local[11:16])} {esc(view.time_zone)})</span>'
        if view.time_zone != "UTC" and view.next_run_local
        else ""
    )
    return next_run_html(view, now) + local


def history_panel(
    app_name: str, runs: Sequence[RunView], more: bool, now: dt.datetime, is_backfill: bool = False
) -> str:
    older = '<p class="none">older runs not shown</p>' if more else ""
    return (
        f"<h2>Runs of {esc(app_name)} <small>newest first</small></h2>"
        f'<div class="sparkbig">{sparkline(runs, now)}</div>'
        + table(
            ["started (UTC)", "took", "host", "run", "kind", "outcome", "summary / error"],
            history_rows(runs, now, is_backfill),
            "runs",
        )
        + older
    )


def output_panel(record: Any, now: dt.datetime, runs: Sequence[RunView] = ()) -> str:
    """The newest run's kept output (``--logs NAME``): what on-call would otherwise read
    on the host that ran it. Escaped; the runner masked the secrets before storing it. Its
    status is the ledger's, but a run the ledger says is running whose holder is gone (among
    ``runs``, the history's) is ``orphaned (dead)``, as its row says."""
    if record is None:
        return '<h2>Output</h2><p class="none">no run in the run ledger yet</p>'
    kept = (
        f"the last {size(record.output_bytes)} ({size(record.output_dropped)} earlier not kept)"
        if record.output_dropped
        else size(record.output_bytes)
    )
    gone = next((_gone(run) for run in runs if run.run_id == record.run_id), None)
    status = f"orphaned ({gone})" if gone else record.status
    head = (
        f"<h2>Output of run {esc(record.run_id)} <small>{esc(status)}, "
        f"{esc(record.kind)}, on {esc(short_host(record.by, pid=True))}, {kept}; "
        f"<code>--logs {esc(record.app_name)} --run {esc(record.run_id)}</code></small></h2>"
    )
    if not record.output:
        return head + '<p class="none">nothing logged or printed was kept</p>'
    return head + '<pre class="output">' + esc(record.output) + "</pre>"


# ---------------------------------------------------------------------------- pipeline


def _card(title: str, body: str, error: str | None = None) -> str:
    warn = f'<p class="warn">{esc(error)}</p>' if error else ""
    return f'<section class="card"><h3>{esc(title)}</h3>{warn}{body}</section>'


def uploads_card(panel: Mapping[str, Any], now: dt.datetime) -> str:
    age = panel["oldest_pending_age_seconds"]
    body = (
        f"<p>queue depth {number(panel['queue_depth'], 'uploads.queue_depth')} "
        f"({number(panel['pending'], 'uploads.pending')} pending, "
        f"{number(panel['processing'], 'uploads.processing')} processing)</p>"
        f"<p>oldest pending: {when_html(panel['oldest_pending'], now, 'none')}"
        + (
            f' <span data-k="uploads.oldest_age" data-v="{age:.0f}"></span>'
            if age is not None
            else ""
        )
        + f"</p><p>failed in the last {panel['failed_window_hours']:g} h: "
        f"{number(panel['failed_total'], 'uploads.failed_total')}</p>"
    )
    rows = [
        [
            esc(f["id"]),
            esc(f["filename"]),
            when_html(f["failed_at"], now),
            f'<span class="reason">{esc(f["error"] or "-")}</span>',
        ]
        for f in panel["failed"]
    ]
    replaced = [
        [
            f'<code class="id" title="{esc(r["key"])}">{esc(r["key"])}</code>',
            esc(r["upload_id"]),
            esc(_previous(r["previous"])),
            when_html(r["replaced_at"], now),
        ]
        for r in panel.get("replaced", [])
    ]
    return _card(
        "Uploads",
        body
        + table(["id", "file", "failed", "reason"], rows, "small")
        + f"<h4>files replaced in the last {panel['failed_window_hours']:g} h: "
        f"{number(panel.get('replaced_total', 0), 'uploads.replaced_total')}</h4>"
        + table(["key", "by upload", "replaced", "when"], replaced, "small"),
    )


def _previous(previous: Mapping[str, Any]) -> str:
    """What a replaced file held: ``upload 20, 1234 bytes, MD5 9e10…``."""
    upload = (
        f"upload {previous['upload_id']}" if previous["upload_id"] is not None else "unknown upload"
    )
    size = f"{previous['size']} bytes" if previous["size"] is not None else "size unknown"
    return f"{upload}, {size}, MD5 {previous['md5'] or 'unknown'}"


def missing_card(panel: Mapping[str, Any], now: dt.datetime) -> str:
    more = "+" if panel.get("waiting_capped") else ""  # the listing stopped at its bound
    body = (
        f"<p>batches waiting {number(panel['batches_waiting'], 'missing.waiting')}{more}"
        f" (oldest: {when_html(panel['oldest_waiting'], now, 'none')})</p>"
        f"<p>quarantined {number(panel['quarantined_total'], 'missing.quarantined')}</p>"
    )
    quarantined = [
        [
            esc(q["key"]),
            esc(q["events"]),
            when_html(q["quarantined_at"], now),
            f'<span class="reason">{esc(q["reason"] or "-")}</span>',
        ]
        for q in panel["quarantined"]
    ]
    # a debug id is 33 characters without a break: one line, cut with an ellipsis, whole on
    # hover (it wrapped over five lines in a quarter-width card at 1366x768)
    top = [
        [
            esc(m["debug_file"]),
            f'<code class="id" title="{esc(m["debug_id"])}">{esc(m["debug_id"])}</code>',
            esc(m["code_file"] or "-"),
            number(m["count"], f"missing.top.{m['debug_file']}"),
        ]
        for m in panel["most_missed"]
    ]
    return _card(
        "Missing symbols",
        body
        + table(["batch", "events", "quarantined", "reason"], quarantined, "small")
        + f"<h4>most missed today ({panel['day']})</h4>"
        + table(["debug file", "debug id", "code file", "lookups"], top, "small"),
        panel["waiting_error"],
    )


def search_card(panel: Mapping[str, Any], now: dt.datetime) -> str:
    rebuild, mark = panel["last_rebuild"], panel["watermark"]
    body = (
        f"<p>alias <code>{esc(panel['alias'] or '-')}</code> → "
        f'<code data-k="search.index">{esc(panel["index"] or "-")}</code></p>'
        f"<p>documents {number(panel['documents'], 'search.documents')}</p>"
    )
    if rebuild is not None:
        body += (
            f"<p>last rebuild: ended {when_html(rebuild['ended'], now)}, took "
            f'<b data-k="search.rebuild_took">{esc(took(rebuild["duration"]))}</b> '
            f"(run {esc(rebuild['run_id'])} on {esc(short_host(rebuild['by']))})</p>"
        )
    else:
        body += '<p class="none">no successful rebuild in the run log</p>'
    if mark is not None:
        body += (
            f"<p>new uploads indexed up to {when_html(mark['indexed_to'], now)} "
            f"into <code>{esc(mark['index_name'])}</code></p>"
        )
    return _card("Search index", body, panel["error"])


def prune_card(panel: Mapping[str, Any], now: dt.datetime) -> str:
    run = panel["last_run"]
    if run is None:
        return _card("Last prune", '<p class="none">no prune run yet</p>')
    state = "dry run, " if run["dry_run"] else ""
    state += "capped, " if run["capped"] else ""
    body = (
        f"<p>run {esc(run['id'])} ({esc(state)}{esc(run['holder'])}) started "
        f"{when_html(run['started_at'], now)}, "
        + (
            f"finished {when_html(run['finished_at'], now)}"
            if run["finished_at"]
            else '<span class="warn">did not finish</span>'
        )
        + "</p>"
        + f"<p>{number(run['keys_deleted'], 'prune.keys')} keys, "
        f'<span title="{run["bytes_freed"]:,} bytes">{esc(size(run["bytes_freed"]))}</span> '
        f'<span class="hidden" data-k="prune.bytes">{run["bytes_freed"]}</span>'
        f"{', ' + str(run['errors']) + ' errors' if run['errors'] else ''}</p>"
    )
    rows = [
        [
            esc(r["rule"]),
            number(r["keys_deleted"], f"prune.rule.{r['rule']}.keys"),
            f'<span title="{r["bytes_freed"]:,} bytes">{esc(size(r["bytes_freed"]))}</span>',
            esc(r["errors"]),
        ]
        for r in run["rules"]
    ]
    return _card("Last prune", body + table(["rule", "keys", "bytes", "errors"], rows, "small"))


#: Each pipeline card: its title and how it is drawn from its panel.
CARDS = (
    ("uploads", "Uploads", uploads_card),
    ("missing_symbols", "Missing symbols", missing_card),
    ("search_index", "Search index", search_card),
    ("prune", "Last prune", prune_card),
)


def pipeline_panel(document: Mapping[str, Any]) -> str:
    """The cards; one whose panel is unavailable (its job not configured here, or its query
    failed) says so, and the others are drawn all the same."""
    now, cards = document["now"], []
    for key, title, card in CARDS:
        panel = document[key]
        if "unavailable" in panel:
            cls = "warn" if panel["query_failed"] else "none"
            cards.append(
                _card(
                    title,
                    f'<p class="{cls}" data-k="{key}.unavailable">{esc(panel["unavailable"])}</p>',
                )
            )
        else:
            cards.append(card(panel, now))
    return '<h2>Pipeline</h2><div class="cards">' + "".join(cards) + "</div>"


def error_panel(title: str, message: str) -> str:
    """A panel of the overview that could not be drawn: its title and why (the others are)."""
    return f'<h2>{esc(title)}</h2><p class="warn" data-k="panel.error">{esc(message)}</p>'


# ---------------------------------------------------------------------------- health


def health_panel(check: Mapping[str, Any], views: Sequence[JobView]) -> str:
    """The overall health, first on the page (visible without scrolling at 1366x768):
    ``--nagios``'s status and summary line, and how many jobs are in each status that
    needs someone (broken, no-host, failing, late, overdue, orphaned, waiting, paused)."""
    status = str(check["status"])
    counts = {s: sum(view.status is s for view in views) for s in JobStatus}
    needing = [
        f'<span class="st {s.value}" data-k="health.{s.value}">{counts[s]} {s.value}</span>'
        for s in (
            JobStatus.BROKEN,
            JobStatus.NO_HOST,
            JobStatus.FAILING,
            JobStatus.LATE,
            JobStatus.OVERDUE,
            JobStatus.ORPHANED,
            JobStatus.WAITING,
            JobStatus.PAUSED,
        )
        if counts[s]
    ]
    running = counts[JobStatus.RUNNING]
    jobs = f"{len(views)} jobs" + (f", {running} running" if running else "")
    return (
        f'<div class="health nagios-{esc(status.lower())}">'
        f'<span class="badge big nagios-{esc(status.lower())}" data-k="health.status">'
        f'{esc(status)}</span> <span class="line">{esc(health_line(check, views))}</span> '
        f'<span class="counts">{" ".join(needing) or "nothing needs attention"}; {jobs}</span>'
        "</div>"
    )


def health_line(check: Mapping[str, Any], views: Sequence[JobView]) -> str:
    """``--nagios``'s status line, each failing job as ``name: Type: message`` (its error as
    the job rows show it) rather than crontabber's ``name (Class) | <class '...'> | value``."""
    if check["status"] == "OK":
        return str(check["summary"])
    by_name = {view.name: view for view in views}
    parts = []
    for entry in check["entries"]:
        if entry["level"] != check["status"]:
            continue
        view = by_name.get(entry["subject"])
        if entry["kind"] == "failing" and view is not None and view.last_error is not None:
            parts.append(f"{view.name}: {one_line(view.last_error.summary)}")
        else:
            parts.append(str(entry["text"]))
    return f"{check['status']} - " + "; ".join(parts)


def plain_summary(check: Mapping[str, Any]) -> str:
    """``--nagios``'s status line in the dashboard's words: its entries of the status's level
    (a failing job's error as its one plain line), not crontabber's ``name (Class) |
    <class '...'> | value`` (which ``--nagios`` keeps for crontabber's monitors)."""
    if check["status"] == "OK":
        return str(check["summary"])
    return f"{check['status']} - " + "; ".join(
        str(entry["text"]) for entry in check["entries"] if entry["level"] == check["status"]
    )


# ---------------------------------------------------------------------------- alerts


def _notice_html(notice: Mapping[str, Any], now: dt.datetime) -> str:
    """One notice: sent (when, by whom), or not (its error, attempts, next attempt)."""
    target = f"{esc(notice['target'])}"
    if notice["sent_at"]:
        return f"{target}: sent {when_html(notice['sent_at'], now)}"
    error = f": {esc(one_line(notice['last_error']))}" if notice["last_error"] else ""
    if notice["given_up"]:
        return (
            f'<span class="errs">{target}: NOT SENT, given up{error} ({notice["attempts"]} '
            "attempts)</span>"
        )
    return (
        f'<span class="errs">{target}: not sent yet{error} ({notice["attempts"]} attempts, next '
        f"{when_html(notice['next_attempt'], now)})</span>"
    )


def alerts_panel(document: Mapping[str, Any]) -> str:
    """The newest alerts with how each notice went (``--alerts``), the open ones and the
    notices not delivered counted in the heading, and the maintenance windows in force."""
    now, alerts = document["now"], document["alerts"]
    if not document["enabled"] and not alerts:
        return '<h2>Alerts</h2><p class="none">no alert targets ([alerts] targets)</p>'
    open_count = sum(a["resolved_at"] is None and a["kind"] in (*LASTING, *ENDING) for a in alerts)
    undelivered = sum(not n["sent_at"] for a in alerts for n in a["notices"])
    mutes = "".join(
        f'<p class="summary">muted: {esc("every job" if m["scope"] == "*" else m["scope"])}'
        f" until {when_html(m['until'], now)} by {esc(m['muted_by'])}: "
        f"{esc(one_line(m['reason']))}</p>"
        for m in document["mutes"]
    )
    mutes += "".join(
        '<p class="warn" data-k="alerts.held_back">not alerted (muted): '
        f"{esc(one_line(e['message']))}</p>"
        for e in document.get("held_back", ())
    )
    rows = []
    for alert in alerts:
        state = (
            ("open" if alert["resolved_at"] is None else "ended")
            if alert["kind"] in (*LASTING, *ENDING)
            else "event"
        )
        rows.append(
            [
                esc(alert["id"]),
                when_html(alert["opened_at"], now),
                esc(alert["app_name"]),
                f'<span class="st {esc(alert["kind"])}">{esc(alert["kind"])}</span> {state}',
                esc(one_line(alert["message"])),
                "<br>".join(_notice_html(n, now) for n in alert["notices"]) or "-",
            ]
        )
    count = f"{open_count} open, {undelivered} notice(s) not delivered"
    return f'<h2>Alerts <small data-k="alerts.summary">{count}</small></h2>{mutes}' + (
        table(["id", "opened", "job", "kind", "message", "notices"], rows, "small")
        if rows
        else '<p class="none">no alerts</p>'
    )


# ---------------------------------------------------------------------------- fleet


def fleet_panel(document: Mapping[str, Any]) -> str:
    now, check = document["now"], document["check"]
    limit = document["max_skew_seconds"]
    rows = []
    for host in document["hosts"]:
        skew = host["skew_seconds"]
        cls = "errs" if host["recent"] and abs(skew) > limit else ""
        behind = ", ".join(f"{number:04d}" for number in host.get("schema_behind") or ())
        code = (
            f'<span class="errs">older than the schema (lacks {esc(behind)}): claims nothing</span>'
            if behind
            else "current"
        )
        drain = host.get("drain")
        rows.append(
            [
                esc(host["host"]),
                esc(host["version"]),
                code,
                when_html(host["last_tick"], now),
                f'<span class="{cls}">{skew:+.1f} s</span>',
                (
                    '<span class="errs">gone (serving, silent)</span>'
                    if host.get("gone")
                    else f"serving (every {host['serving']:g} s)"
                    if host.get("serving")
                    else "yes"
                    if host["recent"]
                    else '<span class="none">silent</span>'
                ),
                esc(", ".join(host.get("tags") or ())) or "-",
                f'<span class="errs">{esc(one_line(drain))}</span>' if drain else "-",
            ]
        )
    return (
        f'<h2>Fleet <span class="badge nagios-{esc(check["status"].lower())}" '
        f'data-k="check.status">{esc(check["status"])}</span></h2>'
        f'<p class="summary">{esc(plain_summary(check))}</p>'
        + table(
            ["host", "version", "code", "last tick", "clock skew", "in the fleet", "tags", "drain"],
            rows,
            "small",
        )
    )


# ---------------------------------------------------------------------------- pages


def page(
    title: str,
    now: dt.datetime,
    panels: Mapping[str, str],
    refresh_seconds: float,
    back: bool = False,
) -> str:
    """A whole page: ``panels`` (id -> HTML) in order; the script refreshes
    each panel from ``panels.json`` of the same page every ``refresh_seconds``."""
    sections = "".join(
        f'<section id="{esc(key)}" class="panel">{body}</section>' for key, body in panels.items()
    )
    nav = '<a href="../">← all jobs</a> · ' if back else ""
    root = "../" if back else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<link rel="stylesheet" href="{root}static/dashboard.css">
<script src="{root}static/dashboard.js" defer></script>
</head><body data-now="{iso_z(now)}" data-refresh="{refresh_seconds:g}">
<header><h1>{esc(title)}</h1><span class="clock">{nav}database clock
<time id="now" datetime="{iso_z(now)}">{stamp(now)}</time> UTC ·
<span id="updated">updated <span class="rel" data-t="{iso_z(now)}">now</span></span>
<span id="stale" class="warn" hidden></span></span></header>
<main>{sections}</main>
<footer>read-only: operator actions stay on the audited command line
(<code>python -m crontabber --pause / --resume / --rerun / --mark-success</code>)</footer>
</body></html>
"""
