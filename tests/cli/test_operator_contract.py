"""One operator contract (issue #23, section 3), through the real entry point against the
real PostgreSQL: an option without its mode is refused (it used to run a whole tick), a
second pause does not silently replace another operator's, a pause stops --rerun unless
--force, --job exits non-zero when nothing ran, and a closed pipe ends quietly."""

import datetime as dt
import json
import subprocess

import pytest

from crontabber.version import version
from tests.fixtures.runs import backfilled, slow_job
from tests.fixtures.waiting import wait_for
from tests.helpers import REPO, one_line

STRAY = {
    "--until 2h": "--until: only means something with --pause NAME",
    "--reason x": "--reason: only means something with an action",
    "--date 2026-11-01": "--date: only means something with --rerun NAME",
    "--to 2026-11-02": "--to: only means something with --rerun NAME",
    "--audit-job basic-job": "--audit-job: only means something with --audit",
    "--replace": "--replace: only means something with --pause NAME",
    "--list-jobs --reason x": "--reason: only means something with an action",
    "--list-jobs --nagios": "--list-jobs and --nagios: one mode at a time",
    "--pause basic-job --reset-job basic-job --reason x": (
        "--reset-job and --pause: one mode at a time"
    ),
}


@pytest.mark.parametrize("args", list(STRAY))
def test_an_option_without_its_mode_is_one_line_and_runs_nothing(cli, args):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    done = cli.run(*args.split())
    assert done.returncode == 1 and STRAY[args] in one_line(done), done.stderr
    assert crontab.calls("basic-job") == [] and crontab.state("basic-job") is None
    assert done.stdout == ""


