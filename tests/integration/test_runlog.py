"""jobs.runlog trims crontabber_log in batches and keeps recent rows."""


def test_prune_run_log_deletes_only_old_rows_in_batches(crontab):
    crontab.sql(
        "INSERT INTO crontabber_log (app_name, log_time) SELECT 'x', "
        "clock_timestamp() - make_interval(days => 10 + i % 5) FROM generate_series(1, 25) i"
    )
    crontab.sql(
        "INSERT INTO crontabber_log (app_name, log_time) SELECT 'x', "
        "clock_timestamp() - interval '2 days' FROM generate_series(1, 7)"
    )
    crontab.configure(
        ["jobs.runlog.PruneRunLogCronApp|1d"],
        extra="    [[class-PruneRunLogCronApp]]\n        keep_days=7\n        batch_size=4\n",
    )
    assert crontab.run()[0] == 0
    rows = crontab.sql("SELECT app_name, count(*) AS n FROM crontabber_log GROUP BY 1 ORDER BY 1")
    # 7 recent rows stay, 25 old ones go; the job's own success row is added
    assert rows == [{"app_name": "prune-run-log", "n": 1}, {"app_name": "x", "n": 7}]
    assert crontab.state("prune-run-log").error_count == 0


def test_prune_run_log_deletes_old_ended_alerts_and_keeps_open_ones(crontab):
    crontab.sql(
        "INSERT INTO crontabber_alert (app_name, kind, subject, opened_at, opened_by, message, "
        "resolved_at) VALUES "
        "('x', 'failing', 'old ended', now() - interval '10 days', 'h', 'm', now() - interval '9 "
        "days'),"
        "('x', 'failing', 'old open', now() - interval '10 days', 'h', 'm', NULL),"
        "('x', 'takeover', 'old event', now() - interval '10 days', 'h', 'm', NULL),"
        "('x', 'takeover', 'new event', now() - interval '1 day', 'h', 'm', NULL)"
    )
    crontab.sql(
        "INSERT INTO crontabber_notice (alert_id, notice, target) SELECT id, 1, 't' FROM "
        "crontabber_alert"
    )
    crontab.configure(
        ["jobs.runlog.PruneRunLogCronApp|1d"],
        extra="    [[class-PruneRunLogCronApp]]\n        keep_days=7\n        batch_size=1\n",
    )
    assert crontab.run()[0] == 0
    left = crontab.sql(
        "SELECT a.subject, count(n.id) AS notices FROM crontabber_alert a "
        "LEFT JOIN crontabber_notice n ON n.alert_id = a.id GROUP BY 1 ORDER BY 1"
    )
    assert left == [{"subject": "new event", "notices": 1}, {"subject": "old open", "notices": 1}]
    (run,) = crontab.sql("SELECT summary FROM crontabber_run WHERE app_name = 'prune-run-log'")
    assert "and 2 alerts older than 7 days" in run["summary"]
