"""The runner against a real PostgreSQL: crontabber's behaviours (spec §7)
and the bugs we fixed (§8)."""

import datetime as dt
import re

import psycopg2

from crontabber.store import connect

DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)


def close_to(a, b, seconds=5):
    return abs((a - b).total_seconds()) < seconds


def test_run_one_job_then_again_only_when_forced(crontab):
    crontab.configure(["BasicJob|7d"])
    assert crontab.run("--job", "basic-job") == (0, "")
    state = crontab.state("basic-job")
    assert state.error_count == 0 and state.last_error == {} and state.ongoing is None
    assert state.first_run == state.last_run == state.last_success
    assert state.next_run == state.last_run + 7 * DAY
    assert close_to(state.last_run, crontab.now())
    code, out = crontab.run("--job", "basic-job")
    assert code == 7 and "skipped (not due yet)" in out  # ExitCode.NOT_RUN: nothing ran
    assert len(crontab.calls("basic-job")) == 1
    assert crontab.run("--job", "basic-job", "--force")[0] == 0
    assert len(crontab.calls("basic-job")) == 2
    log = crontab.log("basic-job")
    assert len(log) == 2 and all(row["success"] and row["duration"] is not None for row in log)


def test_job_by_class_path_and_unknown_job(crontab):
    crontab.configure(["BasicJob|7d"])
    assert crontab.run("--job", "tests.fixtures.sample_jobs.BasicJob")[0] == 0
    assert len(crontab.calls("basic-job")) == 1
    code, out = crontab.run("--job", "nope")
    assert code == 1 and "no configured job is called 'nope'" in out


def test_run_all_in_dependency_order_and_only_when_due(crontab):
    crontab.configure(["BarJob|4d", "FooJob|3d"])
    assert crontab.run()[0] == 0
    assert [c["app_name"] for c in crontab.calls()] == ["foo", "bar"]
    assert crontab.run()[0] == 0
    assert len(crontab.calls()) == 2
    crontab.wind(3 * DAY + dt.timedelta(seconds=1))
    assert crontab.run()[0] == 0
    assert [c["app_name"] for c in crontab.calls()] == ["foo", "bar", "foo"]


def test_failing_job_is_recorded_and_others_continue(crontab):
    crontab.configure(
        ["TroubleJob|1d", "SadJob|1d", "BasicJob|1d", "FooJob|1d"], error_retry_time=100
    )
    assert crontab.run()[0] == 0
    assert sorted(c["app_name"] for c in crontab.calls()) == [
        "basic-job",
        "foo",
        "trouble",
    ]  # side by side
    trouble = crontab.state("trouble")
    assert trouble.error_count == 1 and trouble.last_success is None and trouble.ongoing is None
    assert trouble.last_error["type"] == "<class 'NameError'>"
    assert trouble.last_error["value"] == "Trouble!!"
    assert 'raise NameError("Trouble!!")' in trouble.last_error["traceback"]
    assert trouble.next_run == trouble.last_run + dt.timedelta(seconds=100)
    assert crontab.state("sad") is None  # blocked children get no row
    (row,) = crontab.log("trouble")
    assert row["success"] is None and row["exc_type"] == "<class 'NameError'>"
    assert row["exc_value"] == "NameError('Trouble!!')" and "Trouble" in row["exc_traceback"]
    # a second failure counts up
    crontab.wind(DAY)
    crontab.run()
    assert crontab.state("trouble").error_count == 2
    assert (
        crontab.run("--job", "trouble", "--force")[1] == "trouble: failed: NameError: Trouble!!\n"
    )
    assert crontab.run("--job", "sad")[1].startswith(
        "sad: skipped ('trouble' errored last time it ran)"
    )
    assert crontab.run("--job", "sad", "--force")[0] == 0
    assert len(crontab.calls("sad")) == 1


