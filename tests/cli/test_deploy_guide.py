"""docs/deploy.md followed in its order on the project's own services (issue #44, "Done
when"): PostgreSQL with a streaming standby (``scripts/services.sh start pgs``), a PgBouncer
made from the guide's ``pgbouncer.ini`` block, the 3-node Elasticsearch cluster
(``scripts/services.sh start esc``) and the group roles with a LOGIN user each.

The sections it walks through, in the guide's words:

- "A first deploy", steps 1-7: an empty database owned by the owner; the group roles
  ("Roles"); the owner's first command (``--list-jobs``), which applies both schemas; the
  LOGIN users of "Roles" (the runner's with its ``idle_in_transaction_session_timeout``, the
  read-only one); PgBouncer ("PgBouncer": the guide's file, the logins in its userlist); a
  host whose ``secrets.env`` holds the runner's login and PgBouncer's address
  ("Installing a host", "What names a host"), ``--configtest`` clean, a tick, and
  ``--nagios`` with the read-only login OK.
- "Elasticsearch: a cluster": its ``crontabber.ini`` block, read from the guide, whose one
  ``[resource] [[elasticsearch]] es_url`` names the three nodes for both search jobs
  (``ES_URL`` unset, so nothing else can be what they used); the tick's rebuild loads the
  cluster, raises a replica and moves the alias.
- "PostgreSQL: a primary and a standby", the runbook's steps 1-3: the primary dies (here
  the TCP proxy PgBouncer reached it through is cut: the shared server keeps running), the
  standby is promoted (``SELECT pg_promote()`` as a superuser on it), PgBouncer repointed at
  it and reloaded from its console as the admin login, and the next tick works: on the new
  primary every job ran once, none twice. Step 4 (the old primary rebuilt as a standby) is
  not run: the old primary is the development server every test shares.

Left out on purpose: ``[crontabber] production = true`` (its ``--configtest`` refuses these
development addresses: tests/cli/test_service_addresses.py); the failover's loss window (the
standby is let catch up before the cut: asynchronous streaming may lose the last commits of
a crash, faults/failover.py measures that). Heavy: the module starts a standby and three
Elasticsearch nodes once, and stops them afterwards; run it alone."""

from __future__ import annotations

import re
import subprocess
import uuid
from typing import Any, Callable, Iterator

import psycopg2
import pytest

from search.client import make_es_client
from search.engine import Searcher
from search.indexer import aliased
from tests.fixtures.crontab import FIXTURES, JOBS
from tests.fixtures.own_services import replicated, standby_port  # noqa: F401
from tests.fixtures.pgbouncer import running_bouncer
from tests.fixtures.roles import group_roles, superuser  # noqa: F401 - the fixtures
from tests.fixtures.search_corpus import symbol_file
from tests.fixtures.tcp_proxy import TcpProxy
from tests.fixtures.waiting import wait_for
from tests.helpers import REPO, SERVICES, fresh_database

SEARCH_JOBS = (
    "jobs.search_index.RebuildSearchIndexCronApp|1h",
    "jobs.search_index.IndexNewUploadsCronApp|5m",
)


def guide_ini(jobs: list[str], alias: str, es_url: str) -> str:
    """The host's ``crontabber.ini``: "Elasticsearch: a cluster"'s block as the guide shows
    it, with its jobs instead of ``production`` (see the module's docstring), the cluster's
    nodes in ``es_url`` and each search job on ``alias``."""
    text = (REPO / "docs" / "deploy.md").read_text()
    (block,) = re.findall(r"```ini\n(\[crontabber\]\n    production=true\n.*?)```", text, re.S)
    listed = "\n".join(
        f"        {job if '.' in job.split('|')[0] else f'{JOBS}.{job}'}" for job in jobs
    )
    lines = []
    for line in block.splitlines():
        if line.strip() == "production=true":
            line = f"    jobs='''\n{listed}\n    '''"
        elif line.strip().startswith("es_url="):
            line = f"        es_url={es_url}"
        elif line.strip() == "[resource]":
            lines += [f"    [[class-IndexNewUploadsCronApp]]\n        alias={alias}"]
        lines.append(line)
        if line.strip() == "[[class-RebuildSearchIndexCronApp]]":
            lines.append(f"        alias={alias}")
    return "\n".join(lines) + "\n"


