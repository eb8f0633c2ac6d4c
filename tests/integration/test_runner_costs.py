"""What a tick costs PostgreSQL, counted (statements and transactions, never times) on the
real connection of an in-process tick: the idle pass is O(1) whatever the number of jobs,
and a short run costs the same at 10 and at 200 configured jobs, at most 2 transactions
(the claim with the ledger's start, the end with the state), no heartbeat, and 2 statements
(claim_next_due claims a row without a marker; finish_ordinary ends a run that succeeded)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from crontabber import sqlfiles
from crontabber.config.catalog import load_jobs
from crontabber.config.settings import load_settings
from crontabber.runner import TAKEN_ELSEWHERE, Runner, Status
from crontabber.store import StateStore, connect
from tests.fixtures import fleet_jobs


@dataclasses.dataclass
class Counts:
    statements: int = 0
    transactions: int = 0
    rows: int = 0  # rows the statements returned
    rollbacks: int = 0  # transactions ended by an exception


class CountingCursor:
    def __init__(self, cursor, connection, counts):
        self._cursor, self._connection, self._counts = cursor, connection, counts

    def __enter__(self):
        self._cursor.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cursor.__exit__(*exc)

    def execute(self, *args, **kwargs):
        self._counts.statements += 1
        if self._connection.autocommit:  # a round-trip statement: its own transaction
            self._counts.transactions += 1
        done = self._cursor.execute(*args, **kwargs)
        if self._cursor.description is not None:
            self._counts.rows += max(self._cursor.rowcount, 0)
        return done

    def __getattr__(self, name):
        return getattr(self._cursor, name)


class CountingConnection:
    """The store's real psycopg2 connection, counting what goes through it: each
    ``with connection:`` block is one transaction, each statement outside one too."""

    def __init__(self, connection, counts):
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_counts", counts)

    def __getattr__(self, name):
        return getattr(self._connection, name)

    def __setattr__(self, name, value):
        setattr(self._connection, name, value)

    def __enter__(self):
        self._connection.__enter__()
        return self

    def __exit__(self, *exc):
        self._counts.transactions += 1
        self._counts.rollbacks += exc[0] is not None
        return self._connection.__exit__(*exc)

    def cursor(self, *args, **kwargs):
        return CountingCursor(
            self._connection.cursor(*args, **kwargs), self._connection, self._counts
        )


@pytest.fixture
def counted(monkeypatch):
    """Run a tick of ``crontab`` in-process and count what its state store sends."""
    real_init = StateStore.__init__

    def tick(crontab, *args: str) -> Counts:
        counts = Counts()

        def init(self, connection, *args, **kwargs):
            real_init(self, CountingConnection(connection, counts), *args, **kwargs)

        monkeypatch.setattr(StateStore, "__init__", init)
        try:
            code, out = crontab.run(*args)
        finally:
            monkeypatch.setattr(StateStore, "__init__", real_init)
        assert code == 0, out
        return counts

    return tick


def costs(crontab, counted, jobs: int, due: int) -> tuple[Counts, Counts]:
    """An idle tick's counts, then a tick's with ``due`` of ``jobs`` no-op jobs due."""
    crontab.configure(fleet_jobs.entries(jobs))
    assert crontab.run()[0] == 0  # each runs once: from here on none is due
    runs = ran(crontab)
    idle = counted(crontab)
    assert ran(crontab) == runs
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '1 minute' WHERE app_name "
        "= ANY(%s)",
        ([f"noop-{i}" for i in range(0, jobs, jobs // due)][:due],),
    )
    busy = counted(crontab)
    assert ran(crontab) == runs + due
    return idle, busy


def ran(crontab) -> int:
    return crontab.sql("SELECT count(*) AS n FROM crontabber_run WHERE status = 'succeeded'")[0][
        "n"
    ]


def test_a_short_run_costs_the_same_at_10_and_at_200_jobs(crontab, counted):
    idle_10, busy_10 = costs(crontab, counted, 10, 3)
    idle_200, busy_200 = costs(crontab, counted, 200, 3)
    # the idle pass: O(1) statements whatever the number of jobs (it reads each job's row once)
    assert (idle_10.statements, idle_10.transactions) == (
        idle_200.statements,
        idle_200.transactions,
    )
    assert idle_200.rows - idle_10.rows == 190
    # nothing done per run reads every job: the runs' statements, transactions and rows
    assert delta(busy_10, idle_10) == delta(busy_200, idle_200)
    per_run = delta(busy_10, idle_10)
    assert per_run.transactions <= 2 * 3, per_run  # 3 short runs, no heartbeat
    # each: the claim and the end, one statement each (the floor: what a run must write)
    assert per_run.statements <= 2 * 3, per_run
    print(f"idle tick {idle_10}; 3 short runs {per_run}")


def delta(busy: Counts, idle: Counts) -> Counts:
    return Counts(
        *(getattr(busy, f.name) - getattr(idle, f.name) for f in dataclasses.fields(Counts))
    )


def test_a_pass_passes_over_rows_another_runner_holds_without_an_error(crontab, counted, database):
    crontab.configure(fleet_jobs.entries(3))
    assert crontab.run()[0] == 0
    crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '1 minute'")
    holder = connect(database)
    try:
        with holder.cursor() as cur:  # another runner claiming noop-1 right now
            cur.execute("SELECT 1 FROM crontabber WHERE app_name = 'noop-1' FOR UPDATE")
            counts = counted(crontab)  # the tick: exit 0, the others ran
            assert counts.rollbacks == 0  # SKIP LOCKED: no error, no rollback for the held row
            ran = {
                r["app_name"]
                for r in crontab.sql("SELECT app_name FROM crontabber_run WHERE run_id > 3")
            }
            assert ran == {"noop-0", "noop-2"}
            code, out = crontab.run("--job", "noop-1", "--force")  # an operator's: NOWAIT, exit 2
            assert code == 2 and "locked by another runner" in out
    finally:
        holder.close()
    assert crontab.run()[0] == 0
    assert {
        r["app_name"] for r in crontab.sql("SELECT app_name FROM crontabber_run WHERE run_id > 5")
    } == {"noop-1"}


def test_a_pass_passes_over_jobs_another_runner_ran_since_its_read_in_one_claim(crontab):
    """Hosts racing over one due set: what another runner ran after this pass read the state
    costs this pass one claim (one transaction) for the lot, never one per job."""
    crontab.configure(fleet_jobs.entries(12))
    assert crontab.run()[0] == 0
    crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '1 minute'")
    settings = load_settings(str(crontab.ini), {})
    counts = Counts()
    store = StateStore(CountingConnection(connect(crontab.database), counts), crontab.database)
    try:
        runner = Runner(settings, load_jobs(settings), store)
        states, _ = runner.snapshot()  # this pass's read: all 12 due
        assert all(state.next_run is not None for state in states.values())
        assert crontab.run()[0] == 0  # another host's tick runs them all meanwhile
        read = Counts(**dataclasses.asdict(counts))
        results = runner.run_all()
    finally:
        store.close()
    assert {r.status for r in results} == {Status.SKIPPED}
    assert {r.detail for r in results} == {TAKEN_ELSEWHERE}
    assert len(results) == 12
    assert delta(counts, read).transactions == 1  # one claim passed over all 12
    assert crontab.sql("SELECT count(*) AS n FROM crontabber_run")[0]["n"] == 24


def test_a_claim_takes_the_first_candidate_nobody_else_has(crontab, database):
    """``claim_next`` in one transaction: a row held that moment (JobLocked), a row run since
    the read (None) and a job running live elsewhere (JobOngoing) are passed over, each saying
    why, the next is claimed, the ones after it are left for the next claim."""
    crontab.configure(fleet_jobs.entries(5))
    assert crontab.run()[0] == 0
    crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '1 minute'")
    crontab.sql(
        "UPDATE crontabber SET next_run = next_run + interval '2 hours' WHERE app_name = 'noop-1'"
    )  # another runner ran it since
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp(), heartbeat = clock_timestamp(), "
        "ongoing_by = 'other-host:4242' WHERE app_name = 'noop-2'"
    )  # running live on another host
    settings = load_settings(str(crontab.ini), {})
    jobs = {job.app_name: job for job in load_jobs(settings)}
    counts = Counts()
    store = StateStore(CountingConnection(connect(database), counts), database)
    holder = connect(database)
    try:
        runner = Runner(settings, list(jobs.values()), store, host="this-host")
        with holder.cursor() as cur:  # another runner claiming noop-0 right now
            cur.execute("SELECT 1 FROM crontabber WHERE app_name = 'noop-0' FOR UPDATE")
            names = [f"noop-{i}" for i in range(5)]
            taken = store.claim_next(
                names,
                {name: () for name in names},
                ("this-host", 1),
                lambda state, now: runner._decider(jobs[state.app_name], False)(state, now),
                lease_seconds=60.0,
            )
        holder.rollback()
    finally:
        holder.close()
        store.close()
    assert counts.transactions == 1 and counts.rollbacks == 0
    assert taken.claimed is not None and taken.claimed[1].app_name == "noop-3"
    assert [(name, type(exc).__name__) for name, exc in taken.passed] == [
        ("noop-0", "JobLocked"),
        ("noop-1", "NoneType"),
        ("noop-2", "JobOngoing"),
    ]
    ongoing = crontab.sql("SELECT app_name FROM crontabber WHERE ongoing_by LIKE 'this-host:%%'")
    assert [row["app_name"] for row in ongoing] == ["noop-3"]


def test_a_claim_reads_its_candidates_rows_only_whatever_the_number_of_jobs(crontab, database):
    """``claim_next_due`` (``crontabber_claim_next``) looks each candidate up by the index:
    with 1,000 jobs (analysed, as a live table is) it scans no table whole, so a run's claim
    reads the same rows at 10 jobs and at 1,000 (a plain ``app_name = ANY(...)`` was planned as
    a scan of them all). Counted inside the function by the transaction's own statistics."""
    crontab.configure(fleet_jobs.entries(3))
    assert crontab.run()[0] == 0
    crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, error_count, depends_on, last_error) "
        "SELECT 'filler-' || i, clock_timestamp() + interval '1 hour', 0, '{}', '{}' "
        "FROM generate_series(1, 1000) AS i"
    )
    crontab.sql("ANALYZE crontabber")
    names = [f"noop-{i}" for i in range(3)] + [f"filler-{i}" for i in range(1, 14)]
    params = {
        "names": names,
        "host": "this-host",
        "pid": 1,
        "holder": "this-host:1",
        "depends": json.dumps({name: [] for name in names}),
        "options": None,
        "lease_seconds": 60.0,
    }
    counts = (
        "SELECT seq_scan, idx_scan, idx_tup_fetch FROM pg_stat_xact_user_tables "
        "WHERE relname = 'crontabber'"
    )
    connection = connect(database)
    try:
        with connection.cursor() as cur:
            for _ in range(8):  # past plpgsql's custom plans, to its generic one
                cur.execute(sqlfiles.load("crontabber.sql")["claim_next_due"], params)
                assert cur.fetchone() is not None
                connection.rollback()
            cur.execute(counts)  # (a backend's counts of its ended transactions may be pending)
            before = cur.fetchone()
            cur.execute(sqlfiles.load("crontabber.sql")["claim_next_due"], params)
            cur.execute(counts)
            seq_scan, idx_scan, fetched = (a - b for a, b in zip(cur.fetchone(), before))
        connection.rollback()
    finally:
        connection.close()
    assert seq_scan == 0 and idx_scan >= 1, (seq_scan, idx_scan)
    assert fetched <= 2 * len(names), (fetched, idx_scan)


