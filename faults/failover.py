"""PostgreSQL failover under load: the primary killed (``kill -9`` of every process of its
cluster, as a crashed machine) while three hosts run jobs, its streaming standby promoted two
seconds later, the old primary gone; every runner has the multi-host address of both servers
with ``target_session_attrs = read-write``, and goes on at its next tick.

Each round builds its own primary and standby (``scripts/services.sh start pg pgs`` in a state
directory of its own: production settings, not the tests' fsync=off), in one of two modes:

- ``async``: asynchronous streaming replication (PostgreSQL's default);
- ``remote_apply``: ``synchronous_standby_names = 'pgs'``, ``synchronous_commit =
  remote_apply`` (a commit returns once the standby has applied it).

Two jobs (:mod:`faults.failover_jobs`) journal each run outside the database and catch a
second copy running at once (a file lock); a driver makes a job due again as soon as its run is
recorded (counting the updates PostgreSQL acknowledged). After the round settles, from the
surviving database and the journal: runs done (journal), runs recorded, runs done twice (done
but not recorded, so done again), acknowledged writes lost (a due-making the new primary never
saw), runs at the same time (the lease's mutual exclusion across the promotion), fenced runs.

The lease (15 s, heartbeat 3 s) outlasts the outage (the promotion comes 2 s after the kill):
a run in flight keeps its job and records its end on the new primary. Each mode is judged by
the guarantee it gives (docs/deploy.md), and its result's lost and duplicated count what breaks
that guarantee; every raw count is among its figures:

- ``async``: at least once, never two at once. The last commits before the crash may be lost
  (a run's recorded end: the run is done again; an operator's write): allowed and counted.
  Broken by two copies of a job at once (duplicated) or a due run never done (lost).
- ``remote_apply``: exactly once, nothing acknowledged lost. Broken by any run done twice or
  at once (duplicated), or an acknowledged write missing on the new primary (lost).
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import devservices
from faults.harness import ROOT
from faults.net import free_port, scaled
from faults.result import FaultResult

MODES = ("async", "remote_apply")
ROUNDS = 3  # failovers per mode at scale 1.0
HOSTS = 3
WARM, DETECT, AFTER = 6.0, 2.0, 10.0  # seconds: load before the kill, until the promotion, after
JOBS = ("witness-a", "witness-b")
PASSWORD = devservices.DEFAULT_DATABASE["password"]

INI = """
[crontabber]
    error_retry_time=1
    heartbeat_seconds=3
    lease_seconds=15
    kill_grace_seconds=2
    jobs='''
    faults.failover_jobs.WitnessA|1d
    faults.failover_jobs.WitnessB|1d
    '''
[resource]
    [[postgresql]]
        host=127.0.0.1,127.0.0.1
        port={ports}
        dbname=crontabber
        user=crontabber
        target_session_attrs=read-write
[logging]
    level=WARNING
