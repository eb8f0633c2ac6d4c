"""Which intervals a ``--rerun`` runs, in which order, and why it skips the others: pure
functions over what the ledger knows of each interval (``crontabber_interval``, the last run
that claimed it, and ``crontabber_log``, whether a unit of it ever succeeded).

A rerun runs in a lane of its own
(:meth:`crontabber.operator_actions.OperatorActions.rerun`): it never holds the job's marker,
and claims each interval before it runs it, as the job's scheduled runs do, so the two never
run one interval at once and the schedule goes on during a backfill.

A rerun is a group of runs: the run that started it (its plan, ``--parallel N``,
``--downstream``) and the runs that work on it after it (``resumed_from`` names the first):
one that continues it after a kill, or a worker that joins it from another host. Each run of
the group asks for its next interval (:func:`pick_next`): the first of the plan that no run of
the group did, that nobody holds, while fewer than N are held by the group; a job that does
not declare ``parallel_reruns`` takes them strictly in order, one at a time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..formats import minute_text
from ..scheduling import dependency_order

#: ``--only``'s values.
ONLY = ("failed", "missing")

#: How an interval ends that a rerun group does not try again until it is resumed: the job
#: failed on it (a kill, a SIGTERM or a lost lease leave it to the next run of the group).
FAILED_HERE = ("failed", "timed out")


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
class GroupWorker:
    """A run of a rerun group that the ledger shows running: ``expired``, its heartbeat is
    older than the lease (it died elsewhere, or is cut off)."""

    run_id: int
    holder: str
    expired: bool

    def gone(self, gone_here: Callable[[str], bool]) -> bool:
        """Whether it is dead: its lease expired, or its process on this host is gone."""
        return self.expired or gone_here(self.holder)


@dataclass(frozen=True)
class GroupRun:
    """One run of a rerun group as its grouped view lists it (or a dependant's rerun it
    started: ``app_name`` differs): who, how it stands, how many intervals it finished."""

    run_id: int
    app_name: str
    by: str
    status: str
    started: dt.datetime
    ended: dt.datetime | None
    intervals: int
    expired: bool = False  # running in the ledger, but no heartbeat for a lease

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "GroupRun":
        return cls(
            row["run_id"],
            row["app_name"],
            f"{row['host']}:{row['pid']}",
            row["status"],
            row["started"],
            row["ended"],
            int(row["intervals"] or 0),
            bool(row["expired"]),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job": self.app_name,
            "by": self.by,
            "status": self.status,
            "started": self.started,
            "ended": self.ended,
            "intervals": self.intervals,
            "expired": self.expired,
        }


@dataclass(frozen=True)
class RerunGroup:
    """One rerun as a whole (``--history NAME --run ID`` of any of its runs): its first run's
    record (plan, what the group finished), every run of it, and the dependants' reruns it
    started."""

    root: "RerunRecord"
    runs: tuple[GroupRun, ...]
    dependants: tuple[GroupRun, ...] = ()

    @property
    def outcome(self) -> str:
        """``done`` (every interval of the plan finished), ``running`` (a run of it is
        running and live), else ``stopped`` (intervals left, nobody on them: a resume)."""
        if not self.root.left:
            return "done"
        if any(run.status == "running" and not run.expired for run in self.runs):
            return "running"
        return "stopped"

    def as_json(self) -> dict[str, Any]:
        return {
            "rerun": self.root.run_id,
            "job": self.root.app_name,
            "outcome": self.outcome,
            "plan": list(self.root.plan),
            "done": sorted(self.root.done),
            "left": self.root.left,
            "parallel": self.root.parallel,
            "downstream": self.root.downstream,
            "runs": [run.as_json() for run in self.runs],
            "dependants": [run.as_json() for run in self.dependants],
        }


@dataclass(frozen=True)
class RerunRecord:
    """A rerun in the ledger, as ``--resume-run`` reads it: the first run of its group (its
    row, its plan, ``parallel``, ``downstream``, ``downstream_of``), the intervals any run of
    the group finished (``done``), and the group's runs still recorded as running."""

    run_id: int
    app_name: str
    kind: str
    holder: str
    status: str
    plan: tuple[dt.datetime, ...]
    expired: bool
    done: frozenset[dt.datetime]
    parallel: int = 1
    downstream: bool = False
    downstream_of: int | None = None
    workers: tuple[GroupWorker, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any], workers: Sequence[GroupWorker] = ()) -> "RerunRecord":
        return cls(
            row["run_id"],
            row["app_name"],
            row["kind"],
            f"{row['host']}:{row['pid']}",
            row["status"],
            tuple(_utc(when) for when in row["plan"] or ()),
            bool(row["expired"]),
            frozenset(_utc(when) for when in row["done"] or ()),
            int(row.get("parallel") or 1),
            bool(row.get("downstream")),
            row.get("downstream_of"),
            tuple(workers),
        )

    def live(self, gone_here: Callable[[str], bool]) -> list[GroupWorker]:
        """The group's runs that may still be working on it."""
        return [w for w in self.workers if not w.gone(gone_here)]

    def dead(self, gone_here: Callable[[str], bool]) -> list[GroupWorker]:
        """The group's runs recorded as running that are dead (to record as abandoned)."""
        return [w for w in self.workers if w.gone(gone_here)]

    @property
    def left(self) -> list[dt.datetime]:
        """Its plan's intervals no run of the group finished, in the plan's order."""
        return [when for when in self.plan if when not in self.done]


