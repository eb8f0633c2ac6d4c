"""The incremental job ``index-new-uploads`` on the project's schema: finished
uploads become searchable without a rebuild; ES down, an alias swap between
runs and late commits lose nothing."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.store import connect
from jobs.search_index import SymbolFileStore
from search.engine import Searcher
from search.indexer import aliased, rebuild
from tests.fixtures.search_corpus import symbol_file
from tests.fixtures.search_data import es
from tests.fixtures.uploads_archives import sym_text, write_zip
from tests.fixtures.uploads_queue import uploads  # noqa: F401 - the fixture

JOBS = [
    "jobs.search_index.RebuildSearchIndexCronApp|1h",
    "jobs.search_index.IndexNewUploadsCronApp|5m",
]


@pytest.fixture
def search(crontab, es_index):
    """The crontab fixture with both search jobs on ``es_index``, after a first
    rebuild (the alias exists) and a first incremental run (a watermark)."""
    configure(crontab, es_index)
    for job in ("rebuild-search-index", "index-new-uploads"):
        code, output = crontab.run(f"--job={job}", "--force")
        assert code == 0, output
    return crontab


def configure(crontab, alias, es_url=""):
    crontab.configure(
        JOBS,
        extra=(
            f"    [[class-RebuildSearchIndexCronApp]]\n        alias={alias}\n"
            f"    [[class-IndexNewUploadsCronApp]]\n        alias={alias}\n"
            + (f"        es_url={es_url}\n" if es_url else "")
        ),
    )


def finish_upload(crontab, names, status="done", completed_at=None):
    """An upload as the upload job leaves it (a row and its published files);
    its symbol files."""
    [row] = crontab.sql(
        "INSERT INTO upload (inbox_key, filename, size, status, attempts, completed_at)"
        " VALUES ('inbox/x.zip', 'x.zip', 1, %s, 1, coalesce(%s, clock_timestamp()))"
        " RETURNING id",
        (status, completed_at),
    )
    files = [symbol_file(name) for name in names]
    for f in files:
        crontab.sql(
            "INSERT INTO file_upload (upload_id, key, size, original_size, original_md5,"
            " compressed, \"update\") VALUES (%s, %s, 10, 20, 'md5', true, false)",
            (row["id"], f.key),
        )
    return files


def index_new_uploads(crontab):
    code, output = crontab.run("--job=index-new-uploads", "--force")
    assert code == 0, output
    state = crontab.state("index-new-uploads")
    assert state.last_error in (None, {}), state.last_error


def found(alias, query):
    return [hit.debug_file for hit in Searcher(es(), alias).search(query, 5).hits]


def watermark(crontab, alias):
    rows = crontab.sql(
        "SELECT index_name, indexed_to FROM search_index_watermark WHERE alias = %s", (alias,)
    )
    return (rows[0]["index_name"], rows[0]["indexed_to"]) if rows else None


def test_a_finished_upload_is_searchable_after_one_run_without_a_rebuild(
    search, es_index, uploads, tmp_path
):  # noqa: F811
    """The real upload job publishes an archive; one run of the new job later,
    search finds its symbol, with the document the next rebuild writes."""
    name, debug = "mozavutil.pdb", "6B42A54E77C94BF0A1B2C3D4E5F60718A"
    uploads.enqueue(
        write_zip(
            tmp_path / "a.zip", [(f"{name}/{debug}/mozavutil.sym", sym_text(name, debug, 2000))]
        )
    )
    uploads.worker().drain()
    assert [row["status"] for row in uploads.sql("SELECT status FROM upload")] == ["done"]
    assert found(es_index, "mozavutil") == []
    index_new_uploads(search)
    assert found(es_index, "mozavutil") == [name]
    assert found(es_index, "mozavutl.pdb") == [name]  # a typo: the suggester knows it too
    assert found(es_index, "6B42A54E") == [name]
    doc_id = f"{name}/{debug}/mozavutil.sym"
    incremental = es().get(index=es_index, id=doc_id)["_source"]
    code, output = search.run("--job=rebuild-search-index", "--force")
    assert code == 0, output
    assert es().get(index=es_index, id=doc_id)["_source"] == incremental


def test_failed_uploads_files_are_added_and_unfinished_ones_wait(search, es_index):
    finish_upload(search, ["failedpart.pdb"], status="failed")
    finish_upload(search, ["inflight.pdb"], status="processing", completed_at=None)
    search.sql("UPDATE upload SET completed_at = NULL WHERE status = 'processing'")
    index_new_uploads(search)
    assert found(es_index, "failedpart") == ["failedpart.pdb"]
    assert found(es_index, "inflight") == []


def test_elasticsearch_down_fails_the_run_and_the_next_one_catches_up(search, es_index):
    before = watermark(search, es_index)
    finish_upload(search, ["whiledown.pdb"])
    configure(search, es_index, es_url="http://127.0.0.1:9")  # nothing listens on 9
    search.run("--job=index-new-uploads", "--force")
    state = search.state("index-new-uploads")
    assert state.error_count == 1 and "SearchUnavailable" in state.last_error["type"]
    assert "Elasticsearch unreachable" in state.last_error["value"]
    assert watermark(search, es_index) == before
    finish_upload(search, ["afterwards.pdb"])
    configure(search, es_index)
    index_new_uploads(search)
    assert found(es_index, "whiledown") == ["whiledown.pdb"]
    assert found(es_index, "afterwards") == ["afterwards.pdb"]
    assert watermark(search, es_index)[1] > before[1]


def test_the_database_lost_mid_run_is_waited_for_and_the_run_succeeds(search, es_index):
    # issue #44, P10: a job's own read was not retried across a failover, as the runner's
    # writes are. Its session ends at its first read of the watermark (a policy whose
    # function ends the session once: a sequence, which no rollback takes back).
    finish_upload(search, ["afterloss.pdb"])
    search.sql(
        "CREATE SEQUENCE test_lose_once;"
        " CREATE FUNCTION test_lose_once() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
        " IF nextval('test_lose_once') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid());"
        " END IF; RETURN true; END $$;"
        " ALTER TABLE search_index_watermark ENABLE ROW LEVEL SECURITY;"
        " ALTER TABLE search_index_watermark FORCE ROW LEVEL SECURITY;"
        " CREATE POLICY test_lose_once ON search_index_watermark USING (test_lose_once())"
    )
    code, output = search.run("--job=index-new-uploads", "--force")
    assert code == 0, output
    assert search.state("index-new-uploads").error_count == 0
    # the session was ended (nextval 1), and the run read again on a new one (2 and on)
    assert search.sql("SELECT last_value FROM test_lose_once")[0]["last_value"] > 1
    assert found(es_index, "afterloss") == ["afterloss.pdb"]


def test_an_alias_swap_between_runs_loses_nothing(search, es_index):
    """A rebuild whose snapshot was taken before an upload finished, but whose
    alias swap came after the incremental run that indexed that upload into the
    old index: the next run sees the new index and adds the upload to it."""
    conn = connect(search.database)
    try:
        with SymbolFileStore(conn).snapshot() as source:  # the rebuild's snapshot, first
            finish_upload(search, ["racing.pdb"])
            index_new_uploads(search)  # into the old index
            old = aliased(es(), es_index)
            assert found(es_index, "racing") == ["racing.pdb"]
            rows = list(source.rows)
            assert "racing.pdb" not in [row[0] for row in rows]  # debug_file
            rebuild(es(), es_index, rows, source_as_of=source.as_of)
    finally:
        conn.close()
    assert aliased(es(), es_index) != old and found(es_index, "racing") == []
    index_new_uploads(search)
    assert found(es_index, "racing") == ["racing.pdb"]
    assert watermark(search, es_index)[0] == aliased(es(), es_index)[0]


def test_an_upload_committed_after_a_run_with_an_earlier_time_is_found(search, es_index):
    """``completed_at`` is set before its transaction commits: an upload that
    commits after a run's snapshot can carry a time before that run's."""
    _, indexed_to = watermark(search, es_index)
    finish_upload(search, ["latecommit.pdb"], completed_at=indexed_to - dt.timedelta(seconds=30))
    index_new_uploads(search)
    assert found(es_index, "latecommit") == ["latecommit.pdb"]


def test_without_an_alias_there_is_nothing_to_add_to(crontab, es_index):
    configure(crontab, es_index)
    finish_upload(crontab, ["early.pdb"])
    index_new_uploads(crontab)
    assert watermark(crontab, es_index) is None and aliased(es(), es_index) == []
