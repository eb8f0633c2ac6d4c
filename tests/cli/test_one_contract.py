"""One contract for every command (issue #32 items 11, 12, 13, 15), through the real entry
points: ``python -m crontabber`` and the jobs' ``python -m jobs.X`` as subprocesses, against
the real PostgreSQL and S3.

- 11: every override of a pause needs ``--reason`` (trial #9: ``jobs.prune run --force`` did
  not), and the refusal reads as English;
- 12: a run's ``--crontabber.*`` overrides are recorded with the run and in the audit, and
  ``--show-error`` carries the one-line error that names the bucket (trial #7);
- 13: a tick that finds a job held by another runner exits 0, and the exit-code table and the
  systemd unit agree on it (trial #10);
- 15: ``--show-error`` says when the failure it shows is history, ``--reset-job`` names the
  run whose marker it discarded (trials #14, #16).
"""

from __future__ import annotations

import json
import re

import psycopg2

from tests.fixtures.missing_symbols_data import AGGREGATE, entries, ini
from tests.fixtures.prune_buckets import buckets, configure_prune, wait_past_retention
from tests.helpers import REPO, job_command, keys_in, put_many

BAD_BUCKET = "no-such-bucket-contract"
OVERRIDE = f"--crontabber.class-MissingSymbolsCronApp.inbox_bucket={BAD_BUCKET}"


def commands_audited(cli):
    return [e for e in json.loads(cli.run("--audit", "--json").stdout) if e["action"] == "command"]


# ----------------------------------------------------------------------------- item 11


def test_a_job_command_overrides_a_pause_only_with_a_reason(cli, buckets):  # noqa: F811
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    doomed = [f"reports/missing-symbols/{i}.csv" for i in range(3)]
    put_many(symbols, doomed)
    assert (
        cli.run("--pause", "prune-s3", "--reason", "S3 incident INC-9", "--until", "1h").returncode
        == 0
    )
    refused = job_command(cli, "jobs.prune", "run")
    assert refused.returncode == 6, refused.stderr
    assert "prune-s3: refusing to run 'python -m jobs.prune run': paused until" in refused.stderr
    assert "--force --reason TEXT runs it anyway" in refused.stderr
    forced = job_command(cli, "jobs.prune", "run", "--force")
    assert forced.returncode == 1, forced.stderr
    (line,) = forced.stderr.strip().splitlines()
    assert line.startswith("python -m jobs.prune: prune-s3: --force overrides its pause (until ")
    assert "S3 incident INC-9" in line and "only with --reason TEXT" in line
    assert keys_in(symbols) >= set(doomed)  # nothing deleted
    wait_past_retention(cli, symbols, doomed)
    done = job_command(cli, "jobs.prune", "run", "--force", "--reason", "INC-9 cleanup")
    assert done.returncode == 0, done.stderr
    assert not keys_in(symbols) & set(doomed)
    seen = [
        (e["detail"]["outcome"], e["detail"]["force"], e["reason"]) for e in commands_audited(cli)
    ]
    assert seen == [
        ("done", True, "INC-9 cleanup"),
        ("refused (exit 1)", True, None),
        ("refused (exit 6)", False, None),
    ]  # newest first
    # the other job commands that override a pause follow the same rule
    cli.crontab.configure(
        ["jobs.uploads.ProcessUploadsCronApp|5m"],
        extra=(
            f"    [[class-ProcessUploadsCronApp]]\n        inbox_bucket={inbox}\n        "
            f"symbols_bucket={symbols}\n"
        ),
    )
    assert cli.run("--pause", "process-uploads", "--reason", "bad release").returncode == 0
    drained = job_command(cli, "jobs.uploads", "drain", "--force")
    assert drained.returncode == 1 and "only with --reason TEXT" in drained.stderr, drained.stderr


