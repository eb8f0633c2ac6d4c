"""What the kills and postgres fault modules share: the services' addresses, a fault INI,
runner processes (started, found, killed), PostgreSQL's pg_ctl, and the suite's own SQL.

Everything comes from the environment, as for the tests (`.services/env`): the same code runs
against `make faults`'s default services and a helper's own instance on other ports. The fault
INI puts every job on the suite's own buckets (`faults-inbox`, `faults-symbols`, `faults-prune`)
and search alias (`faults-symbols`) with short leases, so a round recovers in a second; the
database is the one in the environment (the suite's rows are told apart by their names).
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import devservices
from crontabber import sqlfiles

ROOT = pathlib.Path(__file__).resolve().parent.parent
INBOX, SYMBOLS, PRUNE_BUCKET, ALIAS = (
    "faults-inbox",
    "faults-symbols",
    "faults-prune",
    "faults-symbols",
)
SQL_DIR = sqlfiles.directory("faults")
PG_BIN = pathlib.Path("/usr/lib/postgresql/15/bin")

FAULT_INI = f"""
[crontabber]
    error_retry_time=1
    heartbeat_seconds=0.5
    lease_seconds=3
    kill_grace_seconds=2
    jobs='''
    jobs.runlog.PruneRunLogCronApp|1d|03:00
    jobs.missing_symbols.MissingSymbolsCronApp|5m
    jobs.missing_symbols.MissingSymbolsReportCronApp|1d|00:30
    jobs.uploads.ProcessUploadsCronApp|5m
    jobs.search_index.RebuildSearchIndexCronApp|1h
    jobs.prune.PruneS3CronApp|1d|05:00
    '''
    [[class-PruneRunLogCronApp]]
        keep_days=90
        batch_size=300
    [[class-RebuildSearchIndexCronApp]]
        alias={ALIAS}
        keep=2
        chunk_size=200
        threads=2
    [[class-MissingSymbolsCronApp]]
        inbox_bucket={INBOX}
        prefix=missing/
        workers=2
        batches_per_transaction=2
    [[class-MissingSymbolsReportCronApp]]
        symbols_bucket={SYMBOLS}
        report_prefix=reports/missing-symbols/
    [[class-ProcessUploadsCronApp]]
        inbox_bucket={INBOX}
        inbox_prefix=inbox/
        symbols_bucket={SYMBOLS}
        symbols_prefix=v1
        concurrency=4
        lease_seconds=1.5
        heartbeat_seconds=0.3
        retry_delay_seconds=0
        max_attempts=5
    [[class-PruneS3CronApp]]
        inbox_bucket={INBOX}
        upload_days=0
        batch_days=0
        report_days=0
        symbols_bucket={SYMBOLS}
        extra_rules={PRUNE_BUCKET}/junk/|0.00001
        cap=100000
        threads=2
        lease_seconds=1
[resource]
    [[postgresql]]
        host=127.0.0.1
        port={devservices.DEFAULT_PORTS["pg"]}
        dbname=crontabber
        user=crontabber
[logging]
    level=WARNING
"""


def fault_ini() -> pathlib.Path:
    """The fault INI, written once per process (the database address comes from the
    environment, which overrides the INI's)."""
    path = pathlib.Path(tempfile.gettempdir()) / f"faults-{os.getpid()}.ini"
    if not path.exists():
        path.write_text(FAULT_INI)
    return path


def runner_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "crontabber", f"--admin.conf={fault_ini()}", *args]


def job_command(app: str) -> list[str]:
    """One forced run of ``app`` (due or not; the lock and the marker still apply)."""
    return runner_command("--job", app, "--force")


@dataclass
class Finished:
    returncode: int
    stderr: str
    seconds: float


def run(command: list[str], timeout: float = 120.0) -> Finished:
    """Run a command to its end (from the checkout, with this environment)."""
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return Finished(done.returncode, done.stderr, time.monotonic() - start)


def children(pid: int) -> list[int]:
    try:
        text = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


KILL_MODES = ("runner+job", "runner", "job")


@dataclass
class Kill:
    """One kill -9 thrown at a runner: whether it landed during the job's run (the child
    was alive), after how long, what the runner printed, and processes left behind."""

    landed: bool
    mode: str
    after: float
    runner_exit: int | None
    stderr: str
    orphans: list[int]


