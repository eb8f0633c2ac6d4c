"""The pieces of ``python -m bench fleet``: a scenario's own database with M no-op jobs, H
runner processes started together (each its own host name), what PostgreSQL and PgBouncer
counted meanwhile, what the run ledger says of the runs, and the machine's own limits.

Counting. Directly: ``pg_stat_database`` of the scenario's database, ``xact_commit +
xact_rollback`` (transactions) and ``tup_returned`` (rows read). A backend sends its counts
at exit or after an idle second, so before each reading every client backend of the database
has ended (the ticks' end with them; any left is ended) and the reading waits until the
counts stop moving; a connection's login counts one transaction. Through PgBouncer:
PgBouncer's ``SHOW STATS`` of the database, ``total_xact_count`` and ``total_query_count``
(query messages: a string of several statements counts once), read at once, its pooled
server connections left open as in production (ending them to read PostgreSQL's counts
would make it log in again in the next round). Statements are counted on the pooled path
only: pg_stat_statements is not loaded on the shared server, which a benchmark does not
restart. Serving runners stay connected, so their direct readings wait for what they counted
more than a second ago instead. The bench's own statements go directly, never through
PgBouncer, and outside the counted spans, but for the one that makes the jobs due, whose
cost is measured once and taken out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import devservices
from crontabber.schema import ensure_schema
from crontabber.store import connect
from devservices.databases import database

from .fleet_jobs import app_name, class_name

REPO = Path(__file__).resolve().parent.parent
PATHS = ("direct", "pgbouncer")
#: A serving runner (issue #45 item 2) and how often it ticks (``tick_seconds``, set in the
#: INI of the serve scenarios).
SERVE = ("-m", "crontabber", "--serve")
TICK_SECONDS = 1.0

#: Every job due again at one instant (the issue's figures: next_run set in the past by
#: hand); returns that instant.
MAKE_DUE = "UPDATE crontabber SET next_run = now() RETURNING now()"
#: The floor: the least a run must write, as two statements in two transactions (the claim
#: with its ledger row; the end with the state, the ledger and crontabber's log row).
FLOOR_CLAIM = """
WITH claimed AS (
    UPDATE crontabber SET ongoing = clock_timestamp(), ongoing_by = %(holder)s,
        run_id = nextval('crontabber_run_id_seq'), heartbeat = clock_timestamp()
    WHERE app_name = %(app_name)s AND ongoing IS NULL AND next_run < clock_timestamp()
    RETURNING run_id, ongoing
)
INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat)
SELECT run_id, %(app_name)s, 'scheduled', %(host)s, %(pid)s, ongoing, ongoing FROM claimed
RETURNING run_id"""
FLOOR_END = """
WITH ended AS (
    UPDATE crontabber SET first_run = COALESCE(first_run, ongoing), last_run = ongoing,
        last_success = ongoing, next_run = ongoing + interval '1 hour', error_count = 0,
        ongoing = NULL, ongoing_by = NULL, heartbeat = NULL
    WHERE app_name = %(app_name)s AND run_id = %(run_id)s AND ongoing IS NOT NULL
    RETURNING app_name, last_run
), ledger AS (
    UPDATE crontabber_run SET ended = clock_timestamp(), status = 'succeeded', intervals = 1
    WHERE run_id = %(run_id)s
)
INSERT INTO crontabber_log (app_name, duration, success, run_id, host, pid)
SELECT app_name, clock_timestamp() - last_run, last_run, %(run_id)s, %(host)s, %(pid)s
FROM ended"""
#: What the server counted of a database: transactions, rows read.
STAT = """
SELECT xact_commit + xact_rollback, tup_returned FROM pg_stat_database WHERE datname = %s"""
#: The ledger's runs after a run id; how many have ended, and the last end.
RUNS_SINCE = """
SELECT app_name, host, status, started FROM crontabber_run WHERE run_id > %s ORDER BY run_id"""
ENDED_SINCE = """
SELECT count(*), max(ended) FROM crontabber_run WHERE run_id > %s AND ended IS NOT NULL"""
#: A child process that has imported what a tick imports, forking and reaping no-op
#: children for ``argv[1]`` seconds; prints forks per second.
FORK_LOOP = """
import os, sys, time
import crontabber.cli.dispatch, crontabber.tick, crontabber.supervisor, crontabber.capture
import bench.fleet_jobs
seconds, count, start = float(sys.argv[1]), 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    count += 1
print(count / (time.perf_counter() - start))
"""


def load_average() -> str:
    """The 1-minute load average (/proc/loadavg)."""
    return Path("/proc/loadavg").read_text().split()[0]


def serve_available() -> bool:
    """Whether the runner's command line has a ``--serve`` mode (its ``--help`` says)."""
    done = subprocess.run(
        [sys.executable, "-m", "crontabber", "--help"],
        capture_output=True,
        text=True,
        env=_env({}),
        cwd=REPO,
    )
    return "--serve" in done.stdout


