"""The dashboard's page degrades panel by panel (issue #32, item 7): a runner without the
symbol-server jobs (none of their tables) gets the whole page, each pipeline card saying its job
is not configured; a panel whose query fails is drawn as its error, the rest as usual, and
``/__heartbeat__`` is not ``ok`` while it does. The dashboard served over the test's real
PostgreSQL."""

from __future__ import annotations

from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture

#: The symbol server's jobs' tables (sql/jobs/schema.sql): a runner of other apps has none.
JOB_TABLES = (
    "file_upload",
    "upload",
    "missing_symbol_day",
    "missing_symbol_batch",
    "missing_symbol",
    "prune_rule_result",
    "prune_intent",
    "prune_run",
    "search_index_watermark",
)


def drop(crontab, *tables: str) -> None:
    crontab.sql("DROP TABLE " + ", ".join(tables) + " CASCADE")


def test_a_runner_without_the_symbol_server_jobs_gets_the_whole_page(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    crontab.configure(["BasicJob|1d", "TroubleJob|1d"])
    drop(crontab, *JOB_TABLES)
    dashboard.start()
    status, kind, page = dashboard.get("/")
    assert (status, kind) == (200, "text/html; charset=utf-8"), page
    assert 'data-job="basic-job"' in page
    for key, job in (
        ("uploads", "process-uploads"),
        ("prune", "prune-s3"),
        ("missing_symbols", "missing-symbols"),
        ("search_index", "rebuild-search-index"),
    ):
        assert f'data-k="{key}.unavailable">{job} is not configured on this runner<' in page
    status, _, body = dashboard.get("/?panels")
    assert status == 200 and set(body["panels"]) == {
        "health",
        "jobs",
        "alerts",
        "pipeline",
        "fleet",
    }
    status, _, body = dashboard.get("/api/pipeline")
    assert status == 200 and body["prune"] == {
        "unavailable": "prune-s3 is not configured on this runner",
        "query_failed": False,
    }
    status, _, body = dashboard.get("/__heartbeat__")
    assert (status, body["status"]) == (200, "ok")


def test_a_panel_that_fails_is_its_error_and_the_heartbeat_says_so(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    crontab.configure(["BasicJob|1d", "jobs.prune.PruneS3CronApp|1d|05:00"])
    drop(crontab, "prune_rule_result", "prune_intent", "prune_run")  # its table is gone
    dashboard.start()
    status, _, page = dashboard.get("/")
    assert status == 200, page
    assert 'data-k="prune.unavailable">dashboard query &#x27;last_prune&#x27; failed: ' in page
    assert "prune_run" in page and 'data-job="prune-s3"' in page
    status, _, body = dashboard.get("/__heartbeat__")
    assert (status, body["status"]) == (503, "error"), body
    assert (
        list(body["panels"]) == ["pipeline.prune"]
        and "prune_run" in body["panels"]["pipeline.prune"]
    )
    assert body["error"].startswith("1 panel(s) of / failed: pipeline.prune: ")


def test_the_heartbeat_warns_while_the_search_card_shows_an_error(dashboard):  # noqa: F811
    """Issue #42 item 13: Elasticsearch away, the page is drawn whole but its search card says
    so: ``/__heartbeat__`` answers 200 ``warning`` naming it, never ``ok``."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    crontab = dashboard.crontab
    crontab.configure(
        ["BasicJob|1d", "jobs.search_index.RebuildSearchIndexCronApp|1h"],
        extra=f"    [[class-RebuildSearchIndexCronApp]]\n        es_url=http://127.0.0.1:{port}\n",
    )
    dashboard.start()
    status, _, page = dashboard.get("/")
    assert status == 200 and "Elasticsearch" in page
    status, _, body = dashboard.get("/__heartbeat__")
    assert (status, body["status"]) == (200, "warning"), body
    (said,) = body["warnings"].values()
    assert list(body["warnings"]) == ["pipeline.search_index"] and said.startswith("Elasticsearch")
    assert body["warning"].startswith("1 panel(s) of / show an error: pipeline.search_index: ")