def kill_during(
    command: list[str], mode: str, delay: float, between: Callable[[], None] | None = None
) -> Kill:
    """Start ``command`` (a runner), wait for its job's child process, sleep ``delay`` and
    kill -9: the runner and the job's process group (``runner+job``), the runner alone (its
    job dies by PR_SET_PDEATHSIG: ``runner``) or the job's process group alone (``job``).
    ``between`` runs after the kill, before the runner is reaped. Then waits (5 s at most)
    for every process of the job's group to be gone; those still there are ``orphans``."""
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    child = None
    deadline = time.monotonic() + 60
    while child is None and proc.poll() is None and time.monotonic() < deadline:
        found = children(proc.pid)
        child = found[0] if found else None
        if child is None:
            time.sleep(0.002)
    landed = False
    if child is not None:
        time.sleep(delay)
        if proc.poll() is None and child in children(proc.pid):
            landed = True
            if mode in ("runner+job", "runner"):
                os.kill(proc.pid, signal.SIGKILL)
            if mode in ("runner+job", "job"):
                try:
                    os.killpg(child, signal.SIGKILL)
                except ProcessLookupError:  # before its setpgid: the process alone
                    os.kill(child, signal.SIGKILL)
    if between is not None:
        between()
    try:
        _, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    orphans: list[int] = []
    if child is not None:
        end = time.monotonic() + 5
        while (orphans := group_members(child)) and time.monotonic() < end:
            time.sleep(0.05)
    return Kill(landed, mode, delay, proc.returncode, stderr, orphans)


def job_lifetime(command: list[str]) -> float:
    """How long the job's child process of one unkilled run lives (seconds)."""
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    child, seen = None, 0.0
    while proc.poll() is None:
        if child is None:
            found = children(proc.pid)
            if found:
                child, seen = found[0], time.monotonic()
        elif child not in children(proc.pid):
            break
        time.sleep(0.002)
    end = time.monotonic()
    proc.wait()
    return end - seen if child is not None else 0.0


def converge(
    command: list[str], settled: Callable[[], bool], seconds: float = 30.0, pause: float = 0.3
) -> tuple[bool, int, list[str]]:
    """Run ``command`` until it exits 0 and ``settled()`` holds; (converged, runs, the
    runs' stderr texts).

    Raises:
        RuntimeError: the command's configuration is refused (no rerun can heal that: the
            drill itself is wrong, as when ``--rerun`` came to need ``--reason``).
    """
    deadline = time.monotonic() + seconds
    runs, errors = 0, []
    while time.monotonic() < deadline:
        done = run(command)
        runs += 1
        if done.returncode == 1 and "configuration error" in done.stderr:
            raise RuntimeError(f"{' '.join(command[-6:])}: {done.stderr.strip()[-300:]}")
        if done.stderr.strip():
            errors.append(done.stderr)
        if done.returncode == 0 and settled():
            return True, runs, errors
        time.sleep(pause)
    return False, runs, errors


# ------------------------------------------------------------------ services ---


def s3_client() -> Any:
    from jobs.s3 import make_s3_client

    return make_s3_client()


def ensure_buckets(client: Any) -> None:
    from jobs.s3 import ensure_bucket

    for bucket in (INBOX, SYMBOLS, PRUNE_BUCKET):
        ensure_bucket(client, bucket)


def list_objects(client: Any, bucket: str, prefix: str) -> dict[str, int]:
    """Every key under ``prefix`` with its size, listed by the checker itself."""
    found: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            found[item["Key"]] = item["Size"]
    return found


def es_client() -> Any:
    from elasticsearch import Elasticsearch

    return Elasticsearch(devservices.current().es_url, request_timeout=30)


def connect() -> Any:
    """An autocommit connection to the environment's database (the schema applied)."""
    import psycopg2

    connection = psycopg2.connect(
        **devservices.current().database(), application_name="faults", connect_timeout=5
    )
    connection.autocommit = True
    from crontabber.schema import ensure_schema, with_runner
    from jobs import SQL_DIR as JOBS_SQL

    ensure_schema(connection, with_runner([JOBS_SQL]))
    return connection


def query(connection: Any, name: str, **params: Any) -> list[tuple]:
    """Run the named block of ``sql/faults/faults.sql``; its rows (none for a statement)."""
    with connection.cursor() as cur:
        cur.execute(sqlfiles.load("faults.sql", SQL_DIR)[name], params)
        return cur.fetchall() if cur.description else []


def state_dir() -> pathlib.Path:
    return devservices.current().state_dir


def pg_data() -> pathlib.Path:
    """PostgreSQL's data directory (:attr:`devservices.Services.pg_data`)."""
    return devservices.current().pg_data


def pg_ctl(*args: str) -> None:
    """``pg_ctl`` on the environment's cluster, as its OS user (as services.sh runs it)."""
    data = pg_data()
    log = data.parent / "logs" / "postgresql.log"
    subprocess.run(
        [
            "runuser",
            "-u",
            "postgres",
            "--",
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-s",
            *args,
        ],
        check=True,
        cwd="/",
        stdout=subprocess.DEVNULL,
    )


def wait_for_database(seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            connect().close()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def tracebacks(texts: Iterator[str] | list[str]) -> int:
    """How many of these stderr texts hold a Python traceback."""
    return sum("Traceback (most recent call last)" in text for text in texts)
