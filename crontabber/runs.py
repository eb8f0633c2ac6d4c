"""A scheduled run's life in the state database: its claim (:meth:`RunLifecycle.claim`, a
pass's :meth:`RunLifecycle.claim_next`), its lease (:meth:`RunLifecycle.heartbeat`), its units
(:meth:`RunLifecycle.record_success`) and its end (:meth:`RunLifecycle.finish`), with the
ledger writes a rerun's lane shares (:func:`close_run`, :func:`unit_params`, :func:`identity`).

Each method is one visible transaction (``with self._conn:``) over
:class:`crontabber.connection.StoreConnection`; the queries are ``sql/crontabber/crontabber.sql``'s.
"""

from __future__ import annotations

import datetime as dt
import json

import psycopg2
import psycopg2.errors

from .connection import Q, StoreConnection, _as_dict, first_row, translated
from .errors import HostDrained, JobLocked, JobLockError, JobOngoing, LeaseLost
from .frozen import Frozen
from .state import Claim, FinishRecord, JobState, RunEnd, RunKind, RunStatus, Unit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Sequence


class RunLifecycle(StoreConnection):
    """A run's claim, lease, units and end (each one transaction); the claim's decide callbacks
    run inside the claiming transaction, while the job's row is locked, so the due and ongoing
    checks and the marking are atomic (crontabber did them in separate transactions)."""

    @translated
    def claim(
        self,
        app_name: str,
        depends_on: tuple[str, ...],
        holder: tuple[str, int],
        decide: Callable[[JobState, dt.datetime], bool],
        kind: RunKind = RunKind.SCHEDULED,
        options: Sequence[str] = (),
        drainable: bool = False,
        *,
        lease_seconds: float,
    ) -> tuple[JobState, Claim] | None:
        """Lock the job's row, let ``decide`` check it, and mark it ongoing
        with a new run id (the run's fencing token) and a first heartbeat; the
        run's ledger row (``kind``, status running, the command line's ``options``) is
        written with the marker.

        ``decide(state, now)`` runs with the row locked; it returns False to
        leave the job alone (it is no longer due) or raises
        :class:`JobOngoing`. Returns the state as it was and the claim, or
        None when ``decide`` declined.

        ``drainable``: refuse when the host is drained (checked under the row lock).
        ``lease_seconds``: the claimer's lease, stored with the run (a takeover of it waits for
        that lease, whatever the taker's says: ``crontabber_claim``, migration 0031).

        The lock is ``FOR UPDATE NOWAIT`` (an operator's ``--job NAME [--force]``); a pass
        claims through :meth:`claim_next` instead.

        Raises:
            JobLocked: another transaction holds the row lock.
            JobOngoing: from ``decide``.
            HostDrained: ``drainable`` and an operator drained the host.
        """
        host, pid = holder
        params = {"app_name": app_name, "depends_on": list(depends_on), "host": host}
        try:
            with self._conn, self._cursor() as cur:
                cur.execute(Q["insert_skeleton"], params)
                cur.execute(Q["lock_state"], params)
                row = _as_dict(cur, cur.fetchone())
                state, now = JobState.from_row(row), row["now"]
                if drainable and row["drained"]:
                    raise HostDrained(host)
                if not decide(state, now):
                    return None
                return state, _mark_ongoing(
                    cur, state, depends_on, holder, now, kind, options, lease_seconds
                )
        except psycopg2.errors.LockNotAvailable:
            raise JobLocked(app_name) from None

    @translated
    def claim_next(
        self,
        names: Sequence[str],
        depends_on: Mapping[str, tuple[str, ...]],
        holder: tuple[str, int],
        decide: Callable[[JobState, dt.datetime], bool],
        new: Sequence[str] = (),
        options: Sequence[str] = (),
        *,
        lease_seconds: float,
    ) -> NextClaim:
        """A scheduled pass's claim of the first job of ``names`` (the pass's next candidates,
        in its order) whose row is still due and held by no other transaction, in one
        transaction whatever the number of runners: the rows other runners took since the
        pass read them (run since, or being claimed that moment: ``FOR UPDATE SKIP LOCKED``)
        are passed over by the same statement (``claim_next_due``), never tried one by one.

        A row without a marker is claimed by that statement: a short run's claim is one
        statement. A row with one is judged by ``decide(state, now)`` as in :meth:`claim`; a
        job it declines or that raises :class:`JobOngoing` (running elsewhere) is passed over
        and the next one locked, in the same transaction. ``new``: the candidates the pass
        found no row for (a first run): their rows are inserted first (``insert_skeleton``);
        ``depends_on``: each candidate's parents, written with the marker; ``lease_seconds``:
        the claimer's lease, stored with the run (as :meth:`claim`).

        Returns the claim (None: every candidate was passed over) and the candidates passed
        over before it, each with why (:class:`NextClaim`).

        Raises:
            HostDrained: an operator drained the host (checked under the first row lock).
        """
        host, pid = holder
        left = list(names)
        passed: list[tuple[str, JobLockError | None]] = []
        params = {
            "host": host,
            "pid": pid,
            "holder": f"{host}:{pid}",
            "depends": json.dumps({name: list(depends_on[name]) for name in names}),
            "options": list(options) or None,
            "lease_seconds": lease_seconds,
        }
        with self._conn, self._cursor() as cur:
            for app_name in new:
                skeleton = {"app_name": app_name, "depends_on": list(depends_on[app_name])}
                cur.execute(Q["insert_skeleton"], skeleton)
            while left:
                cur.execute(Q["claim_next_due"], {**params, "names": left})
                row = _as_dict(cur, cur.fetchone())
                chosen = row["app_name"]
                skipped = left[: left.index(chosen)] if chosen is not None else left
                held = set(row["still_due"])  # due still: another runner holds it that moment
                passed += [(name, JobLocked(name) if name in held else None) for name in skipped]
                if chosen is None:
                    break
                left = left[len(skipped) + 1 :]
                state, now = JobState.from_row(row), row["now"]
                if row["drained"]:
                    raise HostDrained(host)
                if row["claimed_run_id"] is not None:  # no marker: claimed by the statement
                    claim = Claim(state.app_name, row["claimed_run_id"], host, pid, now)
                    return NextClaim((state, claim), tuple(passed))
                try:  # a marker: the runner's rule judges it (live elsewhere, or gone)
                    if not decide(state, now):
                        passed.append((state.app_name, None))
                        continue
                except JobOngoing as exc:
                    passed.append((state.app_name, exc))
                    continue
                claim = _mark_ongoing(
                    cur,
                    state,
                    depends_on[state.app_name],
                    holder,
                    now,
                    RunKind.SCHEDULED,
                    options,
                    lease_seconds,
                )
                return NextClaim((state, claim), tuple(passed))
        return NextClaim(None, tuple(passed))

    @translated
    def heartbeat(self, claim: Claim, output: tuple[str, int] | None = None) -> dt.datetime | None:
        """Renew the run's lease, and save the run's captured ``(output, bytes dropped)``
        when given; the new heartbeat, or None when the run no longer holds the job (it
        was taken over or released: fenced off)."""
        text, dropped = output if output is not None else (None, None)
        row = self._one(
            "heartbeat",
            {
                "app_name": claim.app_name,
                "run_id": claim.run_id,
                "output": text,
                "dropped": dropped,
            },
        )
        return row["heartbeat"] if row else None

    @translated
    def record_success(
        self,
        claim: Claim,
        success: dt.datetime,
        duration: dt.timedelta,
        summary: str | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> bool:
        """Save one successful unit: ``last_success``, a log row with the job's
        ``summary`` of it, and the run's progress in the ledger (with the unit's
        ``metrics``), together.

        Returns False, writing nothing, when the run no longer holds the job.
        """
        with self._conn, self._cursor() as cur:
            return _record_units(cur, claim, [(success, duration, summary, metrics)])

    @translated
    def finish(
        self,
        claim: Claim,
        outcome: FinishRecord,
        depends_on: tuple[str, ...],
        failure: tuple[dt.timedelta, Mapping[str, str], str] | None = None,
        units: Sequence[Unit] = (),
        end: RunEnd | None = None,
        ordinary: bool = False,
    ) -> tuple[bool, JobState | None, dt.datetime | None]:
        """Write the end of an attempt, release the marker and log a failure
        (``(duration, last_error record, exception repr)``), in one transaction,
        with the successful ``units`` not written yet (an ordinary job's one
        unit: its success and its next run are then one commit), and the run's
        ledger row (``end``; fenced off when the run no longer held the job).
        ``ordinary``: the run of a job that is not a backfill job (it holds no interval):
        when it succeeded, all of it is one statement (``finish_ordinary``).

        Returns whether the run still held the job, with the job's state row as the end
        left it and the database's clock then (what the runner's pass goes on with: no
        re-read of every job); held False when the run no longer holds the job (another run
        took it over, or an operator released it): the state is left alone and the log
        row says the run was fenced off. The row and clock are None when not known (fenced
        off, or a retry whose first commit went through).
        """
        with self._conn, self._cursor() as cur:
            if ordinary and failure is None and len(units) <= 1:
                fast = _finish_ordinary(cur, claim, outcome, depends_on, units, end)
                if fast is not None:
                    return True, JobState.from_row(fast), fast["now"]
            _record_units(cur, claim, units)  # before finish, which clears the marker they check
            cur.execute(
                Q["finish"],
                {
                    "app_name": claim.app_name,
                    "run_id": claim.run_id,
                    "started": outcome.started,
                    "next_run": outcome.next_run,
                    "succeeded": outcome.succeeded,
                    "keeps_health": outcome.keeps_health,
                    "last_error": json.dumps(dict(outcome.error)),
                    "depends_on": list(depends_on),
                },
            )
            ended = first_row(cur)
            held = ended is not None
            if not held and _finished_already(cur, claim, outcome):
                return True, None, None  # a retry after a commit whose reply was lost
            end = end or RunEnd(RunStatus.SUCCEEDED if failure is None else RunStatus.FAILED)
            recorded = close_run(cur, claim, end, held, failure)
            if ended is None:
                return recorded, None, None
            return recorded, JobState.from_row(ended), ended["now"]


def _record_units(cur: Any, claim: Claim, units: Sequence[Unit]) -> bool:
    """Record each successful unit (its time, its duration, the job's summary of it and its
    metrics) of a run still holding the job; False (nothing written) once it no longer holds it."""
    for when, took, summary, metrics in units:
        cur.execute(
            Q["record_success"],
            {"app_name": claim.app_name, "success": when, "run_id": claim.run_id},
        )
        if cur.fetchone() is None:
            return False
        cur.execute(Q["log_success"], unit_params(claim, when, took, summary, metrics))
        cur.execute(Q["interval_done"], {**identity(claim), "starts": when})
    return True


def _finish_ordinary(
    cur: Any,
    claim: Claim,
    outcome: FinishRecord,
    depends_on: tuple[str, ...],
    units: Sequence[Unit],
    end: RunEnd | None,
) -> dict[str, Any] | None:
    """An ordinary run's success and its unit (at most one) written in one statement; the
    state row as it left it, or None (nothing written) when the run no longer holds the job."""
    when, took, summary, metrics = units[0] if units else (None, dt.timedelta(0), None, None)
    end = end or RunEnd(RunStatus.SUCCEEDED)
    cur.execute(
        Q["finish_ordinary"],
        {
            **identity(claim),
            "success": when,
            "duration": took,
            "summary": summary,
            "metrics": json.dumps(dict(metrics)) if metrics else None,
            "started": outcome.started,
            "next_run": outcome.next_run,
            "keeps_health": outcome.keeps_health,
            "last_error": json.dumps(dict(outcome.error)),
            "depends_on": list(depends_on),
            "status": end.status.value,
            "error": end.error,
            "output": end.output,
            "dropped": end.dropped,
        },
    )
    return first_row(cur)


def unit_params(
    claim: Claim,
    when: dt.datetime,
    took: dt.timedelta,
    summary: str | None,
    metrics: Mapping[str, float] | None,
) -> dict[str, Any]:
    """``log_success``'s parameters: the unit, its summary and its metrics (JSON, or None)."""
    return {
        **identity(claim),
        "success": when,
        "duration": took,
        "summary": summary,
        "metrics": json.dumps(dict(metrics)) if metrics else None,
    }


def _end_run(cur: Any, claim: Claim, end: RunEnd, held: bool) -> None:
    """Write the run's end to its ledger row, and to the interval it still held; a run that
    no longer held the job is fenced off."""
    status = end.status if held else RunStatus.FENCED_OFF
    cur.execute(
        Q["end_run"],
        {
            "run_id": claim.run_id,
            "status": status.value,
            "error": end.error,
            "output": end.output,
            "dropped": end.dropped,
        },
    )
    cur.execute(
        Q["end_intervals"], {"run_id": claim.run_id, "status": status.value, "error": end.error}
    )


def close_run(
    cur: Any,
    claim: Claim,
    end: RunEnd,
    held: bool,
    failure: tuple[dt.timedelta, Mapping[str, str], str] | None,
) -> bool:
    """A run's ledger end and, for a failure or a fenced-off run, its log row; True when the
    run still held what it ended (a success recorded as such). A scheduled run's
    (:meth:`RunLifecycle.finish`) and a rerun's
    (:meth:`crontabber.reruns.store.RerunStore.finish_lane`)."""
    _end_run(cur, claim, end, held)
    if held and failure is None:
        return True
    _log_failure(cur, claim, failure, fenced=not held)
    return held


def _finished_already(cur: Any, claim: Claim, outcome: FinishRecord) -> bool:
    """Whether the state row shows this run's own finish (its run id, no marker,
    its start as last run): a retried finish whose first commit went through."""
    cur.execute(Q["get_state"], {"app_name": claim.app_name})
    row = cur.fetchone()
    now = _as_dict(cur, row) if row else {}
    return (
        now.get("run_id") == claim.run_id
        and now.get("ongoing") is None
        and now.get("last_run") == outcome.started
    )


def _log_failure(
    cur: Any,
    claim: Claim,
    failure: tuple[dt.timedelta, Mapping[str, str], str] | None,
    *,
    fenced: bool,
) -> None:
    """Log a failed attempt; a run fenced off logs ``LeaseLost``, saying how
    the job itself ended (failed with its error, or succeeded)."""
    duration, error, exc_repr = failure or (dt.timedelta(0), {}, "")
    if fenced:
        ended = f"the job {'failed: ' + exc_repr if failure else 'succeeded'}"
        error = {"type": repr(LeaseLost), "traceback": str(error.get("traceback", ""))}
        exc_repr = f"LeaseLost('run {claim.run_id} was fenced off; {ended}')"
    cur.execute(
        Q["log_failure"],
        {
            **identity(claim),
            "duration": duration,
            "exc_type": error["type"],
            "exc_value": exc_repr,
            "exc_traceback": error["traceback"],
        },
    )


class NextClaim(Frozen):
    """What :meth:`RunLifecycle.claim_next` took: the job's state before and its claim (None:
    nothing), and the candidates it passed over, each with why: :class:`JobOngoing` (running
    elsewhere), :class:`JobLocked` (another runner held its row that moment), None (another
    runner ran it since the pass read it)."""

    claimed: tuple[JobState, Claim] | None
    passed: tuple[tuple[str, JobLockError | None], ...]


def _mark_ongoing(
    cur: Any,
    state: JobState,
    depends_on: tuple[str, ...],
    holder: tuple[str, int],
    now: dt.datetime,
    kind: RunKind,
    options: Sequence[str],
    lease_seconds: float,
) -> Claim:
    """Mark the locked job ongoing for ``holder`` with a new run id (its fencing token) and
    write the run's ledger row (``crontabber_claim``); a marker ``decide`` let it take over is
    recorded abandoned by the same call (the function refuses a live one: its lease is the
    holder's, stored at its claim)."""
    host, pid = holder
    abandoned: dict[str, str | None] = (
        dict(_abandoned_record(state, f"taken over by {host}:{pid}"))
        if state.ongoing is not None
        else {"exc_type": None, "exc_value": None}
    )
    cur.execute(
        Q["mark_ongoing"],
        {
            "app_name": state.app_name,
            "depends_on": list(depends_on),
            "now": now,
            "holder": f"{host}:{pid}",
            "host": host,
            "pid": pid,
            "kind": kind.value,
            "options": list(options) or None,
            "lease_seconds": lease_seconds,
            **abandoned,
        },
    )
    return Claim(state.app_name, cur.fetchone()[0], host, pid, now)


def _abandoned_record(state: JobState, found_by: str) -> dict[str, str]:
    """The failure record (``exc_type``, ``exc_value``) of ``state``'s run, abandoned (its
    holder died), saying who found it."""
    from .errors import RunAbandoned
    from .formats import utc_text

    beat = f"last heartbeat {utc_text(state.heartbeat)}" if state.heartbeat else "no heartbeat"
    holder = state.ongoing_by or "an unknown holder (crontabber 0.18?)"
    value = (
        f"RunAbandoned('run {state.run_id} on {holder}, started {utc_text(state.ongoing)}, "
        f"stopped renewing its lease without recording its end ({beat}); {found_by}')"
    )
    return {"exc_type": repr(RunAbandoned), "exc_value": value}


def _log_abandoned(cur: Any, state: JobState, found_by: str) -> None:
    """Record ``state``'s run as abandoned (its holder died), saying who found it."""
    cur.execute(
        Q["log_abandoned"], {"app_name": state.app_name, **_abandoned_record(state, found_by)}
    )


def identity(claim: Claim) -> dict[str, Any]:
    """The columns naming who wrote a log row."""
    return {
        "app_name": claim.app_name,
        "run_id": claim.run_id,
        "host": claim.host,
        "pid": claim.pid,
    }
