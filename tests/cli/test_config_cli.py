"""Strict configuration through the real entry point: each INI mistake an
operator makes is one line on stderr and exit 1 before anything runs, and
``--configtest`` catches it too."""

import subprocess
import sys

import pytest

from tests.helpers import REPO

RUNLOG = "jobs.runlog.PruneRunLogCronApp"
PRUNE = "jobs.prune.PruneS3CronApp"

# name: (jobs list, text after it, what the one line must say)
MISTAKES = {
    # line 7 of the file the crontab fixture writes
    "syntax error": (
        [f"{RUNLOG}|1d"],
        "    [[class-PruneRunLogCronApp]]\n        keep_days 90\n",
        ["crontabber.ini line 7:", "keep_days 90"],
    ),
    "misspelled option": (
        [f"{RUNLOG}|1d"],
        "    [[class-PruneRunLogCronApp]]\n        keep_dayz=90\n",
        [
            "no such option crontabber.class-PruneRunLogCronApp.keep_dayz",
            "did you mean crontabber.class-PruneRunLogCronApp.keep_days?",
        ],
    ),
    "misspelled section": (
        [f"{PRUNE}|1d"],
        "    [[class-PruneS3CronAp]]\n        upload_days=7\n",
        [
            "no configured job has the section [[class-PruneS3CronAp]]",
            "did you mean [[class-PruneS3CronApp]]?",
        ],
    ),
    "frequency 0m": ([f"{RUNLOG}|0m"], "", ["bad frequency '0m': it must be at least 1m"]),
    "frequency override 0m": (
        [f"{RUNLOG}|1d"],
        "    [[class-PruneRunLogCronApp]]\n        frequency=0m\n",
        ["bad frequency '0m'"],
    ),
}


def assert_one_line(done, *texts):
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    # the configuration's errors say so; an argument's name the argument (issue #32 item 15)
    assert len(lines) == 1 and lines[0].startswith(
        ("crontabber: configuration error in ", "crontabber: --", "crontabber: the command line: ")
    ), lines
    for text in texts:
        assert text in lines[0]


@pytest.mark.parametrize("mistake", MISTAKES)
def test_an_ini_mistake_stops_the_tick_and_configtest(cli, mistake):
    jobs, extra, texts = MISTAKES[mistake]
    cli.crontab.configure(jobs, extra=extra)
    # Were the job to run anyway, it must not touch the shared S3.
    cli.env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:1"
    assert_one_line(cli.run(), *texts)
    assert cli.crontab.sql("SELECT app_name FROM crontabber") == []
    assert_one_line(cli.run("--configtest"), *texts)


def test_force_without_job_is_refused(cli):
    cli.crontab.configure(["BasicJob|1d"])
    assert_one_line(cli.run("--force"), "--force: only means something with --job NAME")
    assert cli.crontab.calls() == [] and cli.crontab.state("basic-job") is None
    assert_one_line(cli.run("--configtest", "--force"), "--force")
    assert cli.run("--job", "basic-job", "--force").returncode == 0


