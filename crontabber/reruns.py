"""Which intervals a ``--rerun`` runs, in which order, and why it skips the others: pure
functions over what the ledger knows of each interval (``crontabber_interval``, the last run
that claimed it, and ``crontabber_log``, whether a unit of it ever succeeded).

A rerun runs in a lane of its own (:meth:`crontabber.runner.Runner.rerun`): it never holds
the job's marker, and claims each interval before it runs it, as the job's scheduled runs
do, so the two never run one interval at once and the schedule goes on during a backfill.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .formats import minute_text

#: ``--only``'s values.
ONLY = ("failed", "missing")


@dataclass(frozen=True)
class IntervalRecord:
    """What the ledger knows of one interval of a backfill job.

    ``status``: how the last run that claimed it left it (``running``, ``succeeded``,
    ``failed``, ``timed out``, ``stopped by signal``, ``fenced off``), None when no run of
    this release claimed it; ``expired``: a ``running`` claim whose holder stopped renewing it
    (it died); ``logged``: a unit of it succeeded at some time (``crontabber_log``, older
    releases' runs included)."""

    starts: dt.datetime
    status: str | None = None
    run_id: int | None = None
    kind: str | None = None
    holder: str | None = None
    expired: bool = False
    logged: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "IntervalRecord":
        return cls(
            row["starts"],
            row["status"],
            row["run_id"],
            row["kind"],
            row["holder"],
            bool(row["expired"]),
            bool(row["logged"]),
        )

    @property
    def live(self) -> bool:
        """Whether a run holds the interval right now."""
        return self.status == "running" and not self.expired

    @property
    def failed(self) -> bool:
        """Whether its last unit did not succeed (failed, timed out, stopped, fenced off, or
        its run died holding it)."""
        return self.status not in (None, "succeeded") and not self.live

    @property
    def missing(self) -> bool:
        """Whether no unit of it was ever recorded (never attempted, or only by a run of an
        older release that failed)."""
        return self.status is None and not self.logged


@dataclass(frozen=True)
class RerunRecord:
    """A rerun in the ledger, as ``--resume-run`` reads it."""

    run_id: int
    app_name: str
    kind: str
    holder: str
    status: str
    plan: tuple[dt.datetime, ...]
    expired: bool
    done: frozenset[dt.datetime]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RerunRecord":
        return cls(
            row["run_id"],
            row["app_name"],
            row["kind"],
            f"{row['host']}:{row['pid']}",
            row["status"],
            tuple(row["plan"] or ()),
            bool(row["expired"]),
            frozenset(row["done"] or ()),
        )


@dataclass(frozen=True)
class Step:
    """One interval of a rerun's plan: run it (``skip`` None), or why it is skipped;
    ``note``: what the rerun will meet (another run holding it now: it waits)."""

    when: dt.datetime
    skip: str | None = None
    note: str | None = None


def parse_only(text: str) -> frozenset[str]:
    """``--only``: ``failed``, ``missing`` or both (``failed,missing``); empty: every interval.

    Raises:
        ValueError: naming the values it takes.
    """
    parts = frozenset(p.strip() for p in text.split(",") if p.strip())
    unknown = sorted(parts - set(ONLY))
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not one of failed, missing (or failed,missing)")
    return parts


def plan_steps(
    dates: Sequence[dt.datetime],
    records: Mapping[dt.datetime, IntervalRecord],
    only: frozenset[str] = frozenset(),
    newest_first: bool = False,
    done_by: RerunRecord | None = None,
) -> list[Step]:
    """The rerun of ``dates`` (oldest first; ``done_by``'s plan order when it resumes it),
    one step per interval in the order it runs them: newest first when asked, each interval
    ``only`` leaves out or ``done_by`` finished skipped with why."""
    ordered = list(reversed(dates)) if newest_first else list(dates)
    steps = []
    for when in ordered:
        record = records.get(when, IntervalRecord(when))
        skip = _skip_reason(record, only, done_by)
        note = None
        if skip is None and record.live:
            note = f"held now by run {record.run_id} ({record.kind}) on {record.holder}: waits for it"
        steps.append(Step(when, skip, note))
    return steps


def _skip_reason(record: IntervalRecord, only: frozenset[str], done_by: RerunRecord | None) -> str | None:
    if done_by is not None and record.starts in done_by.done:
        return f"done by run {done_by.run_id} before it stopped"
    if not only:
        return None
    if "failed" in only and record.failed:
        return None
    if "missing" in only and record.missing:
        return None
    if record.live:
        return f"running now (run {record.run_id}, {record.kind}, on {record.holder})"
    if record.failed:
        return f"its last unit failed ({record.status}, run {record.run_id}); --only missing leaves it"
    if record.missing:
        return "no unit recorded; --only failed leaves it"
    by = f" (run {record.run_id})" if record.run_id is not None else ""
    return f"its last unit succeeded{by}"


def to_run(steps: Iterable[Step]) -> list[dt.datetime]:
    """The intervals the plan runs, in order."""
    return [step.when for step in steps if step.skip is None]


def step_lines(steps: Iterable[Step], plan: Any = None) -> list[str]:
    """One line per step, as ``--rerun --dry-run`` prints them: ``WHEN: what the job says
    it would write`` for an interval it runs (``plan(when)``, the job's
    :meth:`~crontabber.base.BaseCronApp.plan`), ``WHEN: skipped: why`` for one it skips."""
    lines = []
    for step in steps:
        if step.skip is not None:
            lines.append(f"{minute_text(step.when)}: skipped: {step.skip}")
            continue
        said = [text for text in (plan(step.when) if plan else None, step.note) if text]
        lines.append(f"{minute_text(step.when)}{': ' + '; '.join(said) if said else ''}")
    return lines