def test_overdue_parent_blocks_its_child(crontab):
    crontab.configure(["FooJob|1d", "BarJob|1d"])
    crontab.run()
    crontab.wind(DAY + dt.timedelta(seconds=1))
    crontab.run()
    assert [c["app_name"] for c in crontab.calls()] == ["foo", "bar", "foo", "bar"]
    crontab.wind(2 * DAY)
    crontab.run("--job", "bar")
    assert len(crontab.calls("bar")) == 2


def test_depends_on_is_stored_as_a_list(crontab):
    crontab.configure(["FooJob|1d", "BarJob|1d", "FooBarJob|1d"])
    crontab.run()
    assert crontab.state("foo").depends_on == ()
    assert crontab.state("bar").depends_on == ("foo",)
    assert crontab.state("foobar").depends_on == ("foo", "bar")


def test_time_of_day_sets_next_run(crontab):
    crontab.configure(["BasicJob|7d|03:00", "FooJob|1d|00:00"])
    crontab.run("--job", "basic-job", "--force")
    state = crontab.state("basic-job")
    # in UTC: the test databases' sessions are in another zone (tests/conftest.py)
    next_run, last_run = (
        state.next_run.astimezone(dt.timezone.utc),
        state.last_run.astimezone(dt.timezone.utc),
    )
    assert (next_run.hour, next_run.minute, next_run.second) == (3, 0, 0)
    assert (last_run + 7 * DAY).date() == next_run.date()


def test_backfill_runs_each_missed_interval_and_records_progress(crontab):
    crontab.configure(["FooBackfillJob|1d"])
    crontab.run()
    first = crontab.state("foo-backfill")
    assert len(crontab.calls("foo-backfill")) == 1 and first.first_run == first.last_run
    crontab.wind(3 * DAY)
    crontab.run()
    days = [c["day"] for c in crontab.calls("foo-backfill")][1:]
    assert days == [first.last_success - 2 * DAY, first.last_success - DAY, first.last_success]
    assert crontab.state("foo-backfill").last_success == first.last_success
    assert len(crontab.log("foo-backfill")) == 4


def test_backfill_failing_midway_stops_there(crontab):
    crontab.configure(["FailingBackfillJob|1d"])
    crontab.run()
    first = crontab.state("failing-backfill")
    crontab.wind(4 * DAY)
    fail_on = (first.last_success - 2 * DAY).strftime("%Y-%m-%d")
    crontab.run(f"--crontabber.class-FailingBackfillJob.fail_on={fail_on}")
    state = crontab.state("failing-backfill")
    assert state.error_count == 1
    assert state.last_success == first.last_success - 3 * DAY  # one interval after the old one
    assert [c["day"].strftime("%Y-%m-%d") for c in crontab.calls()][-1] == fail_on
    # the next attempt (due now, its retry wait skipped; nothing else moved, so the days
    # stay those of the intervals after the last success) restarts at the failed date
    before = len(crontab.calls())
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() WHERE app_name = 'failing-backfill'"
    )
    crontab.run()
    assert crontab.calls()[before]["day"].strftime("%Y-%m-%d") == fail_on
    assert crontab.state("failing-backfill").error_count == 0


def test_postgres_connection_and_single_transaction_jobs(crontab):
    crontab.configure(["PostgresSampleJob|1d", "SingleTransactionJob|1d"])
    assert crontab.run()[0] == 0
    assert {c["app_name"] for c in crontab.calls()} == {"pg-job", "single-tx-job"}
    assert crontab.state("pg-job").last_error == {}
    crontab.run(
        "--job", "single-tx-job", "--force", "--crontabber.class-SingleTransactionJob.fail=true"
    )
    state = crontab.state("single-tx-job")
    assert "UndefinedTable" in state.last_error["type"]
    assert len(crontab.calls("single-tx-job")) == 1  # the failed attempt's insert rolled back


def test_pg_backfill_job_gets_connection_then_date(crontab):
    crontab.configure(["PGBackfillJob|1d"])
    crontab.run()
    crontab.wind(2 * DAY)
    crontab.run()
    assert len(crontab.calls("pg-backfill")) == 3


