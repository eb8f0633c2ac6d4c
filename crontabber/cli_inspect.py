"""The read-only commands of the command line: ``--list-jobs [NAME ...]``
(``--wide``), ``--history NAME [--limit N | --run ID]``, ``--show-error NAME
[--run ID]`` and ``--logs NAME [--run ID]``, each as text or ``--json``. Parse, call, print: the data is built by
:mod:`crontabber.views`, the text by :mod:`crontabber.tables`, both imported
where used (an idle cron tick needs neither). :func:`job_views_now` and
:func:`job_runs` gather the data of ``--list-jobs`` and ``--history``; the
dashboard calls them too, so its JSON is the same.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TextIO

from .catalog import Job, find_job
from .config import Settings
from .errors import ConfigurationError, JobNotFound, RunNotFound
from .leases import Marker
from .state import JobState
from .store import StateStore

if TYPE_CHECKING:
    from .views import FailureView, JobView, RunView

DEFAULT_LIMIT = 20
# How late a due job may be before --list-jobs calls it overdue: --nagios's
# warning threshold (crontabber.overdue_warning_seconds, in settings.monitor
# where that exists), else its default: a tick every few minutes makes any
# job a little late.
DEFAULT_OVERDUE_SECONDS = 1800.0


def _marker(
    settings: Settings, jobs: list[Job], store: StateStore
) -> Callable[[JobState | None, dt.datetime], Marker]:
    """The runner's classification of ``ongoing`` markers, from this host."""
    from .runner import Runner

    return Runner(settings, jobs, store).marker


def _overdue_seconds(settings: Settings) -> float:
    monitor = getattr(settings, "monitor", None)
    return float(getattr(monitor, "overdue_warning_seconds", DEFAULT_OVERDUE_SECONDS))