"""


def run(scale: float) -> list[FaultResult]:
    return [_mode(mode, scaled(ROUNDS, scale)) for mode in MODES]


def _mode(mode: str, rounds: int) -> FaultResult:
    totals: collections.Counter[str] = collections.Counter()
    recoveries: list[float] = []  # seconds from each promotion to its first run recorded
    notes: list[str] = []
    converged = 0
    start = time.monotonic()
    for number in range(1, rounds + 1):
        with tempfile.TemporaryDirectory(prefix=f"failover-{mode}-") as tmp:
            counts, problems, recovery = _round(mode, pathlib.Path(tmp))
        totals.update(counts)
        if recovery is not None:
            recoveries.append(recovery)
        if not problems:
            converged += 1
        else:
            notes.append(f"round {number}: " + "; ".join(problems))
    twice = max(0, totals["done"] - totals["recorded"])
    acknowledged_lost = max(0, totals["made_due"] - totals["recorded"])
    figures = {
        "runs done (journal)": str(totals["done"]),
        "runs recorded": str(totals["recorded"]),
        "runs done twice (done, record lost)": str(twice),
        "acknowledged writes lost (a due-making)": str(acknowledged_lost),
        "runs at the same time": str(totals["overlapped"]),
        "fenced runs (exit 4)": str(totals["fenced"]),
        "ticks refused a database (exit 1)": str(totals["refused"]),
        "promotion to the first run ended after it (max)": (
            f"{max(recoveries):.1f} s" if recoveries else "-"
        ),
        "seconds": f"{time.monotonic() - start:.0f}",
    }
    if mode == "async":  # at least once: what breaks it is two at once, or a due never done
        lost, duplicated = totals["unsettled"], totals["overlapped"]
        guarantee = "at least once, never two at once"
    else:
        lost, duplicated = acknowledged_lost, twice + totals["overlapped"]
        guarantee = "exactly once, nothing acknowledged lost"
    return FaultResult(
        f"primary killed, standby promoted ({mode.replace('_', ' ')}: {guarantee})",
        rounds,
        converged,
        lost,
        duplicated,
        figures,
        notes,
    )


def _round(
    mode: str, tmp: pathlib.Path
) -> tuple[collections.Counter[str], list[str], float | None]:
    """One failover: (counts, problems that fail the round, seconds from the promotion to the
    first run that ended after it)."""
    pair = Pair(tmp / "state", mode)
    journal = tmp / "journal.jsonl"
    ini = tmp / "failover.ini"
    ini.write_text(INI.format(ports=f"{pair.primary},{pair.standby}"))
    counts: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    recovery = None
    try:
        pair.start()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "FAILOVER_JOURNAL": str(journal),
            "RESOURCE_POSTGRESQL_PASSWORD": PASSWORD,
        }
        for key in ("RESOURCE_POSTGRESQL_HOST", "RESOURCE_POSTGRESQL_PORT"):
            env.pop(key, None)
        first = _tick(ini, env, "host-0")
        if first.returncode:
            raise RuntimeError(f"the first tick failed: {first.stderr.strip()[-300:]}")
        made_due = collections.Counter({job: 1 for job in JOBS})  # the first runs
        stop = threading.Event()
        driver = threading.Thread(target=_drive, args=(pair, made_due, stop), daemon=True)
        codes: collections.Counter[int] = collections.Counter()
        hosts = [
            threading.Thread(
                target=_host_loop, args=(ini, env, f"host-{n}", stop, codes), daemon=True
            )
            for n in range(1, HOSTS + 1)
        ]
        driver.start()
        for host in hosts:
            host.start()
        time.sleep(WARM)
        pair.kill_primary()
        time.sleep(DETECT)
        pair.promote()
        promoted = time.time()
        time.sleep(AFTER)
        stop.set()
        driver.join(timeout=30)
        for host in hosts:
            host.join(timeout=90)
        settled = _settle(ini, env, pair)
        runs = (
            [json.loads(line) for line in journal.read_text().splitlines()]
            if journal.exists()
            else []
        )
        recorded = pair.query(
            "SELECT count(*) FROM crontabber_log WHERE success IS NOT NULL AND exc_type IS NULL"
        )[0][0]
        after = [r["ended"] for r in runs if r["ended"] > promoted]
        counts.update(
            done=len(runs),
            recorded=recorded,
            made_due=sum(made_due.values()),
            overlapped=sum(r["overlapped"] for r in runs),
            fenced=codes[4],
            refused=codes[1],
        )
        recovery = min(after) - promoted if after else None
        if not settled:
            counts["unsettled"] += 1
            problems.append("jobs still due or running 60 s after the drill")
        if counts["overlapped"]:
            problems.append(f"{counts['overlapped']} runs overlapped another of their job")
        if mode == "remote_apply" and (
            counts["done"] != recorded or counts["made_due"] != recorded
        ):
            problems.append(
                f"remote_apply: {counts['done']} done, {recorded} recorded, {counts['made_due']} "
                "made due"
            )
        if not after:
            problems.append("no run ended after the promotion")
        unexpected = {code: n for code, n in codes.items() if code not in (0, 1, 2, 3, 4)}
        if unexpected:
            problems.append(f"unexpected exit codes {unexpected}")
    finally:
        pair.clean()
    return counts, problems, recovery


def _tick(ini: pathlib.Path, env: dict[str, str], host: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "crontabber", f"--admin.conf={ini}"]
    return subprocess.run(
        ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _host_loop(
    ini: pathlib.Path,
    env: dict[str, str],
    host: str,
    stop: threading.Event,
    codes: collections.Counter[int],
) -> None:
    while not stop.is_set():
        codes[_tick(ini, env, host).returncode] += 1
        time.sleep(0.2)


def _drive(pair: "Pair", made_due: collections.Counter[str], stop: threading.Event) -> None:
    """Make each job due again once its run is recorded; count what PostgreSQL acknowledged."""
    conn = None
    while not stop.wait(0.3):
        try:
            if conn is None:
                conn = pair.connect()
            with conn, conn.cursor() as cur:
                cur.execute(
                    "UPDATE crontabber SET next_run = clock_timestamp() "
                    "WHERE next_run > clock_timestamp() AND ongoing IS NULL RETURNING app_name"
                )
                rows = cur.fetchall()
            made_due.update(row[0] for row in rows)  # acknowledged: the commit returned
        except Exception:  # noqa: BLE001 - the primary is gone: connect again (to the new one)
            if conn is not None:
                conn.close()
            conn = None
    if conn is not None:
        conn.close()


def _settle(ini: pathlib.Path, env: dict[str, str], pair: "Pair") -> bool:
    """Tick until no job is due or running (at most 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = pair.query(
            "SELECT count(*) FROM crontabber WHERE next_run <= clock_timestamp() OR ongoing IS NOT "
            "NULL"
        )[0][0]
        if left == 0:
            return True
        _tick(ini, env, "host-settle")
        time.sleep(0.3)
    return False


class Pair:
    """A primary and its streaming standby of their own (``scripts/services.sh`` in a state
    directory of its own, on free ports)."""

    def __init__(self, state: pathlib.Path, mode: str) -> None:
        self.state, self.mode = state, mode
        self.primary, self.standby = free_port(), free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SYMBOLS_")}
        self.env.update(
            SYMBOLS_STATE_DIR=str(state),
            SYMBOLS_PG_PORT=str(self.primary),
            SYMBOLS_PGS_PORT=str(self.standby),
            SYMBOLS_PG_FAST="0",
            SYMBOLS_PGB_PORT=str(free_port()),
            SYMBOLS_ES_PORT=str(free_port()),
            SYMBOLS_S3_PORT=str(free_port()),
        )

    def sh(self, *args: str) -> None:
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "services.sh"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode:
            raise RuntimeError(f"services.sh {' '.join(args)}: {done.stderr.strip()[-500:]}")

    @property
    def service_dir(self) -> pathlib.Path:
        return devservices.Services({"SYMBOLS_STATE_DIR": str(self.state)}).service_dir

    def start(self) -> None:
        self.sh("start", "pg", "pgs")
        if self.mode == "remote_apply":
            self.superuser(
                "ALTER SYSTEM SET synchronous_standby_names = 'pgs'",
                "ALTER SYSTEM SET synchronous_commit = 'remote_apply'",
                "SELECT pg_reload_conf()",
            )
            deadline = time.monotonic() + 30
            while self.superuser("SELECT sync_state FROM pg_stat_replication") != "sync":
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby never became synchronous")
                time.sleep(0.2)

    def superuser(self, *statements: str) -> str:
        """Run ``statements`` as postgres over the primary's socket; the last one's output."""
        out = ""
        for sql in statements:
            done = subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    "/usr/lib/postgresql/15/bin/psql",
                    "-X",
                    "-qAt",
                    "-h",
                    str(self.service_dir / "pg" / "run"),
                    "-p",
                    str(self.primary),
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-c",
                    sql,
                ],
                capture_output=True,
                text=True,
                timeout=30,
                cwd="/",
            )
            if done.returncode:
                raise RuntimeError(f"psql: {done.stderr.strip()}")
            out = done.stdout.strip()
        return out

    def kill_primary(self) -> None:
        """kill -9 of the primary's postmaster and every process of its cluster at once."""
        pid = int((self.service_dir / "pg" / "data" / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True
        ).stdout.split()
        for victim in [pid, *map(int, children)]:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def promote(self) -> None:
        self.sh("promote", "pgs")

    def connect(self) -> Any:
        import psycopg2

        return psycopg2.connect(
            host="127.0.0.1,127.0.0.1",
            port=f"{self.primary},{self.standby}",
            dbname="crontabber",
            user="crontabber",
            password=PASSWORD,
            target_session_attrs="read-write",
            connect_timeout=3,
        )

    def query(self, sql: str) -> list[tuple]:
        conn = self.connect()
        try:
            with conn, conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()
        finally:
            conn.close()

    def clean(self) -> None:
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "services.sh"), "clean"],
            env=self.env,
            capture_output=True,
            timeout=300,
        )