def test_subprocess_mixin(crontab):
    crontab.configure(["SubprocessJob|1d"])
    crontab.run()
    assert crontab.state("subprocess-job").last_error == {}


def test_reset_job(crontab):
    crontab.configure(["BasicJob|1d"])
    code, out = crontab.run("--reset-job", "nope", "--reason", "test")
    assert code == 1 and "nope" in out
    assert crontab.run("--reset-job", "basic-job", "--reason", "test") == (
        0,
        "basic-job: had no state (already reset)\n",
    )
    crontab.run()
    assert crontab.run("--reset-job", "basic-job", "--reason", "test")[0] == 0
    assert crontab.state("basic-job") is None
    assert len(crontab.log("basic-job")) == 1  # the log is kept


def test_audit_ghosts_and_reset_of_a_ghost(crontab):
    crontab.configure(["FooJob|1d", "BarJob|1d"])
    crontab.run()
    assert crontab.run("--audit-ghosts") == (
        0,
        "No ghosts: every job in the state database is configured.\n",
    )
    crontab.configure(["FooJob|1d"])
    code, out = crontab.run("--audit-ghosts")
    assert code == 0 and "\tbar\n" in out
    code, out = crontab.run("--reset-job", "bar", "--reason", "test")
    assert code == 0 and "ghost" in out and crontab.state("bar") is None


def test_nagios(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    code, out = crontab.run("--nagios")
    assert code == 0 and out.splitlines()[:-1] == ["OK - All systems nominal"]
    crontab.configure(["BasicJob|1d", "FailingBackfillJob|1d"])
    crontab.run()  # first run: today's date
    crontab.wind(DAY, "failing-backfill")
    today = crontab.now().strftime("%Y-%m-%d")
    fail = f"--crontabber.class-FailingBackfillJob.fail_on={today}"
    crontab.run(fail)
    code, out = crontab.run("--nagios")
    assert code == 1 and out.startswith("WARNING - failing-backfill (FailingBackfillJob) | ")
    assert "NameError" in out and "bla bla" in out
    crontab.wind(DAY, "failing-backfill")
    crontab.run(fail)
    code, out = crontab.run("--nagios")
    assert code == 2 and out.startswith("CRITICAL - ")


def test_nagios_critical_lists_every_failing_job_on_one_line(crontab):
    crontab.configure(["TroubleJob|1d", "ExitJob|1d"])
    crontab.run()
    code, out = crontab.run("--nagios")
    first = out.splitlines()[0]
    assert code == 2 and first.count("CRITICAL") == 1
    assert "trouble (TroubleJob) | <class 'NameError'> | Trouble!!" in first
    assert "exit-job (ExitJob) | <class 'SystemExit'> | 7" in first


def test_system_exit_in_a_job_is_a_failure_and_the_run_goes_on(crontab):
    crontab.configure(["ExitJob|1d", "FooJob|1d"])
    assert crontab.run()[0] == 0
    assert crontab.state("exit-job").error_count == 1
    assert len(crontab.calls("foo")) == 1


def test_keyboard_interrupt_in_a_job_releases_the_lock_and_stops(crontab):
    crontab.configure(
        ["InterruptJob|1d", "SlowJob|1d"], extra="    max_parallel_jobs=1\n"
    )  # the serial tick
    code, out = crontab.run()
    assert code == 130
    state = crontab.state("interrupt")
    assert state.ongoing is None and state.error_count == 1
    assert state.last_error["type"] == "<class 'KeyboardInterrupt'>"
    assert crontab.calls("slow-job") == []  # the run stopped (crontabber went on)


def test_ongoing_marker_blocks_then_goes_stale(crontab):
    crontab.configure(["BasicJob|7d"])
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '1 second',"
        " ongoing = clock_timestamp() - interval '1 second', ongoing_by = 'other:1'"
    )
    code, out = crontab.run()
    assert code == 0 and len(crontab.calls()) == 1  # a tick: another runner has it, no failure
    code, out = crontab.run("--job", "basic-job", "--force")
    assert code == 3 and "basic-job: already running since" in out and "on other:1" in out
    assert "Traceback" not in out
    crontab.sql("UPDATE crontabber SET ongoing = clock_timestamp() - interval '12 hours 1 second'")
    assert crontab.run()[0] == 0 and len(crontab.calls()) == 2
    assert crontab.state("basic-job").ongoing is None


