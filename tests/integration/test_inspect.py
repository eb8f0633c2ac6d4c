"""--list-jobs, --history and --show-error in-process against a real
PostgreSQL: the text, the --json shapes checked against the database, and
every refusal."""

import datetime as dt
import json

from tests.fixtures.inspect_states import LONG_ERROR, realistic_fleet

DAY = dt.timedelta(days=1)


def iso(value):
    return (
        None if value is None else value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def jobs_json(crontab, *args):
    code, out = crontab.run("--list-jobs", *args, "--json")
    assert code == 0, out
    document = json.loads(out)
    return {job["name"]: job for job in document["jobs"]}, document


def test_list_jobs_fits_100_columns_with_realistic_names(crontab):
    realistic_fleet(crontab)
    code, out = crontab.run("--list-jobs")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 9 and max(map(len, lines)) <= 100, out
    assert lines.pop().startswith("database: ")  # which database the table was read from
    assert lines[0].split() == ["NAME", "SCHEDULE", "STATUS", "LAST", "OK", "NEXT", "RUN", "DETAIL"]
    row = {line.split()[0]: line for line in lines[1:]}
    assert row["prune-run-log"].split()[1:7] == ["1d@03:00", "ok", "20m", "ago", "in", "3h59m"]
    assert " failing " in row["missing-symbols-retention"]
    assert "3x UndefinedTable: relation" in row["missing-symbols-retention"]
    assert row["missing-symbols-retention"].endswith("...")
    running = row["process-uploads"]
    assert " running " in running and running.endswith("7m on symbols-cron-2, beat 4s ago")
    orphaned = row["rebuild-search-index"]
    assert " orphaned " in orphaned and "expired: beat 1h ago, symbols-" in orphaned
    assert " paused " in row["prune-s3"] and "ends in 4h59m: S3 bucket migrat..." in row["prune-s3"]
    assert " overdue " in row["missing-symbols"] and "was due 3h ago" in row["missing-symbols"]
    assert "CLASS" not in out and "jobs.prune" not in out


def test_list_jobs_wide_shows_class_absolute_times_and_the_whole_error(crontab):
    realistic_fleet(crontab)
    code, out = crontab.run("--list-jobs", "--wide")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["NAME", "CLASS"]
    retention = next(line for line in lines if line.startswith("missing-symbols-retention"))
    assert retention.endswith(f"UndefinedTable: {LONG_ERROR}") and len(LONG_ERROR) > 60
    assert "jobs.missing_symbols.apps.MissingSymbolsRetentionCronApp" in retention
    uploads = next(line for line in lines if line.startswith("process-uploads"))
    assert (
        "symbols-cron-2.prod.example.net:31337 (run 812) since 7m ago, heartbeat 4s ago" in uploads
    )
    search = next(line for line in lines if line.startswith("rebuild-search-index"))
    assert "; expired: the next tick takes it over" in search
    prune = next(line for line in lines if line.startswith("prune-s3 "))
    assert "by alice@ops-laptop-7: S3 bucket migration INC-4711: do not delete anything" in prune
    last_run = crontab.state("prune-run-log").last_run.astimezone(dt.timezone.utc)
    assert f"{last_run:%Y-%m-%d %H:%M:%S} (20m ago)" in lines[1]


def test_list_jobs_filters_by_name_and_refuses_an_unknown_one(crontab):
    crontab.configure(["TroubleJob|1d", "SadJob|1d", "BasicJob|7d|03:00"])
    crontab.run()
    code, out = crontab.run("--list-jobs", "basic-job", "tests.fixtures.sample_jobs.TroubleJob")
    names = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert code == 0 and names == ["trouble", "basic-job"]  # config order
    code, out = crontab.run("--list-jobs", "basic-job", "nope")
    assert code == 1 and out.count("\n") == 1
    assert out.startswith("crontabber: no configured job is called 'nope'; configured: trouble,")
    jobs, _ = jobs_json(crontab, "sad")
    assert list(jobs) == ["sad"]


def test_list_jobs_json_matches_the_database(crontab):
    realistic_fleet(crontab)
    jobs, document = jobs_json(crontab)
    now = crontab.now()
    assert abs((dt.datetime.fromisoformat(document["now"]) - now).total_seconds()) < 5
    assert [job["name"] for job in document["jobs"]] == [
        "prune-run-log",
        "missing-symbols",
        "missing-symbols-report",
        "missing-symbols-retention",
        "process-uploads",
        "rebuild-search-index",
        "prune-s3",
    ]
    for name, job in jobs.items():
        state = crontab.state(name)
        assert set(job) == {
            "name",
            "class",
            "schedule",
            "time_zone",
            "status",
            "last_run",
            "last_success",
            "last_success_marked",
            "next_run",
            "next_run_local",
            "error_count",
            "last_error",
            "ongoing",
            "paused",
            "waiting_for",
            "no_host",
            "late_seconds",
            "deadline_missed",
            "depends_on",
            "is_backfill",
        }
        assert (job["last_run"], job["last_success"], job["next_run"], job["error_count"]) == (
            iso(state.last_run),
            iso(state.last_success),
            iso(state.next_run),
            state.error_count,
        )
        local = state.next_run.isoformat() if state.next_run else None  # every job here is UTC's
        assert (job["time_zone"], job["next_run_local"]) == ("UTC", local)
    assert {name: job["status"] for name, job in jobs.items()} == {
        "prune-run-log": "ok",
        "missing-symbols": "overdue",
        "missing-symbols-report": "ok",
        "missing-symbols-retention": "failing",
        "process-uploads": "running",
        "rebuild-search-index": "orphaned",
        "prune-s3": "paused",
    }
    retention = jobs["missing-symbols-retention"]
    assert retention["last_error"] == {
        "type": "psycopg2.errors.UndefinedTable",
        "value": LONG_ERROR,
        "traceback": '  File "x.py", line 1, in run\n    cur.execute(q)\n',
        "summary": "UndefinedTable: "
        + LONG_ERROR.splitlines()[0],  # no run in the ledger: from the value
    }
    assert retention["class"] == "jobs.missing_symbols.apps.MissingSymbolsRetentionCronApp"
    assert retention["schedule"] == "1d @ 04:00" and retention["depends_on"] == []
    uploads = crontab.state("process-uploads")
    assert jobs["process-uploads"]["ongoing"] == {
        "since": iso(uploads.ongoing),
        "by": "symbols-cron-2.prod.example.net:31337",
        "run_id": 812,
        "heartbeat": iso(uploads.heartbeat),
        "verdict": "live",
    }
    assert jobs["rebuild-search-index"]["ongoing"]["verdict"] == "expired"
    prune = crontab.state("prune-s3")
    assert jobs["prune-s3"]["paused"] == {
        "until": iso(prune.paused_until),
        "reason": prune.paused_reason,
        "by": "alice@ops-laptop-7",
    }
    assert jobs["prune-run-log"]["paused"] is None and jobs["prune-run-log"]["ongoing"] is None
    assert 3 * 3600 - 5 < jobs["missing-symbols"]["late_seconds"] < 3 * 3600 + 5
    assert jobs["missing-symbols-report"]["is_backfill"] is True
    assert jobs["prune-run-log"]["is_backfill"] is False


def test_statuses_of_sample_jobs(crontab):
    crontab.configure(["TroubleJob|1d", "SadJob|1d", "BasicJob|7d", "FooJob|1d"])
    jobs, _ = jobs_json(crontab)
    assert {name: job["status"] for name, job in jobs.items()} == {
        "trouble": "due",
        "sad": "waiting",
        "basic-job": "due",
        "foo": "due",
    }
    assert jobs["sad"]["waiting_for"] == "'trouble' hasn't been run yet"
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '10 minutes' WHERE app_name "
        "= 'foo'"
    )
    jobs, _ = jobs_json(crontab)
    assert {name: job["status"] for name, job in jobs.items()} == {
        "trouble": "failing",
        "sad": "waiting",
        "basic-job": "ok",
        "foo": "due",
    }
    assert jobs["sad"]["waiting_for"] == "'trouble' errored last time it ran"
    assert 590 < jobs["foo"]["late_seconds"] < 610  # late, but within the overdue threshold


