"""``--metrics-file``: the runner's state in the Prometheus text format, for
node_exporter's textfile collector (``--collector.textfile.directory``).

:func:`render` is pure (an :class:`~crontabber.records.Overview` in, text out);
:func:`write_atomically` replaces the file in one rename, so the collector
never reads half a file. Times are Unix seconds (database clock), durations
seconds. A job that never ran has no time series for its missing times; a
host is every host that ever ticked (alert on its last tick's age).
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from .config.catalog import Job
from .errors import MetricsFileNotWritten
from .records import Overview
from .scheduling import pause_active
from .state import JobState

# name, type, help; the label set is the job's name (crontabber_job_*) or the host's.
JOB_METRICS = (
    (
        "crontabber_job_last_success_timestamp_seconds",
        "gauge",
        "When the job last succeeded (for a backfill job: the last interval done).",
    ),
    ("crontabber_job_last_run_timestamp_seconds", "gauge", "When the job's last attempt began."),
    ("crontabber_job_next_run_timestamp_seconds", "gauge", "When the job is due next."),
    (
        "crontabber_job_last_duration_seconds",
        "gauge",
        "How long the job's last run took (crontabber_log: the sum of its units).",
    ),
    ("crontabber_job_error_count", "gauge", "Failures in a row (0 after a success)."),
    ("crontabber_job_ongoing", "gauge", "1 while a run of the job holds its ongoing marker."),
    ("crontabber_job_paused", "gauge", "1 while the job is paused (--pause)."),
    (
        "crontabber_job_deadline_missed",
        "gauge",
        "1 while the job's next interval is past its deadline (0 otherwise, or without one).",
    ),
    (
        "crontabber_job_schedule_info",
        "gauge",
        "Always 1: the job's schedule as written (schedule) and the zone it reads (time_zone).",
    ),
)
HOST_METRICS = (
    (
        "crontabber_host_last_tick_timestamp_seconds",
        "gauge",
        "When the host's runner last ticked (database clock).",
    ),
    (
        "crontabber_host_clock_skew_seconds",
        "gauge",
        "The host's clock minus the database's, at its last tick.",
    ),
    ("crontabber_host_info", "gauge", "The crontabber version the host ran at its last tick."),
)


def render_textfile(
    jobs: Sequence[Job], overview: Overview, missed: Mapping[str, str] | None = None
) -> str:
    """The metrics file's text: HELP and TYPE lines, then one sample per job or host.
    ``missed``: the jobs past their deadline
    (:func:`crontabber.alerts.rules.missed_deadlines`)."""
    lines = []
    for name, kind, text in (*JOB_METRICS, *HOST_METRICS):
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        if name == "crontabber_job_deadline_missed":
            lines += [
                f'{name}{{job="{_label(job.app_name)}"}} {int(job.app_name in (missed or {}))}'
                for job in jobs
            ]
            continue
        if name == "crontabber_job_schedule_info":
            lines += [_schedule_sample(name, job) for job in jobs]
            continue
        lines += list(_samples(name, jobs, overview))
    lines += list(_run_metrics(jobs, overview))
    lines += [
        "# HELP crontabber_metrics_timestamp_seconds When this file was written (database clock).",
        "# TYPE crontabber_metrics_timestamp_seconds gauge",
        f"crontabber_metrics_timestamp_seconds {_number(overview.now.timestamp())}",
    ]
    return "\n".join(lines) + "\n"


def _schedule_sample(name: str, job: Job) -> str:
    """``crontabber_job_schedule_info{job, schedule, time_zone} 1``: the schedule as written."""
    schedule = job.schedule
    written = f"{schedule.frequency}|{schedule.time}" if schedule.time else schedule.frequency
    job_label, zone = _label(job.app_name), _label(schedule.zone)
    labels = f'job="{job_label}",schedule="{_label(written)}",time_zone="{zone}"'
    return f"{name}{{{labels}}} 1"


def _run_metrics(jobs: Sequence[Job], overview: Overview) -> Iterator[str]:
    """``crontabber_job_run_metric{job, name}``: the numbers each job's last successful run
    returned with its summary (:class:`crontabber.base.Summary`), one sample each."""
    name = "crontabber_job_run_metric"
    yield (
        f"# HELP {name} A number the job's last successful run returned with its summary (label "
        "name: which)."
    )
    yield f"# TYPE {name} gauge"
    for job in jobs:
        for metric, value in sorted(overview.metrics.get(job.app_name, {}).items()):
            yield f'{name}{{job="{_label(job.app_name)}",name="{_label(metric)}"}} {_number(value)}'


def _samples(name: str, jobs: Sequence[Job], overview: Overview) -> Iterator[str]:
    if name.startswith("crontabber_host_"):
        for host in overview.hosts:
            if name == "crontabber_host_info":
                yield f'{name}{{host="{_label(host.host)}",version="{_label(host.version)}"}} 1'
                continue
            number = (
                host.last_tick.timestamp()
                if name.endswith("tick_timestamp_seconds")
                else host.skew_seconds
            )
            yield f'{name}{{host="{_label(host.host)}"}} {_number(number)}'
        return
    for job in jobs:
        value = _job_value(name, job.app_name, overview.states.get(job.app_name), overview)
        if value is not None:
            yield f'{name}{{job="{_label(job.app_name)}"}} {_number(value)}'


def _job_value(
    name: str, app_name: str, state: JobState | None, overview: Overview
) -> float | None:
    short = name.removeprefix("crontabber_job_")
    if short == "last_duration_seconds":
        took = overview.durations.get(app_name)
        return took.total_seconds() if took is not None else None
    if short == "error_count":
        return state.error_count if state is not None else 0
    if short == "ongoing":
        return int(state is not None and state.ongoing is not None)
    if short == "paused":
        return int(pause_active(state, overview.now))
    if state is None:
        return None
    when: dt.datetime | None = {
        "last_success_timestamp_seconds": state.last_success,
        "last_run_timestamp_seconds": state.last_run,
        "next_run_timestamp_seconds": state.next_run,
    }[short]
    return when.timestamp() if when is not None else None


def _label(value: str) -> str:
    """A label value escaped as the text format requires."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text``: a hidden temporary file in the same
    directory (the collector reads only ``*.prom``), then one rename.
    The file is world-readable (0644): node_exporter runs as its own user.

    Raises:
        MetricsFileNotWritten: with the reason (a missing directory, permissions).
    """
    target = Path(path)
    try:
        fd, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise MetricsFileNotWritten(path, exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise MetricsFileNotWritten(path, exc.strerror or str(exc)) from None