def test_a_second_pause_is_refused_naming_the_first_unless_replace(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    assert cli.run("--pause", "basic-job", "--until", "2h", "--reason", "INC-1: S3").returncode == 0
    first = crontab.state("basic-job")
    done = cli.run("--pause", "basic-job", "--until", "30m", "--reason", "shorter")
    assert done.returncode == 6, done.stderr
    line = one_line(done)
    assert line.startswith("crontabber: basic-job: refusing to pause it again: paused until ")
    assert f"by {first.paused_by}: INC-1: S3; --pause basic-job --replace" in line
    after = crontab.state("basic-job")
    assert (after.paused_until, after.paused_reason) == (first.paused_until, first.paused_reason)
    audited = crontab.sql("SELECT action, detail FROM crontabber_audit ORDER BY id")
    assert [(a["action"], a["detail"]["outcome"]) for a in audited] == [
        ("pause", "done"),
        ("pause", "refused (exit 6)"),
    ]  # the refusal is recorded as one
    done = cli.run("--pause", "basic-job", "--until", "30m", "--reason", "shorter", "--replace")
    assert done.returncode == 0, done.stderr
    replaced = crontab.state("basic-job")
    assert replaced.paused_reason == "shorter" and replaced.paused_until < first.paused_until
    # a pause that has run out is no pause: a new one needs no --replace
    crontab.sql("UPDATE crontabber SET paused_until = clock_timestamp() - interval '1 minute'")
    assert cli.run("--pause", "basic-job", "--reason", "again").returncode == 0


def test_a_pause_stops_rerun_unless_force(cli):
    crontab = cli.crontab
    days = backfilled(cli)
    calls = len(crontab.calls("foo-backfill"))
    assert cli.run("--pause", "foo-backfill", "--reason", "INC-2").returncode == 0
    day = f"{days[1]:%Y-%m-%d}"
    done = cli.run("--rerun", "foo-backfill", "--date", day, "--reason", "redo")
    assert done.returncode == 6 and "refusing to rerun it: paused until" in one_line(done)
    assert "INC-2; --force --reason TEXT reruns it anyway" in done.stderr
    assert len(crontab.calls("foo-backfill")) == calls
    done = cli.run("--rerun", "foo-backfill", "--date", day, "--reason", "redo", "--force")
    assert done.returncode == 0, done.stderr
    assert len(crontab.calls("foo-backfill")) == calls + 1
    assert crontab.state("foo-backfill").paused_reason == "INC-2"  # the pause stays


def test_job_exits_7_when_nothing_ran(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    assert cli.run("--job", "basic-job").returncode == 0
    done = cli.run("--job", "basic-job")
    assert done.returncode == 7 and "basic-job: skipped (not due yet)" in done.stdout
    assert len(crontab.calls("basic-job")) == 1
    assert cli.run("--job", "basic-job", "--force").returncode == 0


def test_a_closed_pipe_ends_quietly(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    for i in range(400):  # more than a pipe's buffer of audit lines
        crontab.sql(
            "INSERT INTO crontabber_audit (actor, action, app_name, reason, detail)"
            " VALUES ('me', 'pause', 'basic-job', %s, '{}')",
            (f"reason {i} " * 8,),
        )
    shell = " ".join(cli.argv("--audit", "--limit", "400")) + " | head -1"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell],
        env=cli.env,
        cwd=cli_cwd(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.count("\n") == 1
    assert done.stderr == "", done.stderr
    assert done.returncode in (0, 141)  # head may exit before or after the runner writes


def cli_cwd():
    return REPO


def test_configtest_shows_each_setting_where_it_came_from_and_the_database(cli):
    """The environment silently overrode the INI's database and a scratch job landed in the
    main database (issue #23 section 3): --configtest names the database and each source."""
    cli.crontab.configure(["BasicJob|1d"], extra="    lease_seconds=99\n")
    done = cli.run("--configtest", "--crontabber.kill_grace_seconds=7")
    assert done.returncode == 0, done.stderr
    db = cli.crontab.database
    lines = done.stdout.splitlines()
    assert lines[0] == f"database: {db.user}@{db.host}:{db.port}/{db.dbname} (password set)"
    assert lines[1] == f"version: {version()}"  # git's, in a checkout (crontabber.version)
    assert f"  crontabber.lease_seconds = 99.0  [INI file {cli.crontab.ini}]" in lines
    assert (
        "  crontabber.kill_grace_seconds = 7.0  [command line (--crontabber.kill_grace_seconds)]"
        in lines
    )
    assert f"  crontabber.dbname = '{db.dbname}'  [environment RESOURCE_POSTGRESQL_DBNAME]" in lines
    assert "  crontabber.password = ********  [environment RESOURCE_POSTGRESQL_PASSWORD]" in lines
    assert "  crontabber.error_backoff = 1.0  [default]" in lines
    assert "  alerts.smtp_password = (not set)  [default]" in lines  # a secret with no value
    assert not any(
        "password" in line
        and "********" not in line
        and "(password set)" not in line
        and "(not set)" not in line
        for line in lines
    )  # (the test database's password is its user's name)
    assert lines[-1] == "configtest OK: 1 jobs"


def test_explain_of_a_failing_job_names_the_jobs_it_blocks(cli):
    cli.crontab.configure(["TroubleJob|1d", "SadJob|1d", "BasicJob|1d"])
    assert cli.run().returncode == 0  # trouble fails; sad is skipped
    done = cli.run("--explain", "trouble")
    assert "  blocks sad: it would be skipped ('trouble' errored last time it ran)" in done.stdout
    db = cli.crontab.database
    assert f"  database: {db.user}@{db.host}:{db.port}/{db.dbname}" in done.stdout
    facts = json.loads(cli.run("--explain", "trouble", "--json").stdout)
    assert facts["blocks"] == {"sad": "'trouble' errored last time it ran"}
    assert cli.run("--explain", "basic-job").stdout.count("blocks") == 0


def test_the_audit_records_each_actions_outcome_reason_and_overrides(cli):
    """A refused --job --force was recorded as if done (issue #23 section 3)."""
    slow_job(cli, 30)
    holder = cli.spawn()  # holds slow-job with a live lease
    try:
        wait_for(lambda: cli.crontab.calls("slow-job"))
        refused = cli.run("--job", "slow-job", "--force", "--reason", "try again")
        assert refused.returncode == 3, refused.stderr
        assert cli.run("--pause", "slow-job", "--reason", "first").returncode == 0
        assert cli.run("--pause", "slow-job", "--reason", "second").returncode == 6
        assert cli.run("--pause", "slow-job", "--reason", "third", "--replace").returncode == 0
    finally:
        holder.kill()
        holder.communicate(timeout=20)
    entries = json.loads(cli.run("--audit", "--json").stdout)
    seen = [
        (e["action"], e["reason"], e["detail"]["outcome"], e["detail"].get("overrides"))
        for e in reversed(entries)
    ]
    assert seen == [
        ("force", "try again", "started", ["--force"]),  # audited from its start (issue #42 item 8)
        ("force", "try again", "refused (exit 3)", ["--force"]),
        ("pause", "first", "done", None),
        ("pause", "second", "refused (exit 6)", None),
        ("pause", "third", "done", ["--replace"]),
    ]


@pytest.mark.parametrize(
    "action",
    [
        "--reset-job basic-job",
        "--release basic-job",
        "--mark-success basic-job",
        "--pause basic-job",
        "--rerun foo-backfill --date 2026-11-01",
    ],
)
def test_a_destructive_action_needs_a_reason_unless_configured(cli, action):
    """--reason is required by rerun, mark-success, release, reset and pause (issue #23
    section 3); require_reason = False makes it optional, except for --pause."""
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d", "FooBackfillJob|1d"])
    assert cli.run().returncode == 0
    before = crontab.sql("SELECT * FROM crontabber ORDER BY app_name")
    done = cli.run(*action.split())
    option = action.split()[0]
    assert done.returncode == 1 and f"{option}: needs --reason TEXT" in one_line(done), done.stderr
    assert crontab.sql("SELECT * FROM crontabber ORDER BY app_name") == before  # nothing changed
    optional = cli.run(*action.split(), "--crontabber.require_reason=False")
    if option == "--pause":
        assert optional.returncode == 1 and "needs --reason" in one_line(optional)
    else:
        assert optional.returncode == 0, optional.stderr
        audited = json.loads(cli.run("--audit", "--json").stdout)  # a release of nothing is not
        assert option == "--release" or audited[0]["reason"] is None
    assert cli.run(*action.split(), "--reason", "INC-7").returncode == 0


def test_a_rerun_dry_run_needs_no_reason(cli):
    days = backfilled(cli)
    done = cli.run("--rerun", "foo-backfill", "--date", f"{days[0]:%Y-%m-%d}", "--dry-run")
    assert done.returncode == 0 and "nothing ran" in done.stdout
