"""jobs.runlog trims crontabber_log in batches and keeps recent rows."""


def test_prune_run_log_deletes_only_old_rows_in_batches(crontab):
    crontab.sql("INSERT INTO crontabber_log (app_name, log_time) SELECT 'x', "
                "clock_timestamp() - make_interval(days => 10 + i % 5) FROM generate_series(1, 25) i")
    crontab.sql("INSERT INTO crontabber_log (app_name, log_time) SELECT 'x', "
                "clock_timestamp() - interval '2 days' FROM generate_series(1, 7)")
    crontab.configure(["jobs.runlog.PruneRunLogCronApp|1d"],
                      extra="    [[class-PruneRunLogCronApp]]\n        keep_days=5\n        batch_size=4\n")
    assert crontab.run()[0] == 0
    rows = crontab.sql("SELECT app_name, count(*) AS n FROM crontabber_log GROUP BY 1 ORDER BY 1")
    # 7 recent rows stay, 25 old ones go; the job's own success row is added
    assert rows == [{"app_name": "prune-run-log", "n": 1}, {"app_name": "x", "n": 7}]
    assert crontab.state("prune-run-log").error_count == 0
