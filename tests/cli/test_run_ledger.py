"""Every run is a record from its claim (issue #23, section 1): the run ledger
(crontabber_run) holds each run with its kind, host:pid, heartbeat and how it ended
(succeeded, failed, timed out, stopped by signal, abandoned, fenced off), the job's
one-line summary, and the tail of what the job logged and printed, secrets masked:
``--logs``, ``--show-error``, ``--history`` and the dashboard show them, so on-call
never needs the host that ran it. Real PostgreSQL, the real entry point as a
subprocess, kill -9 and SIGTERM."""

from __future__ import annotations

import datetime as dt
import json
import signal

from tests.fixtures.dashboard_data import Dashboard
from tests.fixtures.runs import CHATTY_SECRET, chatty, ledger
from tests.fixtures.waiting import wait_for

FAST = ("--crontabber.heartbeat_seconds=0.3", "--crontabber.lease_seconds=1.5")


def test_a_failed_run_keeps_its_output_for_logs_and_show_error(cli):
    chatty(cli, fail="True")
    done = cli.run()
    assert done.returncode == 0, done.stderr
    # what the job printed still reaches the runner's own stdout and stderr (cron mail)
    assert "chatty stdout line 2" in done.stdout and "chatty child stderr" in done.stderr
    (run,) = ledger(cli)
    assert run["status"] == "failed" and run["kind"] == "scheduled" and run["ended"] is not None
    assert run["error"] == "RuntimeError: chatty failed after talking"
    assert run["host"] and run["pid"] > 0 and run["heartbeat"] is not None
    logs = cli.run("--logs", "chatty")
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines[0].startswith(
        f"chatty run {run['run_id']} (scheduled) on {run['host']}:{run['pid']}"
    )
    assert lines[0].endswith(": failed") and "error: RuntimeError: chatty failed" in logs.stdout
    for said in (
        "chatty: starting run",
        "chatty stdout line 0",
        "chatty stdout line 2",
        "chatty child stderr",
        "chatty failed: RuntimeError",
    ):  # the log, stdout, a subprocess
        assert said in logs.stdout, said
    assert CHATTY_SECRET not in logs.stdout and "chatty: connecting with ***" in logs.stdout
    shown = cli.run("--show-error", "chatty")
    assert shown.returncode == 0 and "RuntimeError: chatty failed after talking" in shown.stdout
    assert f"--logs chatty --run {run['run_id']}" in shown.stdout
    assert "chatty stdout line 1" in shown.stdout and CHATTY_SECRET not in shown.stdout
    document = json.loads(cli.run("--show-error", "chatty", "--json").stdout)
    assert (
        document["run"]["status"] == "failed" and "chatty child stderr" in document["run"]["output"]
    )
    assert CHATTY_SECRET not in json.dumps(document)
    by_id = cli.run("--logs", "chatty", "--run", str(run["run_id"]), "--json")
    assert (
        json.loads(by_id.stdout)["output"]
        == cli.crontab.sql("SELECT output FROM crontabber_run WHERE run_id = %s", (run["run_id"],))[
            0
        ]["output"]
    )
    missing = cli.run("--logs", "chatty", "--run", "999999")
    assert missing.returncode == 1 and "no run 999999" in missing.stderr


def test_a_success_stores_and_prints_the_jobs_summary(cli):
    chatty(cli, lines=2)
    done = cli.run("--job", "chatty", "--force")
    assert done.returncode == 0, done.stderr
    (run,) = ledger(cli)
    assert (
        run["status"] == "succeeded"
        and run["kind"] == "forced"
        and run["summary"] == "said 2 lines"
    )
    assert f"chatty: ran (run {run['run_id']}): said 2 lines" in done.stdout
    assert cli.crontab.sql("SELECT summary FROM crontabber_log WHERE app_name = 'chatty'") == [
        {"summary": "said 2 lines"}
    ]
    history = cli.run("--history", "chatty")
    header, line, _ = history.stdout.splitlines()
    assert header.split() == ["STARTED", "(UTC)", "TOOK", "BY", "RUN", "KIND", "OUTCOME", "DETAIL"]
    assert line.split()[5:] == ["forced", "ok", "said", "2", "lines"]


def test_the_output_kept_is_capped_at_its_tail(cli):
    chatty(cli, lines=3000)
    done = cli.run("--crontabber.output_tail_bytes=2000")
    assert done.returncode == 0, done.stderr
    (run,) = ledger(cli)
    assert 0 < len(run["output"].encode()) <= 2000 and run["output_dropped"] > 50000
    assert (
        "chatty stdout line 2999" in run["output"] and "chatty stdout line 0\n" not in run["output"]
    )
    assert run["output"].startswith("chatty stdout line ")  # cut at a line's start
    logs = cli.run("--logs", "chatty")
    assert "earlier bytes not kept" in logs.stdout
    chatty(cli, lines=1)
    assert cli.run("--job", "chatty", "--force", "--crontabber.output_tail_bytes=0").returncode == 0
    assert ledger(cli)[-1]["output"] == "" and ledger(cli)[-1]["status"] == "succeeded"