class Login:
    """A LOGIN user of "Roles", made by the superuser, dropped afterwards."""

    def __init__(self, group: str) -> None:
        self.name = f"test_guide_{group.split('_')[1]}_{uuid.uuid4().hex[:8]}"
        self.password = uuid.uuid4().hex
        self.group = group


@pytest.fixture
def logins(group_roles) -> Iterator[Callable[[], dict[str, Login]]]:  # noqa: F811
    """ "A first deploy", step 4, when the test calls it: the runner's login and the
    read-only one, as "Roles" makes them; dropped afterwards."""
    made = {"runner": Login("crontabber_runner"), "readonly": Login("crontabber_readonly")}
    su = superuser()

    def create() -> dict[str, Login]:
        with su.cursor() as cur:
            for login in made.values():
                cur.execute(
                    f"CREATE ROLE {login.name} LOGIN PASSWORD %s IN ROLE {login.group}",
                    (login.password,),
                )
            runner = made["runner"].name
            cur.execute(f"ALTER ROLE {runner} SET idle_in_transaction_session_timeout = '1min'")
        return made

    try:
        yield create
    finally:
        with su.cursor() as cur:
            for login in made.values():
                cur.execute(f"DROP ROLE IF EXISTS {login.name}")
        su.close()


def as_login(cli: Any, login: Login, *args: str) -> subprocess.CompletedProcess:
    """The CLI with ``login``'s credentials (the host's ``secrets.env``)."""
    env = {
        **cli.env,
        "RESOURCE_POSTGRESQL_USER": login.name,
        "RESOURCE_POSTGRESQL_PASSWORD": login.password,
    }
    return subprocess.run(
        cli.argv(*args), env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )


def finish_upload(conn: Any, name: str) -> None:
    """An upload as the upload job leaves it: its row, done, and its published file."""
    with conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO upload (inbox_key, filename, size, status, attempts, completed_at)"
            " VALUES ('inbox/x.zip', 'x.zip', 1, 'done', 1, clock_timestamp()) RETURNING id"
        )
        (upload,) = cur.fetchone()
        cur.execute(
            "INSERT INTO file_upload (upload_id, key, size, original_size, original_md5,"
            " compressed, \"update\") VALUES (%s, %s, 10, 20, 'md5', true, false)",
            (upload, symbol_file(name).key),
        )


def caught_up(standby: int, dbname: str) -> None:
    """Until the standby has replayed everything the primary wrote so far."""
    su = superuser()
    try:
        with su.cursor() as cur:
            cur.execute("SELECT pg_current_wal_lsn()")
            (lsn,) = cur.fetchone()
    finally:
        su.close()

    def replayed() -> bool:
        conn = pgs_superuser(standby, dbname)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,))
                return bool(cur.fetchone()[0])
        finally:
            conn.close()

    wait_for(replayed, timeout=60, what="the standby caught up")


def pgs_superuser(port: int, dbname: str = "postgres") -> Any:
    """The standby's superuser over its socket (scripts/services.sh's ``pgs``)."""
    conn = psycopg2.connect(
        host=str(SERVICES.service_dir / "pgs" / "run"), port=port, user="postgres", dbname=dbname
    )
    conn.autocommit = True
    return conn