@dataclass(frozen=True)
class PlanRow:
    """One interval of a rerun's plan as a run of its group picks its next interval: whether
    a run of the group finished it (``done``), and its claim now (``crontabber_interval``: the
    last run that claimed it, how that run stands in the ledger, whether the claim expired,
    whether that run is one of the group)."""

    starts: dt.datetime
    done: bool = False
    status: str | None = None
    run_id: int | None = None
    kind: str | None = None
    holder: str | None = None
    ended: dt.datetime | None = None
    expired: bool = False
    run_status: str | None = None
    in_group: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "PlanRow":
        return cls(
            _utc(row["starts"]),
            bool(row["done"]),
            row["status"],
            row["run_id"],
            row["kind"],
            row["holder"],
            row["ended"],
            bool(row["expired"]),
            row["run_status"],
            bool(row["in_group"]),
        )

    @property
    def held(self) -> bool:
        """Whether a run holds it now: claimed, renewed within the lease, by a run the
        ledger shows running (``claim_interval``'s rule for what is free)."""
        return self.status == "running" and not self.expired and self.run_status == "running"

    def failed_since(self, since: dt.datetime) -> bool:
        """Whether the job failed on it in a run of the group since ``since``."""
        return (
            self.in_group
            and self.status in FAILED_HERE
            and self.ended is not None
            and self.ended >= since
        )


@dataclass(frozen=True)
class Pick:
    """What a run of a rerun group does next: claim ``when``; first record ``gone`` (runs of
    this host whose process is gone, holding intervals) as abandoned and look again; wait
    (``wait`` says for what); or stop, nothing left for it (all None)."""

    when: dt.datetime | None = None
    wait: str | None = None
    gone: tuple[int, ...] = ()


def pick_next(
    rows: Sequence[PlanRow],
    parallel: int,
    strict: bool,
    since: dt.datetime,
    gone_here: Callable[[str], bool],
) -> Pick:
    """The next interval for a run of a rerun group that started at ``since`` (it holds none
    now), ``rows`` in the plan's order.

    Left are the intervals no run of the group finished and the job did not fail on in the
    group since ``since`` (those wait for a resume). A rerun run of this host holding one
    while its process is gone (``gone_here(holder)``: killed) is to be recorded abandoned
    first: its interval is free at once, as a dead holder's marker is. ``strict`` (a job
    without ``parallel_reruns``): the first left, waiting while anyone holds it. Else the
    first left that nobody holds, while the group holds fewer than ``parallel``; a run waits
    while the intervals left are held (a peer's may still fail or die: it takes it over)."""
    dead = sorted(
        {
            r.run_id
            for r in rows
            if r.held and r.kind == "rerun" and r.run_id is not None and gone_here(r.holder or "")
        }
    )
    if dead:
        return Pick(gone=tuple(dead))
    left = [r for r in rows if not r.done and not r.failed_since(since)]
    if not left:
        return Pick()
    held = sum(1 for r in rows if r.held and r.in_group)
    for row in left:
        if row.held:
            if strict:
                return Pick(wait=f"{minute_text(row.starts)}: held by {_holder(row)}")
            continue
        if held >= max(parallel, 1):
            return Pick(
                wait=f"{held} interval(s) of the rerun are running, at most {parallel} at once"
            )
        return Pick(when=row.starts)
    first = left[0]
    return Pick(
        wait=(
            f"the {len(left)} interval(s) left are running ({minute_text(first.starts)}: "
            f"{_holder(first)})"
        )
    )