def test_a_killed_run_is_running_in_the_ledger_with_its_output_then_abandoned(cli):
    chatty(cli, sleep=30)
    holder = cli.spawn(*FAST)
    wait_for(
        lambda: (ledger(cli) or [{}])[0].get("output", "").count("chatty: sleeping") == 1,
        timeout=20,
    )
    (run,) = ledger(cli)
    assert run["status"] == "running" and run["ended"] is None and run["pid"] == holder.pid
    assert CHATTY_SECRET not in run["output"]
    shown = cli.run("--logs", "chatty")
    assert ": running" in shown.stdout.splitlines()[0] and "last heartbeat" in shown.stdout
    holder.kill()
    holder.communicate(timeout=20)
    chatty(cli, sleep=0)
    assert cli.run("--release", "chatty", "--reason", "test", *FAST).returncode == 0
    (run,) = ledger(cli)
    assert run["status"] == "abandoned" and run["ended"] is not None
    assert f"on {run['host']}:{holder.pid}" in run["error"] and "released by" in run["error"]
    logs = cli.run("--logs", "chatty")
    # what it printed up to its last heartbeat is there, though its host never said more
    assert ": abandoned" in logs.stdout and "chatty: sleeping" in logs.stdout
    history = json.loads(cli.run("--history", "chatty", "--json").stdout)
    assert (
        history["runs"][0]["outcome"] == "abandoned" and history["runs"][0]["kind"] == "scheduled"
    )


def test_timed_out_and_stopped_by_signal_are_outcomes_of_their_own(cli):
    chatty(cli, sleep=30, timeout=1)
    done = cli.run(*FAST, "--crontabber.kill_grace_seconds=2")
    assert done.returncode == 0, done.stderr
    assert ledger(cli)[-1]["status"] == "timed out"
    history = cli.run("--history", "chatty")
    assert "timed out" in history.stdout.splitlines()[1]
    chatty(cli, sleep=30)
    runner = cli.spawn("--job", "chatty", "--force", *FAST)
    wait_for(
        lambda: len(ledger(cli)) == 2 and "chatty: sleeping" in ledger(cli)[-1]["output"],
        timeout=20,
    )
    runner.send_signal(signal.SIGTERM)
    runner.communicate(timeout=30)
    last = ledger(cli)[-1]
    assert last["status"] == "stopped by signal" and last["kind"] == "forced"
    assert (
        json.loads(cli.run("--history", "chatty", "--json").stdout)["runs"][0]["outcome"]
        == "stopped_by_signal"
    )
    # issue #42 item 8: in the audit from its start, completed with how it ended (never "refused")
    end, start = json.loads(cli.run("--audit", "--json").stdout)[:2]
    assert (start["action"], start["detail"]["outcome"]) == ("force", "started")
    assert (end["action"], end["detail"]["outcome"]) == ("force", "stopped by signal (exit 143)")
    assert end["detail"]["started"] == start["id"]


def test_a_forced_run_is_audited_from_its_start_killed_or_still_going(cli):
    """Issue #42 item 8: a forced run still going, then killed with -9, is in --audit with who
    started it and why, marked as having no recorded end."""
    chatty(cli, sleep=30)
    runner = cli.spawn("--job", "chatty", "--force", "--reason", "drill: long run", *FAST)
    wait_for(lambda: ledger(cli) and "chatty: sleeping" in ledger(cli)[-1]["output"], timeout=20)
    (going,) = json.loads(cli.run("--audit", "--json").stdout)
    assert (going["action"], going["reason"], going["detail"]["outcome"]) == (
        "force",
        "drill: long run",
        "started",
    )
    runner.kill()
    runner.communicate(timeout=20)
    (line,) = cli.run("--audit").stdout.splitlines()
    assert "force chatty  why: drill: long run  (outcome=started, overrides=" in line
    assert line.endswith("[no end recorded: still going, or its command was killed]")


