"""What operators read: the ``--list-jobs`` table, the ``--nagios`` check and
the ghost audit. Pure functions of jobs, states and "now"; the CLI prints.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .catalog import Job
from .leases import Marker, describe_marker
from .state import JobState

MarkerOf = Callable[[JobState], Marker]

NAGIOS_OK, NAGIOS_WARNING, NAGIOS_CRITICAL = 0, 1, 2

_UNITS = (
    ("year", 365 * 86400),
    ("month", 30 * 86400),
    ("week", 7 * 86400),
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
    ("second", 1),
)


def timesince(then: dt.datetime, now: dt.datetime) -> str:
    """crontabber's ``timesince``: up to two adjacent units, e.g. ``1 hour, 1 minute``."""
    seconds = int((now - then).total_seconds())
    if seconds <= 0:
        return "0 seconds"
    for index, (name, size) in enumerate(_UNITS):
        count = seconds // size
        if count:
            parts = [_plural(count, name)]
            if index + 1 < len(_UNITS):
                next_name, next_size = _UNITS[index + 1]
                rest = (seconds - count * size) // next_size
                if rest:
                    parts.append(_plural(rest, next_name))
            return ", ".join(parts)
    return "0 seconds"


def _plural(count: int, name: str) -> str:
    return f"{count} {name}" if count == 1 else f"{count} {name}s"


def _when(value: dt.datetime | None, now: dt.datetime, empty: str = "-") -> str:
    if value is None:
        return empty
    stamp = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    if value > now:
        return f"{stamp} (in {timesince(now, value)})"
    return f"{stamp} ({timesince(value, now)} ago)"


def error_summary(state: JobState, width: int = 60) -> str:
    """``Type: value`` of the last error on one line, cut to ``width``."""
    if not state.last_error:
        return "-"
    kind = str(state.last_error.get("type", ""))
    # "<class 'ValueError'>" or Python 2's "<type 'exceptions.ValueError'>" -> ValueError
    name = kind.split("'")[1].rsplit(".", 1)[-1] if "'" in kind else kind
    text = f"{name}: {state.last_error.get('value', '')}".replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def list_rows(
    jobs: Sequence[Job], states: Mapping[str, JobState], now: dt.datetime, marker: MarkerOf
) -> list[list[str]]:
    """One row per configured job, in config order, with a header row first."""
    rows = [["NAME", "CLASS", "SCHEDULE", "LAST RUN", "LAST SUCCESS", "NEXT RUN",
             "ERRORS", "LAST ERROR", "ONGOING"]]
    for job in jobs:
        state = states.get(job.app_name)
        if state is None:
            rows.append([job.app_name, job.class_path, str(job.schedule), "never", "-",
                         "due now" if not job.depends_on else "when parents ran", "0", "-", "-"])
            continue
        ongoing = "-"
        if state.ongoing is not None:
            ongoing = f"since {_when(state.ongoing, now)} by {state.ongoing_by or 'unknown'}"
            if state.heartbeat is not None:
                ongoing += f", heartbeat {timesince(state.heartbeat, now)} ago"
            status = marker(state)
            if status is not Marker.LIVE:
                ongoing += f" ({status.value}: the next run takes it over)"
        rows.append([
            job.app_name,
            job.class_path,
            str(job.schedule),
            _when(state.last_run, now, "never"),
            _when(state.last_success, now, "never"),
            _when(state.next_run, now),
            str(state.error_count),
            error_summary(state),
            ongoing,
        ])
    return rows


def align(rows: list[list[str]]) -> list[str]:
    """Rows as lines whose columns line up (two spaces between columns)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


@dataclass(frozen=True)
class NagiosResult:
    code: int
    lines: list[str]


def nagios(
    jobs: Sequence[Job], states: Mapping[str, JobState], now: dt.datetime, marker: MarkerOf
) -> NagiosResult:
    """crontabber's nagios check.

    A failing job is CRITICAL, except a backfill job's first failure, which is
    a WARNING. Ours also warns about an ``ongoing`` marker that is no longer
    live (its lease expired, its process is gone, or a crontabber 0.18 marker
    is older than the max age): a runner died holding it and no tick has
    taken the job over yet. One status line, then one detail line per entry
    (warnings included even when the status is CRITICAL).
    """
    critical: list[str] = []
    warning: list[str] = []
    for job in jobs:
        state = states.get(job.app_name)
        if state is None:
            continue
        if state.error_count:
            # One status line: a multi-line message contributes its first line.
            value = (str(state.last_error.get("value", "")).strip().splitlines() or [""])[0]
            entry = f"{job.app_name} ({job.cls.__name__}) | {state.last_error.get('type', '')} | {value}"
            (warning if state.error_count == 1 and job.is_backfill else critical).append(entry)
        status = marker(state)
        if status.takeable:
            warning.append(f"{job.app_name} ({job.cls.__name__}) | ongoing marker not live: "
                           f"{describe_marker(state, status, now)}")
    if critical:
        return NagiosResult(NAGIOS_CRITICAL, ["CRITICAL - " + "; ".join(critical), *critical, *warning])
    if warning:
        return NagiosResult(NAGIOS_WARNING, ["WARNING - " + "; ".join(warning), *warning])
    return NagiosResult(NAGIOS_OK, ["OK - All systems nominal"])


def ghosts(jobs: Sequence[Job], states: Mapping[str, JobState]) -> list[str]:
    """App names in the state table that no configured job has, sorted."""
    configured = {job.app_name for job in jobs}
    return sorted(name for name in states if name not in configured)
