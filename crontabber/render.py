"""Render the views as text: the ``--list-jobs`` table (100 columns by default, everything
with ``--wide``), the ``--history`` table, the ``--show-error`` and ``--logs`` reports, and the
one-line texts of a job (its DETAIL, its holder) that the dashboard shows too. Pure functions
of the views in :mod:`crontabber.views` and ``now``; times in :mod:`crontabber.formats`.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Mapping, Sequence

from .formats import (
    absolute,
    counted,
    interval,
    interval_range,
    metrics_text,
    minute_text,
    one_line,
    pause_end,
    printable,
    relative,
    short_span,
    stamp,
    took,
    until_resumed,
    utc_text,
)
from .leases import Beats, Marker, beats_missed, parse_holder
from .records import LogEntry, RunRecord
from .reruns.plan import RerunGroup
from .views import FailureView, JobStatus, JobView, Outcome, RunView, entry_outcome, value_from_repr

DEFAULT_WIDTH = 100
NO_OFFSET = dt.timedelta(0)  # a backfill job's intervals shown as its run dates
_SEP = "  "
_MORE = "..."


def fit(rows: list[list[str]], width: int | None) -> list[str]:
    """Rows as lines whose columns line up (two spaces between columns). With
    ``width``, the last column is cut (``...``) so each line fits, unless the
    other columns alone are wider (then lines are as long as they must be)."""
    count = len(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(count - 1)]
    room = (
        None
        if width is None
        else max(len(rows[0][-1]), width - sum(widths) - len(_SEP) * (count - 1))
    )
    lines = []
    for row in rows:
        last = row[-1]
        if room is not None and len(last) > room:
            last = last[: max(0, room - len(_MORE))] + _MORE
        lines.append(_SEP.join([*(cell.ljust(w) for cell, w in zip(row, widths)), last]).rstrip())
    return lines


# ---------------------------------------------------------------------------- --list-jobs


def ongoing_text(view: JobView, now: dt.datetime, beats: Beats | None = None) -> str:
    """Who holds the job: ``web-3:4242 (run 42) since 5m ago, heartbeat 3s ago``,
    with ``; expired: the next tick takes it over`` when its holder is gone, and the
    renewals a live holder missed (with ``beats``, :func:`missed_text`)."""
    ongoing = view.ongoing
    if ongoing is None:
        return "-"
    run = f" (run {ongoing.run_id})" if ongoing.run_id is not None else ""
    beat = (
        f"heartbeat {relative(ongoing.heartbeat, now)}"
        if ongoing.heartbeat is not None
        else "no heartbeat (crontabber 0.18?)"
    )
    text = (
        f"{printable(ongoing.by or 'an unknown runner')}{run} since "
        f"{relative(ongoing.since, now)}, {beat}"
    )
    if ongoing.verdict is Marker.LIVE:
        text += missed_text(ongoing.heartbeat, now, beats)
    else:
        text += f"; {ongoing.verdict.value}: the next tick takes it over"
    return text


def missed_text(
    heartbeat: dt.datetime | None, now: dt.datetime, beats: Beats | None, short: bool = False
) -> str:
    """``; 3 beats missed: taken over after 2026-11-26 14:05:10 UTC unless one comes`` (``short``:
    ``; 3 beats missed``) for a live holder whose renewals stopped (its host may be gone),
    else nothing."""
    missed = beats_missed(heartbeat, now, beats) if beats is not None else 0
    if not missed or heartbeat is None or beats is None:
        return ""
    if short:
        return f"; {missed} beats missed"
    expires = heartbeat + dt.timedelta(seconds=beats.lease_seconds)
    return f"; {missed} beats missed: taken over after {utc_text(expires)} unless one comes"


def short_host(holder: str | None, pid: bool = False) -> str:
    """``symbols-cron-2.prod.example.net:31337`` -> ``symbols-cron-2`` (with
    ``pid``: ``symbols-cron-2:31337``); the text columns have no room for domains. Escaped
    (:func:`printable`): the runner login writes it."""
    if not holder:
        return "unknown runner"
    host, number = parse_holder(holder)
    short = host.split(".", 1)[0] or holder
    return printable(f"{short}:{number}" if pid and number is not None else short)


def pause_text(view: JobView, now: dt.datetime) -> str:
    """``until 2026-11-22 18:00 UTC (in 4h) by alice@ops-1: deploy``, or ``-``."""
    if view.paused is None:
        return "-"

    def at(until: dt.datetime) -> str:
        return f"{minute_text(until)} ({relative(until, now)})"

    return (
        f"{pause_end(view.paused.until, at)} "
        f"by {one_line(view.paused.by or '?')}: "  # (the runner login can pause: its text)
        f"{one_line(view.paused.reason or '')}"
    )


def _pause_ends(until: dt.datetime, now: dt.datetime) -> str:
    """``ends in 4h``, or ``until resumed`` (a pause without an end)."""
    return "until resumed" if until_resumed(until) else f"ends {relative(until, now)}"


def detail(view: JobView, now: dt.datetime, beats: Beats | None = None) -> str:
    """The DETAIL column: what the status is about, on one line, short
    (``--wide`` has the long forms): the holder and its heartbeat (with ``beats``, the
    lease settings: the renewals a live holder missed, :func:`missed_text`), the pause,
    the error, the parent waited for."""
    if view.status is JobStatus.BROKEN and view.last_error is not None:
        return f"does not load: {one_line(view.last_error.value)}"
    if view.ongoing is not None and view.status in (JobStatus.RUNNING, JobStatus.ORPHANED):
        ongoing = view.ongoing
        beat = (
            f"beat {relative(ongoing.heartbeat, now)}"
            if ongoing.heartbeat is not None
            else "no heartbeat"
        )
        host = short_host(ongoing.by)
        if ongoing.verdict is not Marker.LIVE:
            return f"{ongoing.verdict.value}: {beat}, {host}"
        return (
            f"{short_span((now - ongoing.since).total_seconds())} on {host}, {beat}"
            + missed_text(ongoing.heartbeat, now, beats, short=True)
        )
    if view.paused is not None and view.status is JobStatus.PAUSED:
        by = one_line(view.paused.by or "?")  # (the runner login can pause: its text)
        return (
            f"{_pause_ends(view.paused.until, now)}: {one_line(view.paused.reason or '')} (by {by})"
        )
    if view.status is JobStatus.NO_HOST and view.no_host is not None:
        return view.no_host
    if view.status is JobStatus.FAILING and view.last_error is not None:
        return f"{view.error_count}x {one_line(view.last_error.summary)}"
    if view.status is JobStatus.LATE and view.deadline_missed is not None:
        return deadline_text(view, now)
    if view.status is JobStatus.WAITING:
        return str(view.waiting_for)
    if view.status is JobStatus.OVERDUE and view.late is not None:
        return f"was due {short_span(view.late.total_seconds())} ago; no tick has run it"
    if view.status is JobStatus.NEW:
        return "never ran; not due yet"
    if view.marked:
        return one_line(view.marked)
    return "-"


def deadline_text(view: JobView, now: dt.datetime) -> str:
    """``deadline missed 2m ago; waiting: ...`` (``--explain`` names the interval)."""
    missed = view.deadline_missed
    assert missed is not None
    why = f"; waiting: {view.waiting_for}" if view.waiting_for else ""
    return f"deadline missed {relative(missed.due, now)}{why}"


def list_table(
    views: Sequence[JobView],
    now: dt.datetime,
    width: int | None = DEFAULT_WIDTH,
    beats: Beats | None = None,
) -> list[str]:
    """The default ``--list-jobs`` table: short relative times, what matters
    about each job in DETAIL (its holder, its pause, its error), cut to fit
    ``width`` columns: a holder's host name without its domain, a failing
    job's error count before its error (``3x``). The last run, the class,
    pids and run ids are in :func:`wide_table`. ``beats``: the lease settings (a live
    holder's missed renewals are said)."""
    rows = [["NAME", "SCHEDULE", "STATUS", "LAST OK", "NEXT RUN", "DETAIL"]]
    for view in views:
        rows.append(
            [
                view.name,
                view.schedule.replace(" @ ", "@"),
                view.status.value,
                relative(view.last_success, now, "never") + (" (marked)" if view.marked else ""),
                relative(view.next_run, now),
                detail(view, now, beats),
            ]
        )
    return fit(rows, width)


def wide_table(views: Sequence[JobView], now: dt.datetime, beats: Beats | None = None) -> list[str]:
    """``--list-jobs --wide``: the class, absolute times, the holder, the pause
    and the whole last error (its value on one line), nothing cut."""
    rows = [
        [
            "NAME",
            "CLASS",
            "SCHEDULE",
            "STATUS",
            "LAST RUN",
            "LAST SUCCESS",
            "NEXT RUN",
            "ERRORS",
            "ONGOING",
            "PAUSED",
            "LAST ERROR",
        ]
    ]
    for view in views:
        error = "-"
        if view.last_error is not None:  # the ledger's plain line, else the whole message
            error = one_line(
                view.last_error.line or f"{view.last_error.short_type}: {view.last_error.value}"
            )
        rows.append(
            [
                view.name,
                view.class_path,
                view.schedule,
                view.status.value,
                absolute(view.last_run, now, "never"),
                absolute(view.last_success, now, "never") + (" (marked)" if view.marked else ""),
                absolute(view.next_run, now) + _local(view),
                str(view.error_count),
                ongoing_text(view, now, beats),
                pause_text(view, now),
                error,
            ]
        )
    return fit(rows, None)


def _local(view: JobView) -> str:
    """`` = 06:00 Europe/Berlin``: a zoned job's next run on its zone's clocks ('' in UTC)."""
    if view.time_zone == "UTC" or not view.next_run_local:
        return ""
    return f" = {view.next_run_local[11:16]} {view.time_zone}"


# ---------------------------------------------------------------------------- --history


def history_table(
    runs: Sequence[RunView],
    now: dt.datetime,
    is_backfill: bool,
    width: int = DEFAULT_WIDTH,
    offset: dt.timedelta = NO_OFFSET,
) -> list[str]:
    """One line per run, newest first: when it started, how long it took, who ran it,
    its run id, why it ran (scheduled, forced, rerun), how it ended, a backfill run's
    INTERVALS (``2026-11-01..2026-11-24 (24)``: a rerun of 695 days is one line; each
    run date moved by the job's ``offset``, ``BaseCronApp.data_offset``, to the data it
    covered), and
    the job's summary or the error. The run holding the job comes first, as
    ``running``, with its heartbeat. Host names lose their domain (``--json`` has
    them whole); ``--run ID`` lists one run's rows (:func:`run_rows_table`)."""
    header = ["STARTED (UTC)", "TOOK", "BY", "RUN", "KIND", "OUTCOME", "DETAIL"]
    if is_backfill:
        header.insert(6, "INTERVALS")
    rows = [header]
    for run in runs:
        span = took(run.duration(now)) + (
            "+" if run.ongoing is not None or run.outcome is Outcome.ABANDONED else ""
        )  # "+": at least (running; or dead)
        if run.ongoing is not None:
            detail = _beat(run, now)
        elif run.error is not None and run.outcome is not Outcome.OK:
            detail = (
                run.error.value
                if run.outcome in (Outcome.FENCED_OFF, Outcome.ABANDONED)
                else run.error.summary
            )
        else:
            detail = " ".join(part for part in (run.summary, _bracketed(run.metrics)) if part)
        row = [
            stamp(run.started),
            span,
            short_host(run.by, pid=True) if run.by else "-",
            str(run.run_id) if run.run_id is not None else "-",
            run.kind or "-",
            run.outcome_text,
            one_line(detail),
        ]
        if is_backfill:
            row.insert(6, _intervals([when + offset for when in run.intervals]))
        rows.append(row)
    return fit(rows, width)


def _bracketed(metrics: Mapping[str, float]) -> str:
    """A run's metrics after its summary: ``[keys_deleted=12 bytes_freed=40960]``; ''."""
    return f"[{metrics_text(metrics)}]" if metrics else ""


def _intervals(done: list[dt.datetime]) -> str:
    """``-``, ``2026-11-24``, or ``2026-11-01..2026-11-24 (24)``."""
    if not done:
        return "-"
    return interval_range(done[0], done[-1], len(done))


def run_rows_table(
    runs: Sequence[RunView],
    now: dt.datetime,
    is_backfill: bool,
    width: int = DEFAULT_WIDTH,
    offset: dt.timedelta = NO_OFFSET,
) -> list[str]:
    """``--history NAME --run ID``: one line per log row of the runs given, newest
    first; a backfill job's rows show the INTERVAL each covered (its date moved by
    ``offset``, as in :func:`history_table`) and its summary."""
    header = ["STARTED (UTC)", "TOOK", "BY", "RUN", "OUTCOME", "DETAIL"]
    if is_backfill:
        header.insert(5, "INTERVAL")
    rows = [header]
    for run in runs:
        run_id = str(run.run_id) if run.run_id is not None else "-"
        if run.ongoing is not None:
            rows.append(
                _row(
                    is_backfill,
                    stamp(run.started),
                    took(run.duration(now)) + "+",
                    short_host(run.by, pid=True) if run.by else "-",
                    run_id,
                    Outcome.RUNNING.text,
                    "-",
                    _beat(run, now),
                )
            )
        rows.extend(_entry_row(run, entry, run_id, is_backfill, offset) for entry in run.entries)
    return fit(rows, width)


def _entry_row(
    run: RunView, entry: LogEntry, run_id: str, is_backfill: bool, offset: dt.timedelta
) -> list[str]:
    """The ``--history --run`` line of one log row (``entry``) of ``run``: a failed row while
    the run goes on is ``failed``; its detail is the summary, or for a failed row the run's
    error (its value alone when fenced off or abandoned, which say it already); a backfill
    row's interval moved by ``offset``."""
    outcome = Outcome.OK if not entry.failed else run.outcome
    if run.outcome is Outcome.RUNNING and entry.failed:
        outcome = Outcome.FAILED
    detail = entry.summary or ""
    if entry.failed and run.error is not None:  # "fenced off" says LeaseLost already
        detail = (
            run.error.value
            if outcome in (Outcome.FENCED_OFF, Outcome.ABANDONED)
            else run.error.summary
        )
    done = interval(entry.success + offset) if entry.success and not entry.failed else "-"
    span = took(entry.duration) + ("+" if entry_outcome(entry) is Outcome.ABANDONED else "")
    return _row(
        is_backfill,
        stamp(entry.started),
        span,
        short_host(entry.holder, pid=True) if entry.holder else "-",
        run_id,
        outcome.text,
        done,
        one_line(detail),
    )


def _row(
    is_backfill: bool,
    started: str,
    span: str,
    by: str,
    run: str,
    outcome: str,
    interval: str,
    error: str,
) -> list[str]:
    row = [started, span, by, run, outcome, error]
    if is_backfill:
        row.insert(5, interval)
    return row


def _beat(run: RunView, now: dt.datetime) -> str:
    assert run.ongoing is not None
    beat = relative(run.ongoing.heartbeat, now, "none")
    verdict = run.ongoing.verdict
    # the verdict first: a line cut to the terminal's width keeps it
    return f"heartbeat {beat}" if verdict is Marker.LIVE else f"{verdict.value}: heartbeat {beat}"


def rerun_group_lines(group: RerunGroup, now: dt.datetime) -> list[str]:
    """``--history NAME --run ID`` of a rerun's run: the rerun as a whole (its outcome, its
    plan, every run that worked on it, the dependants' reruns it started)."""
    root = group.root
    at_once = f", up to {root.parallel} at once" if root.parallel > 1 else ""
    down = "; with its dependants" if root.downstream else ""
    lines = [
        f"rerun {root.run_id} of {root.app_name}: {group.outcome}: {len(root.done)} of "
        f"{len(root.plan)} "
        f"interval(s) done{at_once}{down}"
    ]
    for run in group.runs + group.dependants:
        role = (
            f"{run.app_name}'s rerun"
            if run.app_name != root.app_name
            else "first run"
            if run.run_id == root.run_id
            else "joined"
        )
        status = (
            f"{run.status} (its lease expired: a tick records it abandoned)"
            if run.expired
            else run.status
        )
        ended = f", ended {absolute(run.ended, now)}" if run.ended else ""
        lines.append(
            f"  run {run.run_id} ({role}) on {run.by}: {status}, "
            f"{counted(run.intervals, 'interval')}, "
            f"started {absolute(run.started, now)}{ended}"
        )
    if root.left and group.outcome != "running":
        lines.append(
            f"  left: {len(root.left)} interval(s); --rerun {root.app_name} --resume-run "
            f"{root.run_id} continues it"
        )
    return lines


# ---------------------------------------------------------------------------- --show-error


def failure_headline(failure: FailureView, now: dt.datetime) -> str:
    """``trouble: run 42 failed 2026-11-22 05:17:19 UTC (3m ago) on web-3:4242 after 0.42s``."""
    run = f"run {failure.run_id}" if failure.run_id is not None else "a run"
    verb = {Outcome.FENCED_OFF: "was fenced off", Outcome.ABANDONED: "was abandoned"}.get(
        failure.outcome, "failed"
    )
    when = f" {stamp(failure.at)} UTC ({relative(failure.at, now)})" if failure.at else ""
    where = f" on {failure.by}" if failure.by else ""
    span = f" after {took(failure.duration)}" if failure.duration is not None else ""
    if span and failure.outcome is Outcome.ABANDONED:  # when it died is not known
        span = f" after at least {took(failure.duration)} (to its last heartbeat)"
    source = (
        " (from the job's state row: the log has no row of it)" if failure.source == "state" else ""
    )
    return f"{failure.app_name}: {run} {verb}{when}{where}{span}{source}"


def failure_report(
    failure: FailureView,
    now: dt.datetime,
    record: RunRecord | None = None,
    superseded: str | None = None,
    note: str | None = None,
) -> list[str]:
    """The headline; what the run ledger's ``record`` of the run says (:func:`run_facts`);
    the ``superseded`` note (an old failure: the job is healthy now), or ``note``
    (:func:`abandoned_note`); ``Type: value`` (the short
    form of every command: the class without its module); then the traceback as Python prints it
    (the class with its module) (control characters escaped,
    :func:`~crontabber.formats.printable`)."""
    error = failure.error
    value = error.value.rstrip("\n")
    said = {one_line(f"{name}: {value}") for name in (error.type, error.short_type)}
    said.add(one_line(value))
    facts = [
        line
        for line in (run_facts(record) if record else [])
        if line.removeprefix("error: ") not in said
    ]  # the line below says it already
    lines = [
        failure_headline(failure, now),
        *facts,
        *([f"note: {note}"] if note else [f"superseded: {superseded}"] if superseded else []),
        f"{error.short_type}: {value}",
        "",
    ]
    frames = error.traceback.rstrip("\n")
    if frames:
        if not frames.startswith("Traceback"):
            lines.append("Traceback (most recent call last):")
        lines += frames.splitlines()
        lines.append(f"{error.type}: {value}")
    else:
        lines.append("(no traceback recorded)")
    # a message may carry an uploader's names: escape what a terminal would act on, line by
    # line ("\n" only: splitlines would also break at U+2028 and the like instead of showing it)
    return [printable(line) for line in "\n".join(lines).split("\n")]


def run_facts(record: RunRecord) -> list[str]:
    """The run's one-line error as the runner said it (naming the service and its address:
    ``S3 (bucket B): ...``) and the option overrides it ran with, when it has them."""
    lines = []
    if record.error:
        lines.append(f"error: {printable(one_line(_unwrapped(record.error)))}")
    if record.options:
        lines.append(f"ran with: {printable(' '.join(record.options))} (command-line overrides)")
    return lines


#: An exception's repr as the ledger keeps some errors (a run abandoned): ``Name('text')``.
_REPR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\((.*)\)$", re.DOTALL)


def _unwrapped(error: str) -> str:
    """The run ledger's error without an exception repr around it (``RunAbandoned('run 7
    on ...')`` -> ``run 7 on ...``); any other text as it is."""
    match = _REPR.match(error.strip())
    return value_from_repr(error.strip(), match.group(1)) if match else error


def abandoned_note(failure: FailureView, last_run: dt.datetime | None) -> str | None:
    """What ``--show-error`` says of the failure it shows when that is the job's newest run and
    was abandoned (its holder died; then released, taken over or reset): no failure of the job
    (not "an older failure"); None otherwise."""
    if failure.outcome is not Outcome.ABANDONED or (
        last_run is not None and (failure.at is None or failure.at < last_run)
    ):
        return None
    return (
        "the job's newest run, abandoned (its holder died): no failure of the job; its error "
        "count is 0 and the next tick runs it as scheduled"
    )


def superseded_note(error_count: int, last_run: dt.datetime | None, now: dt.datetime) -> str | None:
    """What ``--show-error`` (the last failure) says when the job's state no longer counts an
    error: the failure shown is history. None while it is failing."""
    if error_count:
        return None
    since = f"; its last run: {stamp(last_run)} UTC ({relative(last_run, now)})" if last_run else ""
    return f"the job has no error now (an older failure){since}"


# ---------------------------------------------------------------------------- --logs


def _run_line(record: RunRecord, now: dt.datetime, gone: str | None = None) -> str:
    """``chatty run 42 (scheduled) on web-3:4242, started 2026-11-25 18:00:01 UTC (3m ago),
    ended ... : failed``; a run the ledger says is running whose holder is ``gone`` (why:
    its process no longer exists, its lease expired) is not said to be running."""
    ended = (
        f"ended {absolute(record.ended, now)}"
        if record.ended
        else f"last heartbeat {absolute(record.heartbeat, now)}"
    )
    if gone and record.kind == "rerun":  # its own lane: no marker to release
        status = (
            f"not running: {gone}; the next tick, or the run taking its interval over, records it "
            f"abandoned (--rerun {record.app_name} --resume-run {record.run_id} continues the "
            "rerun)"
        )
    elif gone:
        status = (
            f"not running: {gone}; a tick takes the job over (--release {record.app_name} clears "
            "it now)"
        )
    else:
        status = record.status
    return (
        f"{record.app_name} run {record.run_id} ({record.kind}) on {record.by}, started "
        f"{absolute(record.started, now)}, {ended}: {status}"
    )


def _kept(record: RunRecord) -> str:
    if record.output_dropped:
        return (
            f"the last {record.output_bytes} bytes ({record.output_dropped} earlier bytes not kept)"
        )
    return f"all {record.output_bytes} bytes"


def output_tail(record: RunRecord, lines: int) -> list[str]:
    """``--show-error``'s end: the last ``lines`` lines of the run's kept output (nothing
    when none was kept)."""
    text = record.output.rstrip("\n").split("\n") if record.output else []
    if not text:
        return []
    shown = text[-lines:]
    count = "the last line" if len(shown) == 1 else f"the last {len(shown)} lines"
    head = (
        f"--- {count} of what run {record.run_id} logged and printed "
        f"(--logs {record.app_name} --run {record.run_id}: {_kept(record)}) ---"
    )
    return ["", head] + [printable(line) for line in shown]


def output_report(
    record: RunRecord, now: dt.datetime, gone: str | None = None, offset: dt.timedelta = NO_OFFSET
) -> list[str]:
    """``--logs``: the run in one line, its summary or error, then its kept output.
    ``gone``: why a run still ``running`` in the ledger is not (its holder is dead);
    ``offset``: the job's ``data_offset`` (its intervals as in :func:`history_table`)."""
    lines = [_run_line(record, now, gone)]
    if record.summary:
        lines.append(f"summary: {printable(record.summary)}")
    if record.metrics:
        lines.append(f"metrics: {metrics_text(record.metrics)}")
    lines += run_facts(record)
    if record.intervals and record.first_interval and record.last_interval:
        lines.append(
            "intervals: "
            + interval_range(
                record.first_interval + offset, record.last_interval + offset, record.intervals
            )
        )
    if not record.output:
        lines.append("(nothing logged or printed was kept)")
        return lines
    lines.append(f"--- {_kept(record)} of what it logged and printed, secrets masked ---")
    return lines + [printable(line) for line in record.output.rstrip("\n").split("\n")]