def test_a_pause_that_ended_is_not_a_pause(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET paused_until = clock_timestamp() - interval '1 minute',"
        " paused_reason = 'over', paused_by = 'bob@h'"
    )
    jobs, _ = jobs_json(crontab)
    assert jobs["basic-job"]["status"] == "ok" and jobs["basic-job"]["paused"] is None
    assert " paused " not in crontab.run("--list-jobs")[1]
    crontab.sql("UPDATE crontabber SET paused_until = clock_timestamp() + interval '1 hour'")
    jobs, _ = jobs_json(crontab)
    assert jobs["basic-job"]["status"] == "paused"
    assert jobs["basic-job"]["paused"]["reason"] == "over"


# ---------------------------------------------------------------------------- --history


def backfill_history(crontab):
    """foo-backfill: a first run, a run over three intervals, then a failed run
    of failing-backfill over two intervals and a failure."""
    crontab.configure(["FooBackfillJob|1d", "FailingBackfillJob|1d"])
    crontab.run()
    crontab.wind(3 * DAY + dt.timedelta(seconds=1))
    # the last of the three intervals (today's, UTC): "now - 12 h" was yesterday before noon,
    # and the test failed every morning (UTC)
    fail_on = crontab.now().astimezone(dt.timezone.utc).strftime("%Y-%m-%d")
    crontab.run(f"--crontabber.class-FailingBackfillJob.fail_on={fail_on}")