def fork_rate(seconds: float = 1.0) -> float:
    """Forks + exits + reaps of a no-op child per second, from a process that imported the
    runner (the machine's own limit on runs as processes)."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_LOOP, str(seconds)],
        capture_output=True,
        text=True,
        check=True,
        env=_env({}),
    )
    return float(done.stdout.split()[-1])


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


@dataclass
class Counts:
    """What the server and the pooler counted of one database so far."""

    transactions: int
    queries: int | None  # PgBouncer's, on the pooled path only
    rows: int | None = None  # rows read (pg_stat_database's tup_returned), direct path only

    def __sub__(self, other: Counts) -> Counts:
        return Counts(
            self.transactions - other.transactions,
            _minus(self.queries, other.queries),
            _minus(self.rows, other.rows),
        )


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


@dataclass
class Tick:
    """One runner process: its host name, start and end (perf_counter), exit code."""

    host: str
    start: float
    end: float
    code: int

    @property
    def seconds(self) -> float:
        return self.end - self.start


class FleetDatabase:
    """A scenario's own database (a copy of ``template``) with M no-op jobs in an INI, reached
    directly or through PgBouncer (``path``); dropped by :meth:`drop`."""

    def __init__(self, name: str, template: str, jobs: int, path: str, workdir: Path) -> None:
        self.name = name
        self.jobs = jobs
        self.pooled = path == "pgbouncer"
        self.services = devservices.current()
        self.admin = connect(database("postgres"))
        self.admin.autocommit = True
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self._admin(f"CREATE DATABASE {name} TEMPLATE {template}")
        self.direct = database(name)  # the bench's own reads and writes: never counted
        pooled = self.direct.replace(port=self.services.pgb_port)
        self.settings = pooled if self.pooled else self.direct
        self.ini = workdir / f"{name}.ini"
        entries = "\n".join(f"        bench.fleet_jobs.{class_name(i)}|1h" for i in range(jobs))
        self.ini.write_text(f"[crontabber]\n    jobs='''\n{entries}\n    '''\n")
        self._seed()
        before = self.counts()
        self.sql(MAKE_DUE.replace("now()", "next_run", 1))  # make_due's cost, changing nothing
        #: What :meth:`make_due` adds to the counts (PostgreSQL counts a login as a
        #: transaction, and its catalog reads as rows; nothing through PgBouncer, which the
        #: bench's own statements bypass): taken out of the span it opens.
        self.own = self.counts() - before

    def _admin(self, query: str, params: Any = None) -> list[tuple]:
        with self.admin.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

    def sql(self, query: str, params: Any = None) -> list[tuple]:
        """Run ``query`` on the scenario's database (a direct connection of its own, closed
        after: never through PgBouncer, never inside a counted span)."""
        conn = connect(self.direct)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(query, params)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    def _seed(self) -> None:
        """Every job's state row, as after a run an hour ago (due when :meth:`make_due`)."""
        self.sql(
            "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success,"
            " error_count, depends_on, last_error)"
            " SELECT a, now() + interval '1 hour', now(), now(), now(), 0, '{}', '{}'"
            " FROM unnest(%s::text[]) AS a; ANALYZE",
            ([app_name(i) for i in range(self.jobs)],),
        )

    def vacuum(self) -> None:
        """VACUUM ANALYZE the runner's tables (autovacuum is off in the scenario databases),
        between measured spans: the last round's dead rows do not slow the next one."""
        self.sql("VACUUM ANALYZE crontabber, crontabber_run, crontabber_log, crontabber_host")

    def make_due(self) -> Any:
        """Make every job due now; the instant (the database clock) they fell due."""
        return self.sql(MAKE_DUE)[0][0]

    def last_run_id(self) -> int:
        return int(self.sql("SELECT COALESCE(max(run_id), 0) FROM crontabber_run")[0][0])

    def counts(self, serving: bool = False) -> Counts:
        """The transactions run on the database so far, and on the pooled path the queries:
        PostgreSQL's count directly (once every client backend of the database has ended
        and sent its counts), PgBouncer's through it (its pooled server connections stay:
        ending them would make it log in again in the next round). ``serving``: runners
        that stay connected are up, so their backends are not ended: the reading waits
        until they have sent what they counted more than a second ago (PostgreSQL sends a
        busy backend's counts at most once a second)."""
        if self.pooled:
            stats = self.services.pgbouncer_stats().get(self.name, {})
            xacts, queries = stats.get("total_xact_count", 0), stats.get("total_query_count", 0)
            return Counts(int(xacts), int(queries))
        if serving:  # no reading is sure then: a connected backend's counts may be held back
            stat, deadline = self._stat(), time.monotonic() + 12  # (a busy stats lock defers
            while time.monotonic() < deadline:  # a flush: up to 10 s once it is idle)
                time.sleep(1.2)
                settled = self._stat()
                if settled == stat:
                    break
                stat = settled
            return Counts(*stat)
        deadline = time.monotonic() + 30
        while self._admin(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND backend_type = 'client backend'",
            (self.name,),
        )[0][0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: client backends do not end")
            time.sleep(0.05)
        stat = self._stat()
        while (settled := self._stat()) != stat:  # a backend's exit sends its counts after it
            stat = settled  # has left pg_stat_activity
        return Counts(*stat)

    def _stat(self) -> tuple[int, None, int]:
        """pg_stat_database's transactions and rows read of the database."""
        time.sleep(0.1)
        self._admin("SELECT pg_stat_clear_snapshot()")
        transactions, rows = self._admin(STAT, (self.name,))[0]
        return int(transactions), None, int(rows)

    def runs_since(self, run_id: int) -> list[tuple[str, str, str, Any]]:
        """The ledger's runs after ``run_id``: (app name, host, status, started)."""
        return [
            (row[0], row[1], row[2], row[3])
            for row in self.sql(
                RUNS_SINCE,
                (run_id,),
            )
        ]

    def env(self) -> dict[str, str]:
        """The environment of this database's runners."""
        return _env(
            {
                "RESOURCE_POSTGRESQL_DBNAME": self.name,
                "RESOURCE_POSTGRESQL_PORT": str(self.settings.port),
            }
        )

    def ended_runs(self, run_id: int) -> tuple[int, Any]:
        """How many runs after ``run_id`` have ended, and the last end (database clock)."""
        row = self.sql(
            ENDED_SINCE,
            (run_id,),
        )[0]
        return int(row[0]), row[1]

    def ticks(self, hosts: int, tag: str) -> list[Tick]:
        """Start ``hosts`` cron ticks together, each in a UTS namespace of its own (host
        name ``fleet-<tag>-<n>``, as separate hosts have); wait for every one."""
        env = self.env()
        argv = [sys.executable, "-m", "crontabber", f"--admin.conf={self.ini}"]
        done: list[Tick] = []
        gate = threading.Barrier(hosts)

        def one(host: str) -> None:
            gate.wait()
            start = time.perf_counter()
            code = subprocess.run(
                in_namespace(host, argv),
                env=env,
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ).returncode
            done.append(Tick(host, start, time.perf_counter(), code))

        threads = [threading.Thread(target=one, args=(host_name(tag, n),)) for n in range(hosts)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return done

    def floor(self) -> tuple[float, Counts]:
        """Run every job once as the least a run must write (:data:`FLOOR_CLAIM`,
        :data:`FLOOR_END`) over one connection of the scenario's path; executions per second
        and what the server and the pooler counted."""
        self.vacuum()
        self.make_due()
        before = self.counts()
        conn = connect(self.settings)
        conn.autocommit = True
        host, pid = "fleet-floor", os.getpid()
        start = time.perf_counter()
        with conn.cursor() as cur:
            for index in range(self.jobs):
                params = {
                    "app_name": app_name(index),
                    "holder": f"{host}:{pid}",
                    "host": host,
                    "pid": pid,
                }
                cur.execute(FLOOR_CLAIM, params)
                cur.execute(FLOOR_END, {**params, "run_id": cur.fetchone()[0]})
        rate = self.jobs / (time.perf_counter() - start)
        conn.close()
        return rate, self.counts() - before

    def drop(self) -> None:
        self._admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        self.admin.close()


def host_name(tag: str, index: int) -> str:
    return f"fleet-{tag}-{index}"


def in_namespace(host: str, argv: list[str]) -> list[str]:
    """``argv`` run in a UTS namespace of its own whose host name is ``host``."""
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]


class Servers:
    """``hosts`` serving runners (:data:`SERVE`) on ``db``, each its own host, until
    :meth:`stop`. Their INI is the database's with ``tick_seconds`` (:data:`TICK_SECONDS`)."""

    def __init__(self, db: FleetDatabase, hosts: int, tag: str, workdir: Path) -> None:
        self.ini = workdir / f"{db.name}-serve.ini"
        section = f"[crontabber]\n    tick_seconds={TICK_SECONDS:g}\n"
        self.ini.write_text(db.ini.read_text().replace("[crontabber]\n", section, 1))
        self.logs = [workdir / f"{db.name}-serve-{n}.log" for n in range(hosts)]
        argv = [sys.executable, *SERVE, f"--admin.conf={self.ini}"]
        self.hosts = [host_name(tag, n) for n in range(hosts)]
        self.procs = [
            subprocess.Popen(
                in_namespace(host, argv),
                env=db.env(),
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=log.open("wb"),
            )
            for host, log in zip(self.hosts, self.logs)
        ]

    def died(self) -> list[str]:
        """The runners that exited already: host, exit code, the last line they wrote."""
        return [
            f"{host} exited {proc.returncode}: {_last_line(log)}"
            for host, proc, log in zip(self.hosts, self.procs, self.logs)
            if proc.poll() is not None
        ]

    def stop(self, grace: float = 60.0) -> list[int]:
        """SIGTERM every runner, wait up to ``grace`` seconds (then SIGKILL); exit codes."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return [proc.returncode for proc in self.procs]


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(nothing)"


def make_template(name: str) -> str:
    """A database holding the runner's schema, which every scenario's database copies."""
    admin = connect(database("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        cur.execute(f"CREATE DATABASE {name}")
    admin.close()
    conn = connect(database(name))
    try:
        ensure_schema(conn)
        with conn, conn.cursor() as cur:
            # autovacuum's own transactions and reads would land in the counts at random:
            # FleetDatabase.vacuum runs between the measured spans instead
            cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for (table,) in cur.fetchall():
                cur.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')
    finally:
        conn.close()
    return name


def drop_database(name: str) -> None:
    admin = connect(database("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.close()
