"""Constants and helpers shared by the test modules: the repository, the local services'
addresses, fresh databases, S3 and Elasticsearch clients, an INI file, a job command, a
connection-resetting server. Plain functions, no fixtures: pytest's fixtures live in the
``conftest.py`` files and ``tests/fixtures/``, and no test module imports another one
(``tests/unit/test_structure.py`` keeps it so).

Addresses come from the environment ``scripts/services.sh`` writes (``.services/env``),
overlaid by the process environment, with the script's defaults otherwise
(:mod:`devservices`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import psycopg2.errors

import devservices
from crontabber.config.database import DatabaseSettings
from crontabber.store import connect
from devservices.databases import database

REPO = Path(__file__).resolve().parent.parent

#: .services/env's values under os.environ's
ENV = devservices.environment()
SERVICES = devservices.Services(ENV)
#: The pooled lane: test databases reached through PgBouncer.
POOLED = ENV.get("SYMBOLS_TEST_POOLED", "") not in ("", "0")
#: The test databases' sessions' zone: a half-hour offset and daylight saving time, so a
#: day or an hour taken in the session's zone instead of UTC shows. Its day differs from
#: UTC's only from 00:00 to 03:30 UTC; ``SYMBOLS_TEST_TIME_ZONE=Pacific/Pago_Pago`` (UTC-11:
#: until 11:00 UTC) or ``Pacific/Kiritimati`` (UTC+14: from 10:00 UTC) shows such a bug at
#: other hours.
TEST_TIME_ZONE = ENV.get("SYMBOLS_TEST_TIME_ZONE") or "America/St_Johns"


def admin_settings(dbname: str = "postgres") -> DatabaseSettings:
    """Database ``dbname`` on the local PostgreSQL, reached directly (never pooled)."""
    return database(dbname, ENV)


def database_env(database: DatabaseSettings) -> dict[str, str]:
    """The ``RESOURCE_POSTGRESQL_*`` variables that point a command at ``database``."""
    return {
        "RESOURCE_POSTGRESQL_HOST": database.host,
        "RESOURCE_POSTGRESQL_PORT": str(database.port),
        "RESOURCE_POSTGRESQL_DBNAME": database.dbname,
        "RESOURCE_POSTGRESQL_USER": database.user,
        "RESOURCE_POSTGRESQL_PASSWORD": database.password,
    }


def admin_execute(sql: str) -> None:
    """Run one statement on the ``postgres`` database, autocommit (``CREATE``/``DROP DATABASE``)."""
    conn = connect(admin_settings())
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for attempt in range(20):
                try:
                    cur.execute(sql)
                    return
                except psycopg2.errors.InsufficientPrivilege:
                    # DROP DATABASE ... WITH (FORCE) may not terminate a superuser's
                    # process in the database (an autovacuum worker, seen under load):
                    # it ends within moments, so try again rather than fail a teardown.
                    if attempt == 19 or not sql.startswith("DROP DATABASE"):
                        raise
                    time.sleep(0.25)
    finally:
        conn.close()


_counter = itertools.count()


def _create(name: str, template: str | None) -> str:
    """Create database ``name`` (a copy of ``template``, or empty), its sessions in
    ``TEST_TIME_ZONE``, over one admin connection; its name."""
    conn = connect(admin_settings())
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE DATABASE {name}"
                + (f" TEMPLATE {template} STRATEGY FILE_COPY" if template else "")
            )
            cur.execute(f"ALTER DATABASE {name} SET timezone TO '{TEST_TIME_ZONE}'")
    finally:
        conn.close()
    return name


class _Databases:
    """The test databases' copying and dropping, off the tests' path: while a test runs, a
    thread of this process copies the template for the next one (a spare) and drops the
    databases of the tests before it. A test of a 2-core machine mostly waits (subprocesses,
    the services), so the ~0.15 s a test these statements take (create, set the zone, drop)
    overlap with it instead of adding to it. :meth:`settle` drops the spares and waits for
    every drop (before the template goes)."""

    def __init__(self) -> None:
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="test-databases")
        self._spares: dict[tuple[str, str], concurrent.futures.Future[str]] = {}
        self._drops: list[concurrent.futures.Future[None]] = []

    def take(self, prefix: str, template: str | None) -> str:
        """A new database's name: a spare copy of ``template`` when one was made ahead
        (then the next spare is started), else one created now."""
        if template is None:
            return _create(f"{prefix}_{os.getpid()}_{next(_counter)}", None)
        spare = self._spares.pop((prefix, template), None)
        name = (
            spare.result()
            if spare is not None
            else _create(f"{prefix}_{os.getpid()}_{next(_counter)}", template)
        )
        self._spares[(prefix, template)] = self._worker.submit(
            _create, f"{prefix}_{os.getpid()}_{next(_counter)}", template
        )
        return name

    def drop(self, name: str) -> None:
        """Drop database ``name`` in the background (its test is over)."""
        self._drops.append(
            self._worker.submit(admin_execute, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        )

    def settle(self, template: str | None = None) -> None:
        """Drop the spares (of ``template``, or all) and wait for every drop.

        Raises:
            Exception: a drop failed (the first such error).
        """
        for key in [k for k in self._spares if template is None or k[1] == template]:
            with contextlib.suppress(Exception):  # a spare that failed to be made: nothing to drop
                self.drop(self._spares.pop(key).result())
        drops, self._drops = self._drops, []
        for future in drops:
            future.result()


DATABASES = _Databases()


@contextlib.contextmanager
def fresh_database(
    prefix: str, template: str | None = None, pooled: bool = POOLED
) -> Iterator[DatabaseSettings]:
    """A new database (a copy of ``template``, or empty), its sessions in ``TEST_TIME_ZONE``,
    as a test and the commands it starts reach it: directly, or through PgBouncer when
    ``pooled``; dropped afterwards, in the background (:class:`_Databases`)."""
    name = DATABASES.take(prefix, template)
    settings = admin_settings(name)
    try:
        yield settings.replace(port=SERVICES.pgb_port) if pooled else settings
    finally:
        DATABASES.drop(name)


def s3_client() -> Any:
    """A boto3 S3 client of the local S3 server (path-style addressing)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=SERVICES.s3_endpoint,
        aws_access_key_id=ENV.get("AWS_ACCESS_KEY_ID", "symbols"),
        aws_secret_access_key=ENV.get("AWS_SECRET_ACCESS_KEY", "symbols-secret"),
        region_name=ENV.get("AWS_DEFAULT_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}),
    )


