"""The dashboard's JSON endpoints over HTTP (a server in this process) against
a real database, S3 and Elasticsearch: the command line's --json shapes and
values, the pipeline numbers the tables hold, errors as JSON."""

import json

from tests.fixtures.dashboard_data import dashboard, pipeline_fleet  # noqa: F401 - fixtures

# Fields that depend on the instant they were computed at.
CLOCKED = {"now", "late_seconds", "duration"}


def _unclocked(value):
    if isinstance(value, dict):
        return {key: _unclocked(item) for key, item in value.items() if key not in CLOCKED}
    if isinstance(value, list):
        return [_unclocked(item) for item in value]
    return value


def test_jobs_is_the_list_jobs_json(dashboard, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    status, kind, served = dashboard.get("/api/jobs")
    code, printed = dashboard.crontab.run("--list-jobs", "--json")
    assert status == 200 and kind == "application/json" and code == 0
    assert _unclocked(served) == _unclocked(json.loads(printed))
    assert [(job["name"], job["status"]) for job in served["jobs"]] == [
        ("prune-run-log", "ok"),
        ("missing-symbols", "overdue"),
        ("missing-symbols-report", "ok"),
        ("missing-symbols-retention", "failing"),
        ("process-uploads", "running"),
        ("rebuild-search-index", "orphaned"),
        ("prune-s3", "paused"),
    ]


def test_history_is_the_history_json_and_a_bad_name_is_a_json_404(dashboard, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    status, _, served = dashboard.get("/api/jobs/process-uploads/history?limit=3")
    code, printed = dashboard.crontab.run("--history", "process-uploads", "--limit", "3", "--json")
    assert status == 200 and code == 0
    assert _unclocked(served) == _unclocked(json.loads(printed))
    # the run holding the job first, then the log's runs newest first
    assert [(run["run_id"], run["outcome"]) for run in served["runs"]] == [
        (812, "running"),
        (104, "ok"),
        (103, "ok"),
    ]
    assert served["more"] is True
    status, kind, body = dashboard.get("/api/jobs/prune-s4/history")
    assert (status, kind) == (404, "application/json")
    assert body["error"].startswith(
        "no configured job is called 'prune-s4'; configured: prune-run-log"
    )
    status, _, body = dashboard.get("/api/jobs/prune-s3/history?limit=0")
    assert status == 400 and "limit" in body["error"]


def test_pipeline_numbers_are_the_databases(dashboard, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    status, _, doc = dashboard.get("/api/pipeline")
    assert status == 200
    sql = dashboard.crontab.sql
    queue = sql(
        "SELECT count(*) FILTER (WHERE status = 'pending') AS pending,"
        " count(*) FILTER (WHERE status = 'processing') AS processing,"
        " extract(epoch FROM clock_timestamp() - min(created_at)"
        "   FILTER (WHERE status = 'pending')) AS age FROM upload"
    )[0]
    uploads = doc["uploads"]
    assert (uploads["pending"], uploads["processing"], uploads["queue_depth"]) == (3, 1, 4)
    assert (queue["pending"], queue["processing"]) == (3, 1)
    assert abs(uploads["oldest_pending_age_seconds"] - float(queue["age"])) < 60
    assert uploads["failed_total"] == 2  # old.zip failed 3 days ago: outside the day
    assert [(f["filename"], f["error"]) for f in uploads["failed"]] == [
        ("huge.zip", "archive too large: 9 GiB > 8 GiB"),
        ("bad.zip", "not a zip file: bad.zip"),
    ]
    missing = doc["missing_symbols"]
    assert missing["batches_waiting"] == 2 and missing["waiting_error"] is None
    assert missing["quarantined_total"] == 2
    assert {q["reason"] for q in missing["quarantined"]} == {
        "not msgpack: byte 0x00 at 12",
        "event without debug_id",
    }
    assert [(m["debug_file"], m["count"]) for m in missing["most_missed"]] == [
        ("xul.pdb", 40),
        ("nss3.pdb", 25),
        ("mozglue.pdb", 7),
    ]
    search = doc["search_index"]
    assert (search["alias"], search["index"], search["documents"]) == (
        es_index,
        f"{es_index}-v2",
        3,
    )
    assert search["last_rebuild"]["run_id"] == 701 and search["last_rebuild"]["duration"] == 42.5
    assert search["watermark"]["index_name"] == f"{es_index}-v2"
    prune = doc["prune"]["last_run"]
    assert (prune["holder"], prune["keys_deleted"], prune["bytes_freed"]) == (
        "symbols-cron-1:99",
        1545,
        3 * 1024**3 + 12345678,
    )
    assert [(r["rule"], r["keys_deleted"]) for r in prune["rules"]] == [
        ("inbox/ 30d", 1200),
        ("missing/ 30d", 345),
    ]


def test_fleet_is_the_nagios_check_and_every_host(dashboard, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    status, _, doc = dashboard.get("/api/fleet")
    code, printed = dashboard.crontab.run("--nagios", "--json")
    check = json.loads(printed)
    assert status == 200 and (doc["check"]["status"], doc["check"]["code"]) == (
        check["status"],
        code,
    )
    # (the texts say "3 hours ago": the two checks ran at different instants)
    assert [(e["level"], e["kind"], e["subject"]) for e in doc["check"]["entries"]] == [
        (e["level"], e["kind"], e["subject"]) for e in check["entries"]
    ]
    assert [(h["host"], h["recent"]) for h in doc["hosts"]] == [
        ("symbols-cron-1", True),
        ("symbols-cron-2", True),
        ("old-cron-9", False),
    ]
    assert doc["hosts"][1]["skew_seconds"] == -41.5


def test_heartbeat_read_only_and_unknown_pages(dashboard, s3_bucket, es_index, monkeypatch):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    status, _, body = dashboard.get("/__heartbeat__")
    assert status == 200 and body["status"] == "ok" and body["jobs"] == 7
    status, _, body = dashboard.get("/api/jobs", method="POST")
    assert status == 405 and "read-only" in body["error"]
    status, kind, body = dashboard.get("/api/nothing")
    assert (status, kind) == (404, "application/json")
    status, kind, _ = dashboard.get("/static/dashboard.js")
    assert status == 200 and kind.startswith("text/javascript")
    # the dashboard cannot write, even through its own connection
    source = dashboard._server.get_app().source
    with source.session() as session:
        cur = session.connection.cursor()
        try:
            cur.execute("DELETE FROM upload")
        except Exception as exc:  # noqa: BLE001 - the driver's ReadOnlySqlTransaction
            assert type(exc).__name__ == "ReadOnlySqlTransaction"
        else:
            raise AssertionError("a read-only session deleted rows")


def test_heartbeat_is_503_without_the_database(dashboard, monkeypatch):
    dashboard.crontab.configure(["BasicJob|1d"])
    monkeypatch.setenv("RESOURCE_POSTGRESQL_PORT", "1")
    dashboard.start()
    status, kind, body = dashboard.get("/__heartbeat__")
    assert (status, kind, body["status"]) == (503, "application/json", "error")
    assert "cannot use the state database" in body["error"]
    status, _, body = dashboard.get("/api/jobs")
    assert status == 503 and "cannot use the state database" in body["error"]


def test_alerts_are_the_alerts_json_and_a_panel(dashboard, s3_bucket, es_index):
    crontab = dashboard.crontab
    pipeline_fleet(crontab, s3_bucket, es_index)
    crontab.sql(
        "INSERT INTO crontabber_alert (app_name, kind, subject, opened_by, message) VALUES "
        "('missing-symbols-retention', 'failing', 's', 'cron-2:77', "
        "'missing-symbols-retention: failed 2 times in a row; last: <b>boom</b>')"
    )
    crontab.sql(
        "INSERT INTO crontabber_notice (alert_id, notice, target, attempts, last_error, "
        "next_attempt) SELECT id, 1, 'ops-hook', 3, 'HTTP 500: down', now() + interval '1 minute' "
        "FROM crontabber_alert"
    )
    crontab.sql(
        "INSERT INTO crontabber_notice (alert_id, notice, target, attempts, sent_at, sent_by) "
        "SELECT id, 1, 'ops-slack', 1, now(), 'cron-2:77' FROM crontabber_alert"
    )
    crontab.sql(
        "INSERT INTO crontabber_mute (scope, until, muted_by, reason) VALUES "
        "('prune-s3', now() + interval '1 hour', 'alice@ops-1', 'moving the bucket')"
    )
    dashboard.start()
    status, _, served = dashboard.get("/api/alerts")
    assert status == 200
    code, printed = crontab.run("--alerts", "--json")
    assert code == 0 and served["alerts"] == json.loads(printed)
    assert [m["scope"] for m in served["mutes"]] == ["prune-s3"]
    status, kind, page = dashboard.get("/")
    assert status == 200
    assert "1 open, 1 notice(s) not delivered" in page
    assert "ops-hook: not sent yet: HTTP 500: down (3 attempts, next" in page
    assert "ops-slack: sent" in page and "muted: prune-s3" in page and "moving the bucket" in page
    assert "<b>boom</b>" not in page and "&lt;b&gt;boom&lt;/b&gt;" in page