def test_no_configuration_file_is_an_error_not_an_empty_run(cli, tmp_path):
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    argv = [sys.executable, "-m", "crontabber"]
    for extra in ([], ["--configtest"]):
        done = subprocess.run(
            [*argv, *extra], env=cli.env, cwd=empty, capture_output=True, text=True, timeout=60
        )
        assert_one_line(done, "no configuration file", str(empty))
    done = subprocess.run(
        [*argv, "--nagios"], env=cli.env, cwd=empty, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout.startswith("CRITICAL - ")
    assert "no configuration file" in done.stdout


def test_the_repository_ini_passes_configtest_without_notes(cli):
    cli.crontab.ini.write_text((REPO / "crontabber.ini").read_text())
    done = cli.run("--configtest")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()  # the database and the settings, then no note
    assert lines[0].startswith("database: ") and lines[-1] == "configtest OK: 8 jobs"
    assert not [line for line in lines if line.startswith("note:")]


CRONTABBER_0_18_INI = """\
application=crontabber.app.CronTabber
[crontabber]
    job_state_db_class=crontabber.app.JobStateDatabase
    jobs='''
    tests.fixtures.sample_jobs.FooJob|1d
    # tests.fixtures.sample_jobs.BarJob|1d
    '''
    [[class-FooJob]]
        greeting=hi
        [[[database]]]
            database_class=crontabber.connection_factory.ConnectionFactory
    [[class-BarJob]]
        whatever=kept for later
[resource.postgresql]
    transaction_executor_class=crontabber.transaction_executor.TransactionExecutor
[secrets]
    [[sentry]]
        dsn=
[logging]
    stderr_error_logging_level=10
"""


def test_a_crontabber_0_18_ini_loads_and_configtest_lists_what_is_ignored(cli):
    cli.crontab.ini.write_text(CRONTABBER_0_18_INI)
    cli.env["CRONTABBER_ERROR_RETRY_TME"] = "5"
    done = cli.run("--configtest")
    assert done.returncode == 0, done.stderr
    assert [
        line
        for line in done.stdout.splitlines()
        if not line.startswith(("version: ", "database: ", "settings ", "  "))
    ] == [
        "note: application: a crontabber 0.18 option, ignored here",
        "note: crontabber.job_state_db_class: a crontabber 0.18 option, ignored here",
        "note: crontabber.class-FooJob.database.database_class: a crontabber 0.18 option, ignored "
        "here",
        "note: resource.postgresql.transaction_executor_class: a crontabber 0.18 option, ignored "
        "here",
        "note: logging.stderr_error_logging_level: a crontabber 0.18 option, ignored here",
        "note: environment variable CRONTABBER_ERROR_RETRY_TME matches no option"
        " (did you mean CRONTABBER_ERROR_RETRY_TIME?)",
        "configtest OK: 1 jobs",
    ]
    # Uncommenting BarJob makes its section checked: `whatever` is no option of it.
    cli.crontab.ini.write_text(CRONTABBER_0_18_INI.replace("# tests", "tests"))
    assert_one_line(cli.run("--configtest"), "no such option crontabber.class-BarJob.whatever")


def test_a_misspelled_command_line_option_suggests_the_name(cli):
    cli.crontab.configure(["FooJob|1d"])
    done = cli.run("--crontabber.class-FooJob.greting=hi", "--configtest")
    assert_one_line(
        done,
        "--crontabber.class-FooJob.greting: no such option; did you mean "
        "--crontabber.class-FooJob.greeting?",
    )


def test_audit_ghosts_says_when_there_are_none(cli):
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run("--audit-ghosts")
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["No ghosts: every job in the state database is configured."]


def test_configtest_lists_the_database_once_and_says_what_the_environment_overrode(cli):
    """Trial #16: ``crontabber.dbname`` and ``resource.postgresql.dbname`` were listed apart
    (and again under each job), and nothing said that RESOURCE_POSTGRESQL_DBNAME overrode the
    INI file's ``dbname=oncall_scratch``; --list-jobs and --history did not say which database
    they read."""
    crontab = cli.crontab
    crontab.configure(
        ["BasicJob|1d"],
        extra=(
            "[resource]\n    [[postgresql]]\n        dbname=oncall_scratch\n        "
            "password=not-this-one\n"
        ),
    )
    done = cli.run("--configtest")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    dbname = [line for line in lines if line.split(" = ")[0].endswith(".dbname")]
    assert dbname == [
        f"  crontabber.dbname = {crontab.database.dbname!r}  [environment "
        "RESOURCE_POSTGRESQL_DBNAME, over 'oncall_scratch' in the INI file]"
    ], lines
    (password,) = [line for line in lines if line.split(" = ")[0].endswith(".password")]
    assert (
        password.endswith(
            "[environment RESOURCE_POSTGRESQL_PASSWORD, over a value in the INI file]"
        )
        and "not-this-one" not in done.stdout
    )
    assert not [line for line in lines if "resource.postgresql." in line]
    target = f"database: {crontab.database.target}"
    assert cli.run().returncode == 0
    for command in (("--list-jobs",), ("--history", "basic-job")):
        shown = cli.run(*command)
        assert shown.returncode == 0 and shown.stdout.splitlines()[-1] == target, shown.stdout


# option = value: (what the one line must say); every job is prune-s3 (PruneS3CronApp)
CHECK_MISTAKES = {
    "check = keys_deleted <> 5": [
        "PruneS3CronApp.check: prune-s3: 'keys_deleted <> 5' is not METRIC OP"
    ],
    "check = keys_deleted < 5 x median(10); keys_deletd > 0": [
        "PruneS3CronApp.check: prune-s3: 'keys_deletd > 0': the job returns no metric keys_deletd",
        "(it returns keys_deleted, bytes_freed, delete_errors, capped); did you mean keys_deleted?",
    ],
    "check = keys_deleted < 2 x median(0)": [
        "PruneS3CronApp.check: prune-s3: ",
        "median(N) needs N of at least 1",
    ],
    "slower_than = 3 x p50(20)": [
        "PruneS3CronApp.slower_than: prune-s3: '3 x p50(20)' is not K x p95(N)"
    ],
    "on_breach = page": ["PruneS3CronApp.on_breach: prune-s3: 'page' is not alert or pause"],
    "min_duration = soon": ["PruneS3CronApp.min_duration", "soon"],
}


@pytest.mark.parametrize("mistake", CHECK_MISTAKES)
def test_configtest_refuses_a_bad_check_naming_the_job_and_the_option(cli, mistake):
    cli.crontab.configure(
        [f"{PRUNE}|1d"], extra=f"    [[class-PruneS3CronApp]]\n        {mistake}\n"
    )
    assert_one_line(
        cli.run("--configtest"),
        "configuration error in crontabber.class-",
        *CHECK_MISTAKES[mistake],
    )


def test_configtest_passes_good_checks_and_any_metric_of_an_undeclared_job(cli):
    good = (
        "check = keys_deleted < 5 x median(10); bytes_freed <= 1000000000\n        on_breach = "
        "pause"
    )
    cli.crontab.configure(
        [f"{PRUNE}|1d", "MeasuringJob|1d"],
        extra=f"    [[class-PruneS3CronApp]]\n        {good}\n"
        "    [[class-MeasuringJob]]\n        check = whatever_it_returns < 3 x p95(5)\n",
    )
    done = cli.run("--configtest")
    assert done.returncode == 0 and "configtest OK: 2 jobs" in done.stdout, done.stderr