def test_history_of_a_backfill_job_shows_each_interval_and_its_run(crontab):
    backfill_history(crontab)
    log = crontab.log("foo-backfill")
    assert len(log) == 4 and len({row["run_id"] for row in log}) == 2
    code, out = crontab.run("--history", "foo-backfill")
    lines = out.splitlines()
    assert code == 0 and max(map(len, lines)) <= 100
    header = ["STARTED", "(UTC)", "TOOK", "BY", "RUN", "KIND", "OUTCOME", "INTERVALS", "DETAIL"]
    assert lines[0].split() == header
    newest, first = log[-1], log[0]
    # one line per run: the newest covered three intervals, the first one
    days = [entry["success"].strftime("%Y-%m-%d") for entry in log[1:]]
    assert lines[1].split()[4:9] == [
        str(newest["run_id"]),
        "scheduled",
        "ok",
        f"{days[0]}..{days[-1]}",
        "(3)",
    ]
    assert lines[2].split()[4:8] == [
        str(first["run_id"]),
        "scheduled",
        "ok",
        first["success"].strftime("%Y-%m-%d"),
    ]
    assert f"{newest['host']}:{newest['pid']}" in lines[1]
    assert lines[3] == "(a backfill job: --history foo-backfill --run RUN lists a run's intervals)"
    # --run: that run's rows, one per interval, newest first
    code, out = crontab.run("--history", "foo-backfill", "--run", str(newest["run_id"]))
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "STARTED",
        "(UTC)",
        "TOOK",
        "BY",
        "RUN",
        "OUTCOME",
        "INTERVAL",
        "DETAIL",
    ]
    rows = lines[1:-1]
    assert [row.split()[4:7] for row in rows] == [
        [str(newest["run_id"]), "ok", day] for day in reversed(days)
    ]


def test_history_of_a_failed_backfill_run(crontab):
    backfill_history(crontab)
    code, out = crontab.run("--history", "failing-backfill")
    lines = out.splitlines()[1:]
    # newest first: the failed run (two intervals done before its failure), then the first run
    assert [line.split()[6] for line in lines[:2]] == ["failed", "ok"]
    assert "NameEr" in lines[0] and lines[0].split()[8] == "(2)"  # cut to 100 columns
    run_id = lines[0].split()[4]
    code, out = crontab.run("--history", "failing-backfill", "--run", run_id)
    rows = out.splitlines()[1:-1]
    # that run's rows, newest first: the failure, then its two intervals
    assert [row.split()[5] for row in rows] == ["failed", "ok", "ok"]
    assert "NameError: bla bla" in rows[0] and rows[0].split()[6] == "-"
    assert {row.split()[4] for row in rows} == {run_id}
    code, out = crontab.run("--history", "failing-backfill", "--json")
    document = json.loads(out)
    log = crontab.log("failing-backfill")
    assert code == 0 and document["job"] == "failing-backfill" and document["is_backfill"] is True
    assert document["more"] is False
    failed, first = document["runs"]
    assert failed["run_id"] == log[-1]["run_id"] and failed["outcome"] == "failed"
    assert failed["error"]["type"] == "NameError" and failed["error"]["value"] == "bla bla"
    assert 'raise NameError("bla bla")' in failed["error"]["traceback"]
    assert [e["id"] for e in failed["entries"]] == [row["id"] for row in reversed(log[1:])]
    assert [e["outcome"] for e in failed["entries"]] == ["failed", "ok", "ok"]
    assert failed["by"] == f"{log[-1]['host']}:{log[-1]['pid']}"
    assert failed["ended"] == iso(log[-1]["log_time"])
    assert abs(failed["duration"] - sum(e["duration"] for e in failed["entries"])) < 1
    assert first["outcome"] == "ok" and len(first["entries"]) == 1
    assert set(failed) == {
        "run_id",
        "by",
        "host",
        "pid",
        "started",
        "ended",
        "duration",
        "outcome",
        "error",
        "heartbeat",
        "verdict",
        "kind",
        "summary",
        "output_bytes",
        "entries",
        "metrics",
        "breach",
    }
    assert failed["kind"] == "scheduled" and first["summary"] is None


