"""The rerun lane's store: every query of ``--rerun`` on the run ledger (``crontabber_run``) and
the interval rows (``crontabber_interval``): a rerun's runs, the intervals they claim, record
and end, and what ``--rerun`` reads to plan and resume (SQL in ``sql/crontabber/reruns.sql``,
and the statements it shares with a scheduled backfill's run in ``crontabber.sql``).
Run over the state store's connection (:meth:`crontabber.store.StateStore.in_transaction`: one
transaction each, retried and translated as the state store's own). A scheduled backfill run's
interval claim is the state store's (:meth:`crontabber.store.StateStore.claim_interval`): it
runs with the job's marker, as the rest of a scheduled run does. Not imported by a cron tick.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Mapping, Sequence

from .. import sqlfiles
from ..state import Claim, RunEnd, RunKind, RunStatus, Unit
from ..store import StateStore, abandon_gone, close_run, first_row, identity, rows_of, unit_params
from .plan import (
    GroupRun,
    GroupWorker,
    IntervalRecord,
    Pick,
    PlanRow,
    RerunGroup,
    RerunRecord,
    pick_next,
)

#: The rerun lane's own statements.
Q = sqlfiles.load("reruns.sql")
#: The state store's statements a rerun's run shares with a scheduled backfill's run: the
#: interval claim, a unit's record and a run's abandonment.
SHARED = sqlfiles.load("crontabber.sql")


class RerunStore:
    """The rerun lane's queries over the connection of ``state`` (a
    :class:`~crontabber.store.StateStore`): each method one transaction. A rerun's run is a
    ledger row, never the job's marker: nothing here writes the job's state row."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def _one(self, name: str, params: Mapping[str, Any], doing: str) -> dict[str, Any] | None:
        def work(cur: Any) -> dict[str, Any] | None:
            cur.execute(Q[name], params)
            return first_row(cur)

        return self.state.in_transaction(work, doing)

    def start_rerun(
        self,
        app_name: str,
        holder: tuple[str, int],
        plan: Sequence[dt.datetime],
        options: Sequence[str] = (),
        resumed_from: int | None = None,
        parallel: int | None = None,
        downstream: bool = False,
        downstream_of: int | None = None,
        lease_seconds: float | None = None,
    ) -> tuple[Claim, int, int]:
        """A rerun's run in its own lane: its ledger row, and nothing on the job's row: the
        job's scheduled runs go on. ``resumed_from`` None: the first run of a new rerun (its
        ``plan``, ``parallel``, ``downstream``, ``downstream_of``); else a run joining or
        continuing that rerun (its plan is the first run's; :func:`_rerun_to_join`). Returns
        the claim, the first run of its group and how many of the group's intervals may run
        at once. ``lease_seconds``: the run's lease, stored with it (a run of another login
        records it dead only once that lease expired; None: recorded with its first interval).

        Raises:
            ValueError: ``resumed_from`` names no run.
        """

        def work(cur: Any) -> tuple[dict[str, Any], int | None, int | None]:
            joined = _rerun_to_join(cur, app_name, resumed_from, downstream_of)
            joins, cap = joined or (None, parallel)
            new = joined is None  # only a new rerun's first run records what it is
            cur.execute(
                Q["start_rerun"],
                {
                    "app_name": app_name,
                    "host": holder[0],
                    "pid": holder[1],
                    "options": list(options) or None,
                    "plan": (list(plan) or None) if new else None,
                    "resumed_from": joins,
                    "parallel": cap if cap and cap > 1 else None,
                    "downstream": (downstream or None) if new else None,
                    "downstream_of": downstream_of if new else None,
                    "lease_seconds": lease_seconds,
                },
            )
            made = first_row(cur)
            assert made is not None
            return made, joins, cap

        made, joins, cap = self.state.in_transaction(work, "start_rerun")
        claim = Claim(app_name, made["run_id"], *holder, made["started"])
        return claim, joins if joins is not None else claim.run_id, max(cap or 1, 1)

    def lane_heartbeat(
        self, claim: Claim, output: tuple[str, int] | None = None
    ) -> dt.datetime | None:
        """:meth:`~crontabber.store.StateStore.heartbeat` of a rerun's lane: its ledger row and
        the interval it holds; None when the run no longer counts as running (fenced off)."""
        text, dropped = output if output is not None else (None, None)
        row = self._one(
            "lane_heartbeat",
            {"run_id": claim.run_id, "output": text, "dropped": dropped},
            "lane_heartbeat",
        )
        return row["heartbeat"] if row else None

    def next_interval(
        self,
        claim: Claim,
        root: int,
        lease_seconds: float,
        parallel: int,
        strict: bool,
        gone_here: Callable[[str], bool],
    ) -> Pick:
        """Claim the next interval of rerun group ``root`` for its run ``claim``
        (:func:`crontabber.reruns.plan.pick_next` over the plan, under the lock of the group's
        first run, so its runs pick one at a time): runs of this host found gone are
        recorded abandoned first. The pick: the interval claimed, why it waits, or nothing left."""
        params = {"root": root, "app_name": claim.app_name, "lease_seconds": lease_seconds}

        def work(cur: Any) -> Pick:
            cur.execute(Q["lock_rerun"], {"run_id": root})
            # the job's rerun runs killed without recording their end: abandoned before their
            # intervals are taken over (a later tick would record them too)
            cur.execute(
                Q["abandon_expired_lanes"],
                {**params, "run_id": claim.run_id, "host": claim.host},
            )
            for _ in range(5):
                cur.execute(Q["rerun_intervals"], params)
                rows = [PlanRow.from_row(row) for row in rows_of(cur)]
                pick = pick_next(rows, parallel, strict, claim.started, gone_here)
                if pick.gone:
                    holders = {r.run_id: r.holder or "" for r in rows}
                    for run_id in pick.gone:
                        abandon_gone(cur, run_id, holders.get(run_id, ""), claim)
                    continue
                if pick.when is None:
                    return pick
                cur.execute(
                    SHARED["claim_interval"],
                    {
                        **identity(claim),
                        "starts": pick.when,
                        "kind": RunKind.RERUN.value,
                        "holder": claim.holder,
                        "lease_seconds": lease_seconds,
                    },
                )
                if cur.fetchone() is not None:
                    return pick
            return Pick(wait="the intervals it would take were just claimed by other runs")

        return self.state.in_transaction(work, "next_interval")

    def record_lane_unit(
        self,
        claim: Claim,
        success: dt.datetime,
        duration: dt.timedelta,
        summary: str | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> bool:
        """:meth:`~crontabber.store.StateStore.record_success` of a rerun's lane: the interval's
        row, its log row and the run's progress; False (nothing written) when the run no longer
        holds the interval."""
        units = [(success, duration, summary, metrics)]
        return self.state.in_transaction(
            lambda cur: _record_lane_units(cur, claim, units), "record_lane_unit"
        )

    def finish_lane(
        self,
        claim: Claim,
        end: RunEnd,
        failure: tuple[dt.timedelta, Mapping[str, str], str] | None = None,
    ) -> bool:
        """The end of a rerun's run: its ledger row, the interval it held, a log row for a
        failure; False when it no longer counted as running (found abandoned: fenced off)."""

        def work(cur: Any) -> bool:
            cur.execute(Q["lane_status"], {"run_id": claim.run_id})
            row = cur.fetchone()
            held = row is not None and row[0] == RunStatus.RUNNING.value
            return close_run(cur, claim, end, held, failure)

        return self.state.in_transaction(work, "finish_lane")

    def interval_records(
        self, app_name: str, dates: Sequence[dt.datetime], lease_seconds: float
    ) -> dict[dt.datetime, IntervalRecord]:
        """What the ledger knows of each of the job's intervals ``dates``."""

        def work(cur: Any) -> dict[dt.datetime, IntervalRecord]:
            cur.execute(
                Q["interval_records"],
                {"app_name": app_name, "dates": list(dates), "lease_seconds": lease_seconds},
            )
            records = [IntervalRecord.from_row(row) for row in rows_of(cur)]
            return {record.starts: record for record in records}

        return self.state.in_transaction(work, "interval_records")

    def rerun_record(self, run_id: int, lease_seconds: float) -> RerunRecord | None:
        """The rerun run ``run_id`` belongs to, as ``--resume-run`` reads it (the first run of
        its group, what the group finished, its runs recorded as running); None when the
        ledger has no such run."""

        def work(cur: Any) -> RerunRecord | None:
            cur.execute(Q["rerun_root"], {"run_id": run_id})
            found = cur.fetchone()
            if found is None:
                return None
            params = {"root": found[0], "lease_seconds": lease_seconds}
            cur.execute(Q["rerun_run"], params)
            row = first_row(cur)
            assert row is not None
            cur.execute(Q["rerun_workers"], params)
            workers = [GroupWorker(r[0], r[1], bool(r[2])) for r in cur.fetchall()]
            return RerunRecord.from_row(row, workers)

        return self.state.in_transaction(work, "rerun_record")

    def rerun_group(self, run_id: int, lease_seconds: float) -> RerunGroup | None:
        """The rerun run ``run_id`` belongs to, whole (its grouped view); None when the ledger
        has no such run or it is no rerun's (two transactions: the rerun, then its runs)."""
        root = self.rerun_record(run_id, lease_seconds)
        if root is None or root.kind != "rerun":
            return None

        def work(cur: Any) -> list[dict[str, Any]]:
            cur.execute(Q["rerun_group"], {"root": root.run_id, "lease_seconds": lease_seconds})
            return rows_of(cur)

        rows = [GroupRun.from_row(row) for row in self.state.in_transaction(work, "rerun_group")]
        return RerunGroup(
            root,
            tuple(r for r in rows if r.app_name == root.app_name),
            tuple(r for r in rows if r.app_name != root.app_name),
        )

    def downstream_record(
        self, root: int, app_name: str, lease_seconds: float
    ) -> RerunRecord | None:
        """The rerun of dependant ``app_name`` that rerun ``root`` started (``--downstream``),
        if it started one (two transactions: the dependant's run, then its rerun)."""
        row = self._one(
            "downstream_rerun", {"root": root, "app_name": app_name}, "downstream_record"
        )
        return self.rerun_record(row["run_id"], lease_seconds) if row else None

    def abandon_run(self, run_id: int, error: str) -> bool:
        """Record a running run whose lease expired as abandoned; False when it was not running
        (or is another login's whose own lease has not expired: ``crontabber_abandon_run``)."""

        def work(cur: Any) -> bool:
            cur.execute(SHARED["abandon_run"], {"run_id": run_id, "error": error})
            return bool(cur.fetchone()[0])

        return self.state.in_transaction(work, "abandon_run")


def _rerun_to_join(
    cur: Any, app_name: str, resumed_from: int | None, downstream_of: int | None
) -> tuple[int, int | None] | None:
    """The first run of the rerun a starting run joins, locked, and that rerun's ``parallel``
    cap; None when the run starts a new rerun. It joins ``resumed_from`` when given; else a
    dependant's rerun (``downstream_of``) is started once: under the lock of the rerun it
    follows, a second run of it joins the first.

    Raises:
        ValueError: the run to join does not exist.
    """
    joins = resumed_from
    if joins is None and downstream_of is not None:
        cur.execute(Q["lock_rerun"], {"run_id": downstream_of})
        cur.execute(Q["downstream_rerun"], {"root": downstream_of, "app_name": app_name})
        found = cur.fetchone()
        if found is not None:
            joins = found[0]
    if joins is None:
        return None
    cur.execute(Q["lock_rerun"], {"run_id": joins})
    row = cur.fetchone()
    if row is None:
        raise ValueError(f"no run {joins} to join")
    return joins, row[1]


def _record_lane_units(cur: Any, claim: Claim, units: Sequence[Unit]) -> bool:
    """The state store's unit record for a rerun's lane: fenced by the interval's claim, not by
    the job's marker (which the rerun never holds); the job's row is left alone."""
    for when, took, summary, metrics in units:
        cur.execute(SHARED["interval_done"], {**identity(claim), "starts": when})
        if cur.fetchone() is None:
            return False
        cur.execute(SHARED["log_success"], unit_params(claim, when, took, summary, metrics))
    return True