def _utc(when: dt.datetime) -> dt.datetime:
    """A time read from the database (in the session's time zone) in UTC, as the job is called
    with its dates (its ``run(date)`` may format the day)."""
    return when.astimezone(dt.timezone.utc)


def _holder(row: PlanRow) -> str:
    return f"run {row.run_id} ({row.kind}) on {row.holder}"


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
            note = (
                f"held now by run {record.run_id} ({record.kind}) on {record.holder}: waits for it"
            )
        steps.append(Step(when, skip, note))
    return steps


def _skip_reason(
    record: IntervalRecord, only: frozenset[str], done_by: RerunRecord | None
) -> str | None:
    if done_by is not None and record.starts in done_by.done:
        return f"done by run {done_by.run_id} before it stopped"
    if (
        done_by is not None
        and record.status == "succeeded"
        and record.run_id is not None
        and record.run_id > done_by.run_id
    ):  # run ids grow: another run (another rerun, a scheduled run) did it since
        return f"succeeded by run {record.run_id} ({record.kind}) since the rerun began"
    if not only:
        return None
    if "failed" in only and record.failed:
        return None
    if "missing" in only and record.missing:
        return None
    if record.live:
        return f"running now (run {record.run_id}, {record.kind}, on {record.holder})"
    if record.failed:
        return (
            f"its last unit failed ({record.status}, run {record.run_id}); --only missing leaves it"
        )
    if record.missing:
        return "no unit recorded; --only failed leaves it"
    by = f" (run {record.run_id})" if record.run_id is not None else ""
    return f"its last unit succeeded{by}"


def downstream_steps(
    planned: Sequence[dt.datetime],
    records: Mapping[dt.datetime, IntervalRecord],
    only: frozenset[str],
    forced: Iterable[dt.datetime],
) -> list[Step]:
    """A dependant's part of a ``--downstream`` rerun with ``--only``: its intervals of the
    range's days (``planned``), each run when its parent reruns that day (``forced``: its input
    changes), else as ``--only`` judges the dependant's own interval (its day failed or never
    ran there, whatever the parent's did)."""
    again = set(forced)
    steps = plan_steps(planned, records, only)
    return [
        Step(step.when, None, step.note) if step.skip is not None and step.when in again else step
        for step in steps
    ]


def intervals_text(dates: Sequence[dt.datetime]) -> str:
    """``2026-11-21 00:00 UTC``, or ``24 intervals, 2026-11-01 00:00 UTC to 2026-11-24 00:00 UTC``
    (the earliest and the latest, whatever order they ran in: parallel runs and --newest-first
    run them out of order)."""
    if len(dates) == 1:
        return minute_text(dates[0])
    return f"{len(dates)} intervals, {minute_text(min(dates))} to {minute_text(max(dates))}"


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


@dataclass(frozen=True)
class Stage:
    """One job's part of a rerun, in the order they run: the job named (first), then with
    ``--downstream`` each dependant, parents before children, each after the one before has
    finished every interval. ``steps``: its plan; ``parallel``: how many of its intervals
    may run at once; ``record``: the rerun group it continues or joins (None: a new one);
    ``not_rerun``: why a dependant is left out (it is not a backfill job)."""

    app_name: str
    steps: tuple[Step, ...] = ()
    parallel: int = 1
    record: RerunRecord | None = None
    not_rerun: str | None = None

    @property
    def dates(self) -> list[dt.datetime]:
        return to_run(self.steps)


def dependants(graph: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """The jobs of ``graph`` (app name: its parents) that depend on ``name``, directly or
    through others, parents first (crontabber's order)."""
    below: set[str] = set()
    grew = True
    while grew:
        grew = False
        for child, parents in graph.items():
            if (
                child not in below
                and child != name
                and (name in parents or below.intersection(parents))
            ):
                below.add(child)
                grew = True
    return [job for job in dependency_order(graph) if job in below]


def same_days(
    dates: Sequence[dt.datetime], intervals: Callable[[dt.date], list[dt.datetime]]
) -> list[dt.datetime]:
    """A dependant's intervals for the UTC days of ``dates``, the days in the order ``dates``
    takes them (``intervals(day)``: the dependant's intervals starting that day)."""
    days: list[dt.date] = []
    for when in dates:
        day = when.astimezone(dt.timezone.utc).date()
        if day not in days:
            days.append(day)
    out: list[dt.datetime] = []
    for day in days:
        out.extend(when for when in intervals(day) if when not in out)
    return out