def test_history_limit_counts_runs_and_old_rows_have_no_run_id(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.sql(
        "INSERT INTO crontabber_log (app_name, log_time, duration, success) VALUES"
        " ('basic-job', clock_timestamp() - interval '2 days', interval '3 seconds',"
        "  clock_timestamp() - interval '2 days')"
    )
    for _ in range(3):
        crontab.run("--job", "basic-job", "--force")
    code, out = crontab.run("--history", "basic-job")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 6
    assert lines[-2].split()[2:7] == ["3.00s", "-", "-", "-", "ok"]
    code, out = crontab.run("--history", "basic-job", "--limit", "2")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 5 and lines[-2] == "(older runs not shown: --limit 4)"
    runs = [row["run_id"] for row in reversed(crontab.log("basic-job"))]
    assert [line.split()[4] for line in lines[1:3]] == [str(runs[0]), str(runs[1])]
    document = json.loads(crontab.run("--history", "basic-job", "--limit", "1", "--json")[1])
    assert document["more"] is True and [r["run_id"] for r in document["runs"]] == [runs[0]]
    document = json.loads(crontab.run("--history", "basic-job", "--json")[1])
    assert document["runs"][-1]["run_id"] is None and document["runs"][-1]["by"] is None


def test_history_shows_the_run_in_progress_and_a_fenced_off_run(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    crontab.sql(
        "INSERT INTO crontabber_log (app_name, duration, exc_type, exc_value, exc_traceback,"
        " run_id, host, pid) VALUES ('basic-job', interval '5 seconds',"
        " '<class ''crontabber.errors.LeaseLost''>',"
        " 'LeaseLost(''run 41 was fenced off; the job succeeded'')', '', 41, 'cron-9', 77)"
    )
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp() - interval '90 seconds',"
        " ongoing_by = 'cron-7:555', run_id = 42, heartbeat = clock_timestamp() - interval '2 "
        "seconds'"
    )
    code, out = crontab.run("--history", "basic-job")
    running, fenced, ok, _ = out.splitlines()[1:]
    assert running.split()[2:8] == ["1m30s+", "cron-7:555", "42", "-", "running", "heartbeat"]
    assert fenced.split()[3:8] == ["cron-9:77", "41", "-", "fenced", "off"]
    assert "  run 41 was fenced off; the j" in fenced  # cut to 100 columns
    assert ok.split()[6] == "ok"
    document = json.loads(crontab.run("--history", "basic-job", "--json")[1])
    assert [r["outcome"] for r in document["runs"]] == ["running", "fenced_off", "ok"]
    assert document["runs"][0]["verdict"] == "live" and document["runs"][0]["entries"] == []
    assert document["runs"][0]["ended"] is None


def test_history_of_a_ghost_and_of_a_job_without_runs(crontab):
    crontab.configure(["FooJob|1d", "BarJob|1d"])
    crontab.run()
    crontab.configure(["FooJob|1d"])
    code, out = crontab.run("--history", "bar")
    assert code == 0 and len(out.splitlines()) == 3 and " ok" in out
    crontab.configure(["FooJob|1d", "BasicJob|1d"])
    assert crontab.run("--history", "basic-job") == (
        0,
        "basic-job: no runs in the run log (crontabber_log)\ndatabase: "
        f"{crontab.database.target}\n",
    )
    code, out = crontab.run("--history", "nope")
    assert code == 1 and out.startswith("crontabber: no configured job is called 'nope'")
    assert json.loads(crontab.run("--history", "basic-job", "--json")[1])["runs"] == []


# ---------------------------------------------------------------------------- --show-error


def test_show_error_prints_the_whole_traceback_of_the_last_failure(crontab):
    crontab.configure(["TroubleJob|1d"])
    crontab.run()
    crontab.run("--job", "trouble", "--force")
    last = crontab.log("trouble")[-1]
    code, out = crontab.run("--show-error", "trouble")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].startswith(
        f"trouble: run {last['run_id']} failed "
        f"{last['log_time'].astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
    )
    assert f"on {last['host']}:{last['pid']} after " in lines[0]
    assert lines[1] == "NameError: Trouble!!"
    assert lines[3] == "Traceback (most recent call last):"
    assert '    raise NameError("Trouble!!")' in lines and lines[-1] == "NameError: Trouble!!"
    first = crontab.log("trouble")[0]["run_id"]
    code, out = crontab.run("--show-error", "trouble", "--run", str(first))
    assert code == 0 and out.startswith(f"trouble: run {first} failed ")


