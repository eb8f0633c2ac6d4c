"""What a run's end writes to the job's health, by kind of run (issue #23 section 1; the rule
is crontabber.state.RunKind's): a tick or --job, forced or not, is the job's health; a
--rerun of past intervals never changes error_count, last_error or next_run."""

from __future__ import annotations

import datetime as dt

DAY = dt.timedelta(days=1)


def failing_today(cli):
    """failing-backfill, which fails on today's interval: a tick leaves it failing. Returns
    (the failing day, an earlier day that succeeds)."""
    crontab = cli.crontab
    crontab.configure(["FailingBackfillJob|1d"])
    assert cli.run("--job", "failing-backfill").returncode == 0  # first run: ok
    days = [c["day"].astimezone(dt.timezone.utc) for c in crontab.calls("failing-backfill")]
    crontab.wind(3 * DAY + dt.timedelta(minutes=1), "failing-backfill")
    failing = days[0]  # winding moved the first run 3 days back: the tick's last interval
    crontab.configure(
        ["FailingBackfillJob|1d"],
        extra=(f"    [[class-FailingBackfillJob]]\n        fail_on={failing:%Y-%m-%d}\n"),
    )
    assert cli.run().returncode == 0  # the tick runs 3 intervals, the last one fails
    state = crontab.state("failing-backfill")
    assert state.error_count == 1 and "bla bla" in state.last_error["value"]
    return failing, days[0] - DAY


def test_a_successful_rerun_of_a_past_day_keeps_todays_failure(cli):
    """It reset error_count and last_error (the finish query): rerunning an old day made a
    failing job look healthy and silenced its CRITICAL."""
    _, earlier = failing_today(cli)
    before = cli.crontab.state("failing-backfill")
    assert cli.run("--nagios").returncode != 0
    done = cli.run(
        "--rerun", "failing-backfill", "--reason", "test", "--date", f"{earlier:%Y-%m-%d}"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    after = cli.crontab.state("failing-backfill")
    assert (after.error_count, after.last_error, after.next_run) == (
        before.error_count,
        before.last_error,
        before.next_run,
    )
    assert cli.run("--nagios").returncode != 0  # still failing: still said


def test_a_failed_rerun_leaves_a_healthy_job_healthy(cli):
    failing, earlier = failing_today(cli)
    cli.crontab.configure(["FailingBackfillJob|1d"])  # fixed: nothing fails any more
    assert cli.run("--job", "failing-backfill", "--force").returncode == 0  # forced: health
    healthy = cli.crontab.state("failing-backfill")
    assert healthy.error_count == 0 and healthy.last_error == {}
    cli.crontab.configure(
        ["FailingBackfillJob|1d"],
        extra=(f"    [[class-FailingBackfillJob]]\n        fail_on={earlier:%Y-%m-%d}\n"),
    )
    done = cli.run(
        "--rerun", "failing-backfill", "--reason", "test", "--date", f"{earlier:%Y-%m-%d}"
    )
    assert done.returncode == 5 and "failed: NameError: bla bla" in done.stdout
    after = cli.crontab.state("failing-backfill")
    assert (after.error_count, after.last_error, after.next_run) == (0, {}, healthy.next_run)
    history = cli.run("--history", "failing-backfill", "--limit", "1")
    assert "failed" in history.stdout  # the rerun's failure is in the log


def test_a_forced_run_is_the_jobs_health_both_ways(cli):
    cli.crontab.configure(["TroubleJob|1d"])
    assert cli.run("--job", "trouble").returncode == 5
    assert cli.run("--job", "trouble", "--force").returncode == 5
    assert cli.crontab.state("trouble").error_count == 2  # a forced failure counts
    cli.crontab.configure(["BasicJob|1d"])
    assert cli.run("--job", "basic-job").returncode == 0
    assert cli.run("--job", "basic-job", "--force").returncode == 0
    assert cli.crontab.state("basic-job").error_count == 0


def test_a_rerun_warns_of_a_failing_parent_and_shows_the_days_it_covered(cli):
    """Trial #16: ``--rerun missing-symbols-report`` while ``missing-symbols`` failed ran
    without a word, and its INTERVALS (--history, --history --run, --logs) were the run
    dates (19th-25th), not the report days (18th-24th) that --dry-run names."""
    crontab = cli.crontab
    crontab.configure(["TroubleJob|1d", "DailyReportJob|1d"])
    assert cli.run().returncode == 0  # trouble fails; daily-report waits for it
    assert crontab.state("trouble").error_count == 1
    today = crontab.now().astimezone(dt.timezone.utc).date()
    first, last = today - 7 * DAY, today - DAY
    done = cli.run(
        "--rerun", "daily-report", "--reason", "test", "--date", f"{first}", "--to", f"{last}"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "daily-report: warning: 'trouble' errored last time it ran (a tick would skip "
        "daily-report now); the rerun goes on, but its data may be incomplete"
    )
    assert f"UTC: reported {last - DAY}" in done.stdout
    covered = f"{first - DAY}..{last - DAY} (7)"
    (row,) = [
        line
        for line in cli.run("--history", "daily-report").stdout.splitlines()
        if " rerun " in line
    ]
    assert covered in row, row
    run_id = row.split()[4]
    # the rows, then the rerun whole (its header and its one run), then the database line
    rows = cli.run("--history", "daily-report", "--run", run_id).stdout.splitlines()[1:-3]
    assert [row.split()[6] for row in rows] == [f"{last - n * DAY}" for n in range(1, 8)]
    logs = cli.run("--logs", "daily-report", "--run", run_id)
    assert f"intervals: {covered}" in logs.stdout, logs.stdout