def test_a_host_drained_after_its_read_claims_nothing_and_says_so_for_each_job(crontab):
    """The drain is checked under the first row lock a claim takes: a pass whose read came
    before an operator's --drain claims nothing after it, and every due job it judges says
    why (this host is drained), not only the one whose claim met the drain."""
    crontab.configure(fleet_jobs.entries(5))
    assert crontab.run()[0] == 0
    crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '1 minute'")
    settings = load_settings(str(crontab.ini), {})
    store = StateStore(connect(crontab.database), crontab.database)
    try:
        runner = Runner(settings, load_jobs(settings), store, host="drained-host")
        runner.snapshot()  # the pass's read: 5 due, the host not drained
        crontab.sql(
            "INSERT INTO crontabber_host (host, version, last_tick, skew_seconds, drained_at) "
            "VALUES ('drained-host', 'x', clock_timestamp(), 0, clock_timestamp())"
        )
        results = runner.run_all()
    finally:
        store.close()
    assert sorted(r.app_name for r in results) == [f"noop-{i}" for i in range(5)]
    assert {(r.status, r.detail) for r in results} == {(Status.SKIPPED, "this host is drained")}
    assert crontab.sql("SELECT count(*) AS n FROM crontabber_run")[0]["n"] == 5  # the first tick's