def rows(port: int, dbname: str, query: str) -> list[tuple]:
    """``query``'s rows on the server at ``port`` (the promoted standby), as its superuser."""
    conn = pgs_superuser(port, dbname)
    try:
        with conn.cursor() as cur:
            cur.execute(query)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_the_guide_from_an_empty_database_through_a_failover(
    cli,
    logins,
    standby_port,  # noqa: F811
    cluster,  # noqa: F811
    es_index,
):
    owner = cli.crontab.database
    with fresh_database("test_guide", None, pooled=False) as db:  # step 1: empty, owned
        # step 3: the owner's first command, straight to the primary, the production jobs
        cli.crontab.ini.write_text(guide_ini(["BasicJob|1d", *SEARCH_JOBS], es_index, cluster))
        cli.env["RESOURCE_POSTGRESQL_DBNAME"] = db.dbname
        cli.env.pop("ES_URL", None)  # the search jobs' address is the INI's, nothing else
        first = cli.run("--list-jobs")
        assert first.returncode == 0, first.stderr
        assert "database schema: applied crontabber/schema.sql, jobs/schema.sql" in first.stderr
        mine = psycopg2.connect(**db.libpq())  # the sample jobs' own table ("Roles")
        try:
            with mine, mine.cursor() as cur:
                cur.execute((FIXTURES / "sample_jobs.sql").read_text())
                cur.execute("SELECT crontabber_grant_rights()")
            finish_upload(mine, "xul.pdb")  # something for the rebuild to index
        finally:
            mine.close()
        made = logins()  # step 4: the LOGIN users
        runner, readonly = made["runner"], made["readonly"]
        # step 5: PgBouncer from the guide's file in front of the primary ("db1": a proxy
        # the test can cut), the logins of step 4 and the owner's in its userlist
        primary = TcpProxy((owner.host, owner.port))
        userlist = {owner.user: owner.password, runner.name: runner.password}
        userlist[readonly.name] = readonly.password
        try:
            with running_bouncer(primary.port, userlist) as pgb:
                # step 6: the host's secrets.env: the runner's login (as_login), PgBouncer
                cli.env.update(
                    RESOURCE_POSTGRESQL_HOST="127.0.0.1",
                    RESOURCE_POSTGRESQL_PORT=str(pgb.port),
                    CRONTABBER_HOST_NAME="cron-1",
                )
                checked = as_login(cli, runner, "--configtest")
                assert checked.returncode == 0, checked.stderr
                assert f"resource.elasticsearch.es_url = '{cluster}'" in checked.stdout
                # step 7: the host ticks; the rebuild loads the cluster named by es_url
                tick = as_login(cli, runner)
                assert tick.returncode == 0, tick.stderr + tick.stdout
                nagios = as_login(cli, readonly, "--nagios")
                assert nagios.returncode == 0, nagios.stdout + nagios.stderr
                assert nagios.stdout.startswith("OK"), nagios.stdout
                the_cluster_serves(cluster, es_index)
                # the runbook: the primary dies; promote the standby; repoint PgBouncer
                replicated(db, standby_port)
                caught_up(standby_port, db.dbname)
                primary.cut()
                promoted = pgs_superuser(standby_port)
                try:
                    with promoted.cursor() as cur:  # step 1: SELECT pg_promote() on db2
                        cur.execute("SELECT pg_promote()")
                        assert cur.fetchone() == (True,)
                finally:
                    promoted.close()
                pgb.backend = standby_port  # step 2: * = host=db2... and RELOAD as admin
                pgb.write()
                pgb.reload_from_console()
                # step 3: the hosts need nothing; a job falls due after the failover
                cli.crontab.ini.write_text(
                    guide_ini(["BasicJob|1d", "FooJob|1d", *SEARCH_JOBS], es_index, cluster)
                )
                after = as_login(cli, runner)
                assert after.returncode == 0, after.stderr + after.stdout
        finally:
            primary.cut()
        # on the new primary: every job ran once, none twice (the one before the failover
        # recorded there by streaming, the one after by the tick through PgBouncer)
        calls = rows(standby_port, db.dbname, "SELECT app_name FROM test_job_calls ORDER BY id")
        assert calls == [("basic-job",), ("foo",)]
        runs = rows(
            standby_port,
            db.dbname,
            "SELECT app_name, count(*) FROM crontabber_run GROUP BY 1 ORDER BY 1",
        )
        assert runs == [
            ("basic-job", 1),
            ("foo", 1),
            ("index-new-uploads", 1),
            ("rebuild-search-index", 1),
        ]
        hosts = rows(standby_port, db.dbname, "SELECT host FROM crontabber_host")
        assert hosts == [("cron-1",)]


def the_cluster_serves(urls: str, alias: str) -> None:
    """The rebuild's index on the cluster: behind the alias, green with a replica on another
    node, and the upload found ("Elasticsearch: a cluster")."""
    es = make_es_client(urls)
    [index] = aliased(es, alias)
    assert es.cluster.health(index=index)["status"] == "green"
    copies = [r for r in es.cat.shards(index=index, format="json") if r["state"] == "STARTED"]
    assert sorted(r["prirep"] for r in copies) == ["p", "r"]
    hits = Searcher(make_es_client(urls), alias).search("xul.pdb", 5).hits
    assert [hit.debug_file for hit in hits] == ["xul.pdb"]
