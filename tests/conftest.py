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

``make test`` runs the suite on two workers (pytest-xdist, ``-n 2``): each worker is a session
of its own (its own template database). The modules whose tests start a service of their own
(``tests/fixtures/own_services.py``: the standby, the 3-node cluster) are one work unit, run by
one worker one after another (``pytest_xdist_make_scheduler`` below), so the cluster starts
once and no worker waits for the other's lock.
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any, Iterator

import pytest

from crontabber.config.database import DatabaseSettings
from crontabber.schema import ensure_schema, with_runner
from crontabber.store import connect
from jobs import SQL_DIR as JOBS_SQL
from tests.fixtures.own_services import es_cluster
from tests.helpers import (
    DATABASES,
    admin_execute,
    admin_settings,
    es_client,
    fresh_database,
    s3_client,
)

# A shell without job control starts its background commands with SIGINT ignored (pytest run
# as ``cmd &`` from a script), an ignored signal stays ignored across exec, and Python keeps an
# ignored SIGINT ignored: every runner a test spawns would then miss the test's Ctrl-C
# (tests/cli/test_cli.py). The test process takes Python's own handler back, which exec resets
# to the default in whatever it starts.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

OWN_SERVICES = frozenset({"cluster", "standby_port"})
# The modules whose tests use one of those: one work unit of ``make test``'s xdist workers.
OWN_SERVICE_MODULES = frozenset(
    {
        "tests/cli/test_deploy_guide.py",
        "tests/cli/test_standby.py",
        "tests/integration/test_search_cluster.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses a service of its own is in a module of
    :data:`OWN_SERVICE_MODULES` (else the run stops, saying which to add)."""
    for item in items:
        if OWN_SERVICES & set(getattr(item, "fixturenames", ())):
            module = item.nodeid.split("::", 1)[0]
            if module not in OWN_SERVICE_MODULES:
                raise pytest.UsageError(
                    f"{item.nodeid} uses {sorted(OWN_SERVICES & set(item.fixturenames))}: "
                    f"add {module} to OWN_SERVICE_MODULES in tests/conftest.py"
                )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``make test``'s workers (pytest-xdist): each test a work unit of its own, as
    ``--dist load`` sends them, except the modules of :data:`OWN_SERVICE_MODULES`, one unit
    for one worker, one after another: the cluster starts once (a session fixture of that
    worker) and no worker waits for the other's lock on a service. (xdist's own
    ``--dist loadgroup`` would say this with marks, but it groups nothing under pytest 9:
    it renames ``item._nodeid``, which pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class OwnServicesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "own-services" if module in OWN_SERVICE_MODULES else nodeid

    return OwnServicesTogether(config, log)


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


@pytest.fixture(scope="session")
def cluster() -> Iterator[str]:
    """The 3-node cluster's node URLs, comma-separated (``tests/fixtures/own_services.py``):
    started once for the session (the tests that use it leave its three nodes up), stopped at
    its end."""
    with es_cluster() as urls:
        yield urls


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
