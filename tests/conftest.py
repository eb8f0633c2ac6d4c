"""Fixtures shared by every test tier.

Integration and CLI tests use the real services started by
``scripts/services.sh`` (``make test`` starts them). Their addresses come from
the environment that script writes (``.services/env``), with the script's
defaults otherwise. A missing service fails the test: nothing here skips.

- ``database``: a fresh database per test, copied from a template database
  built once per session with the current schema (``CREATE DATABASE ...
  TEMPLATE``, a few ms), dropped afterwards.

Every test database's sessions are in a zone other than UTC (``TEST_TIME_ZONE``): nothing
the runner and the jobs do may lean on the session's time zone (they set none: a transaction
pooler would refuse or lose it).

The pooled lane (``SYMBOLS_TEST_POOLED=1``, run by ``make test`` after the main run):
every test database is reached through PgBouncer in transaction pooling mode (``scripts/
services.sh``'s ``pgb``), by the test and by every command it starts. Creating and dropping
databases stays direct.
- ``s3_bucket``: a new bucket per test, emptied and removed afterwards.
- ``es_index``: a unique index name prefix per test; matching indices and
  aliases are removed afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import psycopg2
import psycopg2.errors
import pytest

import devservices
from bench.services import database as service_database
from crontabber.config.database import DatabaseSettings
from crontabber.schema import ensure_schema, with_runner
from crontabber.store import connect
from jobs import SQL_DIR as JOBS_SQL

REPO = Path(__file__).resolve().parent.parent


# .services/env's values under os.environ's
ENV = devservices.environment()
SERVICES = devservices.Services(ENV)
#: The pooled lane: test databases reached through PgBouncer.
POOLED = ENV.get("SYMBOLS_TEST_POOLED", "") not in ("", "0")
#: The test databases' sessions' zone: a half-hour offset and daylight saving time, so a
#: day or an hour taken in the session's zone instead of UTC shows.
TEST_TIME_ZONE = "America/St_Johns"


def admin_settings(dbname: str = "postgres") -> DatabaseSettings:
    return service_database(dbname, ENV)


def _admin_execute(sql: str) -> None:
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


@pytest.fixture(scope="session")
def template_database() -> Iterator[str]:
    """A database holding the current schema, cloned by ``database``."""
    name = f"test_template_{os.getpid()}"
    try:
        _admin_execute(f"DROP DATABASE IF EXISTS {name}")
    except Exception as exc:  # noqa: BLE001 - turn any connection problem into a failure
        pytest.fail(f"PostgreSQL is not reachable ({exc}); run `make services` first", pytrace=False)
    _admin_execute(f"CREATE DATABASE {name}")
    conn = connect(admin_settings(name))
    try:
        ensure_schema(conn, with_runner([JOBS_SQL]))
    finally:
        conn.close()
    yield name
    _admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


_counter = itertools.count()


@contextlib.contextmanager
def fresh_database(prefix: str, template: str | None = None, pooled: bool = POOLED) -> Iterator[DatabaseSettings]:
    """A new database (a copy of ``template``, or empty), its sessions in ``TEST_TIME_ZONE``,
    as a test and the commands it starts reach it: directly, or through PgBouncer when
    ``pooled``; dropped afterwards."""
    name = f"{prefix}_{os.getpid()}_{next(_counter)}"
    _admin_execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    _admin_execute(f"ALTER DATABASE {name} SET timezone TO '{TEST_TIME_ZONE}'")
    settings = admin_settings(name)
    try:
        yield settings.replace(port=SERVICES.pgb_port) if pooled else settings
    finally:
        _admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def database(template_database: str) -> Iterator[DatabaseSettings]:
    """A fresh database with the current schema, for one test."""
    with fresh_database("test", template_database) as settings:
        yield settings


@pytest.fixture
def empty_database() -> Iterator[DatabaseSettings]:
    """A fresh database without any schema (for schema and migration tests)."""
    with fresh_database("test_empty") as settings:
        yield settings


@pytest.fixture
def db_conn(database: DatabaseSettings) -> Iterator[Any]:
    """A psycopg2 connection to the test's database (autocommit)."""
    conn = connect(database)
    conn.autocommit = True
    yield conn
    conn.close()


def s3_client() -> Any:
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


@pytest.fixture
def s3_bucket() -> Iterator[str]:
    """A new, empty S3 bucket for one test; removed with its objects afterwards."""
    client = s3_client()
    name = f"test-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=name)
    yield name
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=name):
        keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys})
    client.delete_bucket(Bucket=name)


def es_client() -> Any:
    from elasticsearch import Elasticsearch

    return Elasticsearch(SERVICES.es_url, request_timeout=30)


@pytest.fixture
def es_index() -> Iterator[str]:
    """A unique index-name prefix for one test; its indices are deleted afterwards."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    yield prefix
    es_client().indices.delete(index=f"{prefix}*", ignore_unavailable=True, allow_no_indices=True)