def _width(out: TextIO) -> int:
    """100 columns, or the terminal's width when printing to a wider one."""
    from .tables import DEFAULT_WIDTH

    try:
        if out.isatty():
            return max(DEFAULT_WIDTH, os.get_terminal_size(out.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return DEFAULT_WIDTH


def selected_jobs(jobs: list[Job], names: list[str]) -> list[Job]:
    """The jobs ``names`` mean (app names or class paths), in config order;
    every job when ``names`` is empty.

    Raises:
        JobNotFound: a name that no configured job has.
    """
    if not names:
        return jobs
    chosen = set()
    for name in names:
        job = find_job(jobs, name)
        if job is None:
            raise JobNotFound(name, [j.app_name for j in jobs])
        chosen.add(job.app_name)
    return [job for job in jobs if job.app_name in chosen]


def job_views_now(
    settings: Settings, jobs: list[Job], store: StateStore, names: list[str] | tuple[str, ...] = ()
) -> tuple[list["JobView"], dt.datetime]:
    """The views of the jobs ``names`` mean (every job when empty), in config
    order, and the database clock they were judged at: what ``--list-jobs``
    shows and the dashboard serves.

    Raises:
        JobNotFound: a name that no configured job has.
    """
    from . import views

    chosen = selected_jobs(jobs, list(names))
    states, now = store.states(), store.now()
    marker = _marker(settings, jobs, store)
    found = views.job_views(chosen, states, now, lambda state: marker(state, now),
                            _overdue_seconds(settings))
    return found, now


def list_jobs(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    """``--list-jobs [NAME ...]``: the table (``--wide``: every column) or ``--json``."""
    from . import jsonout, tables, views

    found, now = job_views_now(settings, jobs, store, list(args.list_jobs))
    if args.json:
        jsonout.emit(views.jobs_document(found, now), out)
        return 0
    lines = tables.wide_table(found, now) if args.wide else tables.list_table(found, now, _width(out))
    print("\n".join(lines), file=out)
    return 0


def _known_name(jobs: list[Job], store: StateStore, name: str) -> tuple[str, Job | None]:
    """The app name a command means: a configured job's, or a ghost's (a job
    taken out of the configuration whose state row or log rows remain).

    Raises:
        JobNotFound: neither.
    """
    job = find_job(jobs, name)
    if job is not None:
        return job.app_name, job
    if store.state(name) is None and not store.log_runs(name, 0):  # 0: one run, if any
        raise JobNotFound(name, [j.app_name for j in jobs])
    return name, None


@dataclass(frozen=True)
class JobRuns:
    """A job's newest runs as ``--history`` shows them: ``more`` says whether
    older runs exist beyond the limit; ``now`` is the database clock."""

    app_name: str
    is_backfill: bool
    runs: list["RunView"]
    more: bool
    now: dt.datetime

    def as_json(self) -> dict[str, Any]:
        """The ``--history --json`` document."""
        from .views import history_document

        return history_document(self.app_name, self.runs, self.now, self.more, self.is_backfill)


def job_runs(settings: Settings, jobs: list[Job], store: StateStore, name: str, limit: int) -> JobRuns:
    """The newest ``limit`` runs of the job ``name`` means (a configured job
    or a ghost), newest first: what ``--history`` shows and the dashboard serves.

    Raises:
        ConfigurationError: ``limit`` below 1.
        JobNotFound: neither a configured job nor a ghost has that name.
    """
    from . import views

    if limit < 1:
        raise ConfigurationError("--limit", f"must be a number of runs, 1 or more, not {limit}")
    app_name, job = _known_name(jobs, store, name)
    is_backfill = job.is_backfill if job is not None else False
    entries, state, now = store.log_runs(app_name, limit), store.state(app_name), store.now()
    run_ids = {entry.run_id for entry in entries if entry.run_id is not None}
    if state is not None and state.ongoing is not None and state.run_id is not None:
        run_ids.add(state.run_id)
    records = store.run_records(app_name, sorted(run_ids))
    marker = _marker(settings, jobs, store)
    runs = views.group_runs(entries, state, lambda s: marker(s, now), records)
    return JobRuns(app_name, is_backfill, runs[:limit], len(runs) > limit, now)


def one_run(settings: Settings, jobs: list[Job], store: StateStore, name: str, run_id: int) -> JobRuns:
    """Run ``run_id`` of the job ``name``, with every log row.

    Raises:
        JobNotFound: neither a configured job nor a ghost has that name.
        RunNotFound: neither the log nor the run ledger has that run.
    """
    from . import views

    app_name, job = _known_name(jobs, store, name)
    entries = list(reversed(store.run_log(app_name, run_id)))
    records = store.run_records(app_name, [run_id])
    state, now = store.state(app_name), store.now()
    holding = state if state is not None and state.run_id == run_id else None
    if not entries and not records and (holding is None or holding.ongoing is None):
        raise RunNotFound(app_name, run_id)
    marker = _marker(settings, jobs, store)
    runs = views.group_runs(entries, holding, lambda s: marker(s, now), records)
    if not runs and run_id in records:  # in the ledger only: claimed, then nothing logged
        runs = [views.record_run(records[run_id])]
    return JobRuns(app_name, job.is_backfill if job is not None else False, runs, False, now)


def history(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    """``--history NAME [--limit N]``: the job's newest runs, one line per run;
    ``--run ID``: one line per log row (interval) of that run."""
    from . import jsonout, tables

    if args.run is not None:
        if args.limit is not None:
            raise ConfigurationError("--limit", "lists runs; --run ID shows one")
        found = one_run(settings, jobs, store, args.history, args.run)
        if args.json:
            jsonout.emit(found.as_json(), out)
        else:
            print("\n".join(tables.run_rows_table(found.runs, found.now, found.is_backfill,
                                                  _width(out))), file=out)
        return 0
    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    found = job_runs(settings, jobs, store, args.history, limit)
    app_name, runs, now = found.app_name, found.runs, found.now
    if args.json:
        jsonout.emit(found.as_json(), out)
        return 0
    if not runs:
        print(f"{app_name}: no runs in the run log (crontabber_log)", file=out)
        return 0
    print("\n".join(tables.history_table(runs, now, found.is_backfill, _width(out))), file=out)
    if found.is_backfill:
        print(f"(a backfill job: --history {app_name} --run RUN lists a run's intervals)", file=out)
    if found.more:
        print(f"(older runs not shown: --limit {limit * 2})", file=out)
    return 0


def show_error(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    """``--show-error NAME [--run ID]``: the full error of the job's last
    failed run (or of run ID), or one line saying there is none.

    Raises:
        RunNotFound: ``--run`` names a run the log does not have.
    """
    from . import jsonout, tables, views

    app_name, _ = _known_name(jobs, store, args.show_error)
    state, now = store.state(app_name), store.now()
    if args.run is None:
        failure = views.last_failure(store.last_failure(app_name), state)
        message = f"{app_name}: no failed run in the run log"
    else:
        failure, message = _run_failure(store, app_name, args.run, state)
    if failure is not None:
        message = tables.failure_headline(failure, now)
    record = store.run_output(app_name, failure.run_id) \
        if failure is not None and failure.run_id is not None else None
    if args.json:
        document = views.failure_document(app_name, failure, message)
        document["run"] = record.as_json() if record is not None else None
        jsonout.emit(document, out)
    elif failure is not None:
        print("\n".join(tables.failure_report(failure, now)), file=out)
        tail = tables.output_tail(record, SHOWN_OUTPUT_LINES) if record is not None else []
        if tail:
            print("\n".join(tail), file=out)
    else:
        print(message, file=out)
    return 0


# --show-error shows the end of the failed run's output; --logs shows all that was kept.
SHOWN_OUTPUT_LINES = 40


def logs(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    """``--logs NAME [--run ID]``: what the job's newest run (or run ID) logged and
    printed, as the run ledger kept it: a header line, then the text.

    Raises:
        RunNotFound: the ledger has no such run (or none of the job: it never ran since
            migration 0012, or its runs were pruned).
    """
    from . import jsonout, tables

    app_name, _ = _known_name(jobs, store, args.logs)
    record = store.run_output(app_name, args.run)
    if record is None:
        if args.run is not None:
            raise RunNotFound(app_name, args.run)
        print(f"{app_name}: no run in the run ledger (crontabber_run) yet", file=out)
        return 0
    if args.json:
        jsonout.emit(record.as_json() | {"output": record.output}, out)
        return 0
    print("\n".join(tables.output_report(record, store.now())), file=out)
    return 0


def _run_failure(
    store: StateStore, app_name: str, run_id: int, state: JobState | None
) -> tuple[FailureView | None, str]:
    """The failure of run ``run_id`` (or None) and the line saying why there is none."""
    from .views import FailureView

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
