"""The rebuild job end to end: PostgreSQL rows -> a new index behind the alias."""

import datetime as dt

import pytest

from crontabber import sqlfiles
from crontabber.store import connect
from jobs import SQL_DIR as JOBS_SQL
from jobs.search_index import SearchSourceError, SymbolFileStore
from search.engine import Searcher
from search.indexer import aliased, versions
from tests.fixtures.search_corpus import symbol_file
from tests.fixtures.search_data import T0, es, insert_files, insert_missing, install_tables

JOB = "jobs.search_index.RebuildSearchIndexCronApp|1h"
NAMES = ["xul.pdb", "libxul.so", "libxul.so.dbg", "ntdll.pdb", "firefox.pdb"]


@pytest.fixture
def source(crontab, es_index):
    """The crontab fixture with the contract tables and the job configured on ``es_index``."""
    install_tables(crontab.conn, crontab.database.dbname)
    crontab.configure(
        [JOB],
        extra=(
            f"    [[class-RebuildSearchIndexCronApp]]\n        alias={es_index}\n        "
            "chunk_size=3\n"
        ),
    )
    return crontab


def test_the_job_indexes_each_distinct_symbol_file(source, es_index):
    files = [symbol_file(name, version) for name in NAMES for version in range(2)]
    insert_files(source.conn, files)
    later = T0 + dt.timedelta(days=1)
    insert_files(source.conn, files[:2], size=5, start=later)  # uploaded again: latest size wins
    insert_missing(source.conn, [files[0]], count=4)
    insert_missing(source.conn, [files[0]], count=3)
    source.sql(
        "INSERT INTO file_upload (key, size) VALUES ('v1/not-a-symbol-key', 1), ('v1/a/b/c/d', 1)"
    )
    code, output = source.run()
    assert code == 0, output
    assert source.state("rebuild-search-index").last_error in (None, {})
    client = es()
    [index] = aliased(client, es_index)
    assert client.count(index=es_index)["count"] == 10
    doc = client.get(index=es_index, id=files[0].key.removeprefix("v1/"))["_source"]
    assert doc == {
        "debug_file": "xul.pdb",
        "debug_id": files[0].debug_id,
        "filename": "xul.sym",
        "code_file": "xul.dll",
        "code_id": files[0].code_id,
        "size": 5,
        "last_uploaded": later.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "missing_count": 7,
    }
    other = client.get(index=es_index, id=files[3].key.removeprefix("v1/"))["_source"]
    assert (other["code_file"], other["missing_count"], other["size"]) == (None, None, 1003)
    assert Searcher(client, es_index).search("libxl.so", 1).hits[0].debug_file == "libxul.so"


def test_a_second_run_replaces_the_index_and_keeps_two(source, es_index):
    insert_files(source.conn, [symbol_file("xul.pdb")])
    for _ in range(3):
        code, output = source.run("--job=rebuild-search-index", "--force")
        assert code == 0, output
    client = es()
    built = versions(client, es_index)
    assert len(built) == 2 and aliased(client, es_index) == built[-1:]


def test_a_failing_source_fails_the_job_and_leaves_the_alias(source, es_index):
    insert_files(source.conn, [symbol_file("xul.pdb")])
    assert source.run()[0] == 0
    client = es()
    before = aliased(client, es_index)
    source.sql("ALTER TABLE search_fixture.file_upload RENAME COLUMN size TO bytes")
    source.run("--job=rebuild-search-index", "--force")
    state = source.state("rebuild-search-index")
    assert state.error_count == 1 and "SearchSourceError" in str(state.last_error)
    assert state.last_error["value"] == (
        "search index source query 'symbol_files' failed: column \"size\" does not exist"
    )
    assert aliased(client, es_index) == before and versions(client, es_index) == before


def test_the_source_queries_run_on_the_project_schema(database):
    """The contract columns exist in sql/jobs/schema.sql's tables (issues #4 and #5)."""
    conn = connect(database)
    try:
        with SymbolFileStore(conn).snapshot() as source:
            assert list(source.rows) == []
        assert SymbolFileStore(conn).count() == 0
        with conn.cursor() as cur:
            cur.execute("EXPLAIN " + sqlfiles.load("search_index.sql", JOBS_SQL)["symbol_files"])
    finally:
        conn.close()


def test_a_missing_table_is_a_source_error(crontab):
    conn = connect(crontab.database)
    try:
        with conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS file_upload CASCADE")
        conn.commit()
        with pytest.raises(SearchSourceError, match="symbol_files.*file_upload"):
            with SymbolFileStore(conn).snapshot():
                pass
    finally:
        conn.close()