def test_show_error_and_history_escape_control_characters_in_the_error(crontab):
    crontab.configure(["TroubleJob|1d"])
    crontab.run()
    hostile = "member 'a\x1b]0;pwned\x07\u202e.sym'\nsecond line"
    crontab.sql(
        "UPDATE crontabber_log SET exc_value = %s, exc_traceback = %s",
        (hostile, f"  File 'x'\nNameError: {hostile}\n"),
    )
    crontab.sql(
        "UPDATE crontabber SET last_error = jsonb_set(last_error::jsonb, '{value}',"
        " to_jsonb(%s::text))::json WHERE last_error IS NOT NULL",
        (hostile,),
    )
    for args in (("--show-error", "trouble"), ("--history", "trouble"), ("--list-jobs",)):
        code, out = crontab.run(*args)
        assert code == 0 and "\x1b" not in out and "\x07" not in out and "\u202e" not in out, out
    assert "a\\x1b]0;pwned\\x07\\u202e.sym" in crontab.run("--show-error", "trouble")[1]


def test_show_error_says_so_in_one_line_when_there_is_none(crontab):
    crontab.configure(["BasicJob|1d", "FooBackfillJob|1d"])
    crontab.run()
    assert crontab.run("--show-error", "basic-job") == (
        0,
        "basic-job: no failed run in the run log\n",
    )
    run = crontab.log("basic-job")[0]["run_id"]
    assert crontab.run("--show-error", "basic-job", "--run", str(run)) == (
        0,
        f"basic-job: run {run} succeeded (1 row in the log): no error\n",
    )
    code, out = crontab.run("--show-error", "basic-job", "--run", "99999")
    assert code == 1 and out == (
        "crontabber: basic-job: no run 99999 in the run log "
        "(crontabber_log) or the run ledger (crontabber_run); "
        "--history basic-job lists its runs\n"
    )
    document = json.loads(crontab.run("--show-error", "basic-job", "--json")[1])
    assert document == {
        "job": "basic-job",
        "failure": None,
        "run": None,
        "message": "basic-job: no failed run in the run log",
    }


def test_show_error_falls_back_to_the_state_row_when_the_log_was_pruned(crontab):
    crontab.configure(["TroubleJob|1d"])
    crontab.run()
    crontab.sql("DELETE FROM crontabber_log")
    code, out = crontab.run("--show-error", "trouble")
    assert (
        code == 0 and "(from the job's state row: the log has no row of it)" in out.splitlines()[0]
    )
    assert 'raise NameError("Trouble!!")' in out


def test_show_error_json_matches_the_log(crontab):
    crontab.configure(["TroubleJob|1d"])
    crontab.run()
    row = crontab.log("trouble")[-1]
    code, out = crontab.run("--show-error", "trouble", "--json")
    document = json.loads(out)
    assert code == 0 and document["job"] == "trouble"
    assert document["message"].startswith(f"trouble: run {row['run_id']} failed ")
    failure = document["failure"]
    assert failure == {
        "run_id": row["run_id"],
        "outcome": "failed",
        "at": iso(row["log_time"]),
        "duration": row["duration"].total_seconds(),
        "by": f"{row['host']}:{row['pid']}",
        "host": row["host"],
        "pid": row["pid"],
        "source": "log",
        "error": {
            "type": "NameError",
            "value": "Trouble!!",
            "traceback": row["exc_traceback"],
            "summary": "NameError: Trouble!!",
        },
    }


# ---------------------------------------------------------------------------- refusals


def test_flags_without_their_command_are_refused(crontab):
    crontab.configure(["BasicJob|1d"])
    for args, flag in (
        (["--wide"], "--wide"),
        (["--history", "basic-job", "--wide"], "--wide"),
        (["--list-jobs", "--limit", "3"], "--limit"),
        (["--show-error", "basic-job", "--limit", "3"], "--limit"),
        (["--list-jobs", "--run", "3"], "--run"),
        (["--history", "basic-job", "--run", "3", "--limit", "2"], "--limit"),
        (["--list-jobs", "--wide", "--json"], "--wide"),
    ):
        code, out = crontab.run(*args)
        assert code == 1 and out.startswith(f"crontabber: {flag}: "), args
        assert out.count("\n") == 1
    code, out = crontab.run("--history", "basic-job", "--limit", "0")
    assert code == 1 and "--limit: must be a number of runs, 1 or more, not 0" in out
    code, out = crontab.run("--history", "basic-job", "--limit", "x")
    assert code == 1 and "invalid int value: 'x'" in out and out.count("\n") == 1
    code, out = crontab.run("--show-error")
    assert code == 1 and "expected one argument" in out