def test_job_force_overrides_a_pause_only_with_a_reason(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"], extra="    require_reason = False\n")
    assert cli.run("--pause", "basic-job", "--reason", "INC-11").returncode == 0
    done = cli.run("--job", "basic-job", "--force")
    assert done.returncode == 1 and crontab.calls("basic-job") == []
    assert "basic-job: --force overrides its pause (until " in done.stderr
    assert "INC-11) only with --reason TEXT" in done.stderr
    done = cli.run("--job", "basic-job", "--force", "--reason", "INC-11: run it once")
    assert done.returncode == 0, done.stderr
    assert len(crontab.calls("basic-job")) == 1
    entries_ = json.loads(cli.run("--audit", "--json").stdout)
    assert [(e["action"], e["reason"], e["detail"]["outcome"]) for e in entries_[:3]] == [
        ("force", "INC-11: run it once", "done"),
        ("force", "INC-11: run it once", "started"),  # in the trail from its start
        ("force", None, "refused (exit 1)"),
    ]
    assert entries_[0]["detail"]["started"] == entries_[1]["id"]
    assert "[no end recorded" not in cli.run("--audit").stdout
    assert cli.run("--resume", "basic-job").returncode == 0
    assert cli.run("--job", "basic-job", "--force").returncode == 0  # no pause: no reason needed


# ----------------------------------------------------------------------------- item 12


def test_a_forced_runs_overrides_and_the_error_naming_the_bucket_are_kept(cli, s3_bucket):
    crontab = cli.crontab
    crontab.configure(entries(f"{AGGREGATE}|1d"), extra=ini(s3_bucket))
    done = cli.run("--job", "missing-symbols", "--force", "--reason", "drill: bad bucket", OVERRIDE)
    assert done.returncode == 5, done.stderr
    shown = cli.run("--show-error", "missing-symbols")
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    assert lines[1].startswith(f"error: S3 (bucket {BAD_BUCKET}): "), shown.stdout
    assert lines[2] == f"ran with: {OVERRIDE} (command-line overrides)"
    as_json = json.loads(cli.run("--show-error", "missing-symbols", "--json").stdout)
    assert as_json["run"]["options"] == [OVERRIDE] and BAD_BUCKET in as_json["run"]["error"]
    assert f"ran with: {OVERRIDE}" in cli.run("--logs", "missing-symbols").stdout
    ended, started = [
        e for e in json.loads(cli.run("--audit", "--json").stdout) if e["action"] == "force"
    ]
    assert ended["detail"]["options"] == started["detail"]["options"] == [OVERRIDE]
    assert (started["detail"]["outcome"], ended["detail"]["outcome"]) == (
        "started",
        "failed (exit 5)",
    )
    assert f"options=['{OVERRIDE}']" in cli.run("--audit", "--limit", "1").stdout
    # a run without overrides records none; the old failure is then history (item 15)
    assert cli.run("--job", "missing-symbols", "--force").returncode == 0
    assert crontab.sql("SELECT options FROM crontabber_run ORDER BY run_id") == [
        {"options": [OVERRIDE]},
        {"options": None},
    ]
    shown = cli.run("--show-error", "missing-symbols").stdout.splitlines()
    assert shown[3].startswith(
        "superseded: the job has no error now (an older failure); its last run: "
    ), shown
    assert json.loads(cli.run("--show-error", "missing-symbols", "--json").stdout)["superseded"]


# ----------------------------------------------------------------------------- item 13


def test_a_tick_exits_0_when_another_runner_holds_a_job(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|7d", "FooJob|7d"])
    assert cli.run().returncode == 0
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '1 second',"
        " ongoing = clock_timestamp(), ongoing_by = 'cron-b:4242'"
        " WHERE app_name = 'basic-job'"
    )
    tick = cli.run()
    assert tick.returncode == 0, tick.stderr  # a fleet's normal case
    assert "basic-job: already running since" in tick.stderr and "WARNING" not in tick.stderr
    assert cli.run("--job", "basic-job").returncode == 3  # one job asked for: it did not run
    # its row locked by another runner that very moment: the same
    crontab.sql("UPDATE crontabber SET ongoing = NULL, ongoing_by = NULL")
    db = crontab.database
    holder = psycopg2.connect(
        host=db.host, port=db.port, dbname=db.dbname, user=db.user, password=db.password
    )
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT 1 FROM crontabber WHERE app_name = 'basic-job' FOR UPDATE")
            tick = cli.run()
            assert tick.returncode == 0, tick.stderr
            assert "basic-job: its state row is locked by another runner" in tick.stderr
            assert cli.run("--job", "basic-job").returncode == 2
    finally:
        holder.rollback()
        holder.close()


def test_the_exit_code_table_and_the_systemd_unit_agree_on_a_tick():
    from crontabber.command import TICK_EXIT_CODES

    assert 2 not in TICK_EXIT_CODES and 3 not in TICK_EXIT_CODES
    unit = (REPO / "docs" / "deploy.md").read_text()
    success = [
        int(code)
        for line in re.findall(r"^SuccessExitStatus=(.*)$", unit, re.M)
        for code in line.split()
    ]
    assert all(code in TICK_EXIT_CODES for code in success), success
    table = (REPO / "docs" / "reference" / "exit-codes.md").read_text()
    assert "A cron tick (no mode option) exits with one of 0, 1, 4, 8, 130, 143" in table
    runbook = (REPO / "docs" / "operations.md").read_text()
    assert (
        "| 3 | the job is running elsewhere: `--job`, or a reset or release refused for "
        "that reason; a cron tick exits 0 |" in runbook
    )


# ----------------------------------------------------------------------------- item 15


def test_reset_job_names_the_run_whose_marker_it_discarded(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|7d"])
    assert cli.run().returncode == 0
    run_id = crontab.state("basic-job").run_id
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp() - interval '13 hours', ongoing_by = "
        "'gone-host:4242'"
    )
    done = cli.run("--reset-job", "basic-job", "--reason", "host lost")
    assert done.returncode == 0, done.stderr
    last = crontab.state  # gone: the row was deleted
    assert done.stdout.startswith(
        f"basic-job: state reset; discarded the marker of gone-host:4242 "
        f"(run {run_id}), recorded as abandoned: --history basic-job: forgot its last success ("
    )  # issue #42 item 13: what a reset forgot, and what stays
    assert done.stdout.endswith(
        "), its next run and its backfill anchor; its log and run history stay; the next tick runs "
        "it as a new job\n"
    )
    assert last("basic-job") is None


def test_argument_errors_are_not_called_configuration_errors(cli):
    """Trial #16: ``configuration error in --release: needs --reason TEXT``."""
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run("--release", "basic-job")
    assert done.returncode == 1
    assert done.stderr.startswith("crontabber: --release: needs --reason TEXT ("), done.stderr
    done = cli.run("--until", "2h")
    assert done.stderr == (
        "crontabber: --until: only means something with --pause NAME, --mute NAME or --drain HOST\n"
    )
    done = cli.run("--crontabber.error_retry_time=soon")  # the configuration's: still called so
    assert (
        done.returncode == 1 and "configuration error in crontabber.error_retry_time" in done.stderr
    )


def test_list_jobs_takes_its_names_after_wide_and_no_far_fetched_guess(cli):
    """Issue #42 item 13: ``--list-jobs --wide NAME`` was refused (``--list-jobs NAME --wide``
    worked); ``--prot`` suggested ``--to``."""
    cli.crontab.configure(["BasicJob|1d", "FooJob|1d"])
    for argv in (("--list-jobs", "--wide", "foo"), ("--list-jobs", "foo", "--wide")):
        done = cli.run(*argv)
        assert done.returncode == 0, done.stderr
        assert [line.split()[0] for line in done.stdout.splitlines()[1:2]] == ["foo"], done.stdout
    done = cli.run("--list-jobs", "--wide", "foo", "--crontabber.lease_seconds", "90")
    assert done.returncode == 0 and "basic-job" not in done.stdout, done.stderr
    done = cli.run("--prot", "8080")
    assert (
        done.returncode == 1
        and done.stderr == "crontabber: the command line: unrecognized argument '--prot'\n"
    )
    assert "(did you mean --list-jobs?)" in cli.run("--list-jbos").stderr