def es_client() -> Any:
    """A client of the local Elasticsearch."""
    from elasticsearch import Elasticsearch

    return Elasticsearch(SERVICES.es_url, request_timeout=30)


def put_many(bucket: str, keys: list[str], body: bytes = b"x" * 10) -> None:
    """Write ``body`` under each of ``keys`` in ``bucket`` (16 at a time)."""
    from jobs.s3 import make_s3_client

    client = make_s3_client(max_pool_connections=16)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=body), keys))


def keys_in(bucket: str) -> set[str]:
    """Every key in ``bucket``."""
    pages = s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {obj["Key"] for page in pages for obj in page.get("Contents", [])}


def write_ini(tmp_path: Path, jobs: list[str], extra: str = "") -> str:
    """A ``crontabber.ini`` in ``tmp_path`` with ``jobs`` and ``error_retry_time=50``, then
    ``extra``; its path."""
    path = tmp_path / "crontabber.ini"
    lines = "\n".join(f"    {job}" for job in jobs)
    path.write_text(
        f"[crontabber]\n    error_retry_time=50\n    jobs='''\n{lines}\n    '''\n{extra}"
    )
    return str(path)


def job_command(cli: Any, module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m module --admin.conf=<the cli's ini> args...`` in the cli's environment."""
    return subprocess.run(
        [sys.executable, "-m", module, f"--admin.conf={cli.crontab.ini}", *args],
        env=cli.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``done``, which must have exited 0 (its output in the failure's message)."""
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def one_line(done: subprocess.CompletedProcess) -> str:
    """The one line ``done`` wrote to stderr (no traceback)."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@contextlib.contextmanager
def resetting_server() -> Iterator[int]:
    """A real TCP server on 127.0.0.1 that answers every connection with a reset (RST:
    SO_LINGER 0, then close), until the block ends; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conn.recv(1024)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()