def test_stale_marker_counts_days(crontab):
    """crontabber's .seconds bug let a 25-hour-old marker block again."""
    crontab.configure(["BasicJob|7d"])
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '1 second',"
        " ongoing = clock_timestamp() - interval '25 hours'"
    )
    assert crontab.run()[0] == 0 and len(crontab.calls()) == 2


def test_a_row_locked_job_does_not_stop_the_other_jobs(crontab, database):
    crontab.configure(["BasicJob|1d", "FooJob|1d"])
    crontab.run("--job", "basic-job")
    crontab.wind(DAY + dt.timedelta(seconds=1))
    holder = connect(database)
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT * FROM crontabber WHERE app_name = 'basic-job' FOR UPDATE")
            code, out = crontab.run()
            assert code == 0  # a tick: another runner has it, no failure
            assert len(crontab.calls("foo")) == 1  # crontabber aborted the tick here
            code, out = crontab.run("--job", "basic-job", "--force")
            assert code == 2 and "locked by another runner" in out and "Traceback" not in out
    finally:
        holder.close()
    assert crontab.run()[0] == 0 and len(crontab.calls("basic-job")) == 2


def test_list_jobs_table(crontab):
    # 00:00 UTC: the first tick runs it at any hour (a later time would wait for it)
    crontab.configure(["TroubleJob|1d", "SadJob|1d", "BasicJob|7d|00:00"])
    code, out = crontab.run("--list-jobs")
    # the LAST OK column; a job with a time of day not yet reached also says "never ran"
    assert code == 0 and [line.split()[3] for line in out.splitlines()[1:-1]] == ["never"] * 3
    crontab.run()
    code, out = crontab.run("--list-jobs")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "SCHEDULE", "STATUS"]
    trouble = next(line for line in lines if line.startswith("trouble"))
    assert trouble.split()[2] == "failing" and trouble.endswith("1x NameError: Trouble!!")
    basic = next(line for line in lines if line.startswith("basic-job"))
    assert basic.split()[1:3] == ["7d@00:00", "ok"] and re.search(r" in 6d(\d+h)? ", basic)
    assert next(line for line in lines if line.startswith("sad")).split()[2:4] == [
        "waiting",
        "never",
    ]
    # columns line up: every row's STATUS column starts at the same offset
    offset = lines[0].index("STATUS")
    assert all(line[offset - 2 : offset] == "  " for line in lines[:-1])  # then the database
    wide = crontab.run("--list-jobs", "--wide")[1]
    basic = next(line for line in wide.splitlines() if line.startswith("basic-job"))
    assert basic.split()[1:5] == ["tests.fixtures.sample_jobs.BasicJob", "7d", "@", "00:00"]
    assert re.search(r"00:00:00 \(in 6d(\d+h)?\)", basic)


def test_list_jobs_shows_who_holds_the_job(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp() - interval '61 seconds',"
        " ongoing_by = 'web-3:4242', heartbeat = NULL"
    )
    out = crontab.run("--list-jobs")[1]
    assert out.splitlines()[1].split()[2] == "running"
    assert re.search(
        r"  1m(\d+s)? on web-3, no heartbeat$", out.splitlines()[1]
    )  # 1m and the test's seconds
    out = crontab.run("--list-jobs", "--wide")[1]
    assert re.search(
        r"web-3:4242 \(run 1\) since 1m(\d+s)? ago, no heartbeat \(crontabber 0.18\?\)", out
    )


