"""Fixtures shared by every test tier.

Integration and CLI tests use the real services started by
``scripts/services.sh`` (``make test`` starts them). Their addresses come from
the environment that script writes (``.services/env``), with the script's
defaults otherwise. A missing service fails the test: nothing here skips.

- ``database``: a fresh database per test, copied from a template database
  built once per session with the current schema (``CREATE DATABASE ...
  TEMPLATE``), dropped afterwards; both while other tests run
  (``tests.helpers.DATABASES``: the next test's copy is made ahead).

Every test database's sessions are in a zone other than UTC (``tests.helpers.TEST_TIME_ZONE``):
nothing
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

import os
import uuid
from typing import Any, Iterator

import pytest

from crontabber.config.database import DatabaseSettings
from crontabber.schema import ensure_schema, with_runner
from crontabber.store import connect
from jobs import SQL_DIR as JOBS_SQL
from tests.helpers import (
    DATABASES,
    admin_execute,
    admin_settings,
    es_client,
    fresh_database,
    s3_client,
)


@pytest.fixture(scope="session")
def template_database() -> Iterator[str]:
    """A database holding the current schema, cloned by ``database``."""
    name = f"test_template_{os.getpid()}"
    try:
        admin_execute(f"DROP DATABASE IF EXISTS {name}")
    except Exception as exc:  # noqa: BLE001 - turn any connection problem into a failure
        pytest.fail(
            f"PostgreSQL is not reachable ({exc}); run `make services` first", pytrace=False
        )
    admin_execute(f"CREATE DATABASE {name}")
    conn = connect(admin_settings(name))
    try:
        ensure_schema(conn, with_runner([JOBS_SQL]))
    finally:
        conn.close()
    yield name
    DATABASES.settle(name)  # the spare copies and the tests' databases go first
    admin_execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


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


@pytest.fixture
def es_index() -> Iterator[str]:
    """A unique index-name prefix for one test; its indices are deleted afterwards."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    yield prefix
    es_client().indices.delete(index=f"{prefix}*", ignore_unavailable=True, allow_no_indices=True)