def test_a_rerun_of_many_intervals_is_one_line_of_history(cli):
    crontab = cli.crontab
    crontab.configure(["FooBackfillJob|1d"])
    assert cli.run().returncode == 0
    first = crontab.state("foo-backfill").last_success.astimezone(dt.timezone.utc).date()
    start = first - dt.timedelta(days=40)
    done = cli.run(
        "--rerun",
        "foo-backfill",
        "--reason",
        "test",
        "--date",
        f"{start}",
        "--to",
        f"{first}",
        "--yes",
    )
    assert done.returncode == 0, done.stderr
    (rerun,) = [r for r in ledger(cli, "foo-backfill") if r["kind"] == "rerun"]
    assert rerun["intervals"] == 41 and rerun["status"] == "succeeded"
    # its output names each interval and what the job wrote for it
    said = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert len(said) == 41 and said[0].startswith(f"  {start} ")
    assert said[0].endswith(f" UTC: recorded the day of {start}")
    history = cli.run("--history", "foo-backfill", "--limit", "1")
    lines = history.stdout.splitlines()
    assert history.returncode == 0 and len(lines) == 5, (
        history.stdout
    )  # header, run, 2 notes, database
    assert lines[1].split()[5:9] == ["rerun", "ok", f"{start}..{first}", "(41)"]
    assert lines[1].split()[9].startswith("rec") and len(lines[1]) <= 100  # cut to fit
    document = json.loads(cli.run("--history", "foo-backfill", "--limit", "1", "--json").stdout)
    assert document["runs"][0]["summary"] == f"recorded the day of {first}"
    assert document["runs"][0]["kind"] == "rerun" and len(document["runs"][0]["entries"]) == 41
    rows = cli.run("--history", "foo-backfill", "--run", str(rerun["run_id"]))
    # header, 41 rows, the rerun whole (its header, its one run: done), the database line
    assert rows.returncode == 0 and len(rows.stdout.splitlines()) == 45
    whole = f"rerun {rerun['run_id']} of foo-backfill: done: 41 of 41 interval(s) done"
    assert whole in rows.stdout


def test_the_dashboard_job_page_shows_the_last_runs_output(cli):
    chatty(cli, fail="True")
    assert cli.run().returncode == 0
    (run,) = ledger(cli)
    dashboard = Dashboard(cli.crontab)
    dashboard.start()
    try:
        status, _, page = dashboard.get("/jobs/chatty")
        assert status == 200 and "chatty stdout line 2" in page and CHATTY_SECRET not in page
        assert f"run {run['run_id']}" in page
        status, _, document = dashboard.get(f"/api/jobs/chatty/runs/{run['run_id']}")
        assert status == 200 and "chatty child stderr" in document["output"]
        assert document["status"] == "failed"
        status, _, _ = dashboard.get("/api/jobs/chatty/runs/999999")
        assert status == 404
    finally:
        dashboard.stop()


def test_a_rerun_of_the_report_says_which_day_it_wrote_and_where(cli, s3_bucket):
    """--rerun missing-symbols-report --date D writes the report of D - 1 and said so
    nowhere; now each interval's line names the day, the rows and the key."""
    from tests.fixtures.missing_symbols_data import AGGREGATE, REPORT, entries, ini

    cli.crontab.configure(entries(f"{AGGREGATE}|5m", f"{REPORT}|1d"), extra=ini(s3_bucket))
    assert cli.run().returncode == 0, "the first tick"
    day = (
        cli.crontab.state("missing-symbols-report").last_success.astimezone(dt.timezone.utc).date()
    )
    done = cli.run("--rerun", "missing-symbols-report", "--reason", "test", "--date", f"{day}")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert f"wrote the report of {day - dt.timedelta(days=1)} (0 rows) to s3://{s3_bucket}/" in line
    run = ledger(cli, "missing-symbols-report")[-1]
    assert run["kind"] == "rerun" and run["summary"] == line.split(" UTC: ", 1)[1]


def test_a_rerun_dry_run_says_what_each_interval_would_write(cli, s3_bucket):
    from tests.fixtures.missing_symbols_data import AGGREGATE, REPORT, entries, ini

    cli.crontab.configure(entries(f"{AGGREGATE}|5m", f"{REPORT}|1d"), extra=ini(s3_bucket))
    assert cli.run().returncode == 0
    day = (
        cli.crontab.state("missing-symbols-report").last_success.astimezone(dt.timezone.utc).date()
    )
    done = cli.run(
        "--rerun",
        "missing-symbols-report",
        "--date",
        f"{day - dt.timedelta(days=1)}",
        "--to",
        f"{day}",
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert len(said) == 2 and said[1].endswith(
        f"would write the report of {day - dt.timedelta(days=1)} to "
        f"s3://{s3_bucket}/reports/missing-symbols/{day - dt.timedelta(days=1)}.csv"
    )
    assert len(ledger(cli, "missing-symbols-report")) == 1  # nothing ran


def test_a_reader_that_stops_reading_costs_neither_the_run_nor_its_lease(cli):
    """The runner passes the job's output on to its own stdout without blocking: with a
    stdout pipe nobody reads (full after 64 KiB), the job still ends, succeeded, with its
    heartbeats and the tail of what it printed (a blocking write stopped the renewals)."""
    chatty(cli, lines=30000, sleep=2)  # ~700 KB on stdout
    runner = cli.spawn("--job", "chatty", "--force", *FAST)  # its stdout pipe is not read
    try:
        wait_for(lambda: ledger(cli) and ledger(cli)[-1]["status"] != "running", timeout=60)
    finally:
        runner.kill()
        runner.communicate(timeout=20)
    (run,) = ledger(cli)
    assert run["status"] == "succeeded", run["error"]
    assert "chatty stdout line 29999" in run["output"] and run["output_dropped"] > 500000
    assert run["heartbeat"] > run["started"]  # renewed while the pipe was full