def test_database_down_gives_a_clear_error(crontab, monkeypatch):
    crontab.configure(["BasicJob|1d"])
    monkeypatch.setenv("RESOURCE_POSTGRESQL_PORT", "1")
    code, out = crontab.run()
    assert code == 1 and "cannot use the state database at" in out and "Traceback" not in out
    assert crontab.run("--nagios")[1].startswith("CRITICAL - cannot use the state database")


def test_job_options_reach_the_job(crontab):
    crontab.configure(["FooJob|1d"], extra="    [[class-FooJob]]\n        sleep=0.01\n")
    assert crontab.run()[0] == 0
    assert len(crontab.calls("foo")) == 1


def test_nagios_status_is_one_line_even_for_multi_line_errors(crontab):
    crontab.configure(["PostgresSampleJob|1d"])
    crontab.sql("DROP TABLE test_job_calls")
    crontab.run()
    code, out = crontab.run("--nagios")
    status, *details, perfdata = out.splitlines()
    assert code == 2 and status.startswith("CRITICAL - pg-job (PostgresSampleJob) | ")
    assert status.endswith('relation "test_job_calls" does not exist') and len(details) == 1
    assert perfdata.startswith("| jobs_failing=1;")


def test_a_job_that_outlives_its_database_connection_still_releases_its_lock(crontab):
    """The state connection is killed while the job runs (a database restart or
    failover); the runner reconnects to write the outcome, so nothing stays ongoing."""
    import threading
    import time

    crontab.configure(["SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=1.5\n")

    def kill_runner_connection():
        deadline = time.monotonic() + 10
        while not crontab.calls("slow-job") and time.monotonic() < deadline:
            time.sleep(0.05)
        crontab.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'crontabber' AND datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )

    killer = threading.Thread(target=kill_runner_connection)
    killer.start()
    assert crontab.run()[0] == 0
    killer.join()
    state = crontab.state("slow-job")
    assert state.ongoing is None and state.error_count == 0 and state.last_success is not None


def test_per_job_retry_time_with_exponential_backoff_and_a_cap(crontab):
    crontab.configure(
        ["TroubleJob|1d", "ExitJob|1d"],
        error_retry_time=100,
        extra=(
            "    [[class-TroubleJob]]\n        error_retry_time=10\n        error_backoff=2\n"
            "        error_retry_max=25\n"
        ),
    )
    waits = []
    for _ in range(4):
        crontab.run("--job", "trouble", "--force")
        state = crontab.state("trouble")
        waits.append((state.next_run - state.last_run).total_seconds())
    assert waits == [10, 20, 25, 25]
    crontab.run("--job", "exit-job")  # the other job keeps the global, constant retry time
    exit_job = crontab.state("exit-job")
    assert (exit_job.next_run - exit_job.last_run).total_seconds() == 100
    # a success resets the count: the next failure waits the base time again
    crontab.sql("UPDATE crontabber SET error_count = 0 WHERE app_name = 'trouble'")
    crontab.run("--job", "trouble", "--force")
    state = crontab.state("trouble")
    assert (state.next_run - state.last_run).total_seconds() == 10


def test_each_run_gets_a_new_run_id_recorded_with_its_log_rows(crontab):
    import socket

    crontab.configure(["BasicJob|1d"])
    crontab.run("--job", "basic-job")
    crontab.run("--job", "basic-job", "--force")
    rows = crontab.log("basic-job")
    assert len(rows) == 2 and rows[0]["run_id"] < rows[1]["run_id"]
    assert crontab.state("basic-job").run_id == rows[1]["run_id"]
    assert {row["host"] for row in rows} == {socket.gethostname()}
    calls = crontab.sql("SELECT run_id, pid FROM test_job_calls ORDER BY id")
    assert [c["run_id"] for c in calls] == [r["run_id"] for r in rows]
    # each run happened in a child process of the runner (which wrote the log rows)
    assert all(c["pid"] != r["pid"] for c, r in zip(calls, rows))
