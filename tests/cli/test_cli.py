"""The real entry point as a subprocess: exit codes, messages, signals, kills."""

import datetime as dt
import signal
import subprocess
import sys
import time

from tests.fixtures.waiting import wait_for
from tests.helpers import REPO

DAY = dt.timedelta(days=1)


def test_version_and_help(cli):
    done = cli.run("--version")
    assert done.returncode == 0 and done.stdout.strip() and done.stderr == ""
    cli.crontab.configure(["FooJob|1d"])
    done = cli.run("--help")
    assert done.returncode == 0
    for text in (
        "--crontabber.error_retry_time (default 300)",
        "--list-jobs",
        "--nagios",
        "--crontabber.class-FooJob.greeting (default 'hello')",
        "--reset-job",
        "--crontabber.max_ongoing_age_hours (default 12.0)",
        "exit codes",
    ):
        assert text in done.stdout


def test_configuration_errors_exit_1_with_the_entry_and_run_nothing(cli):
    cli.crontab.configure(["BasicJob|1d", "FooJob|1d", "DuplicateFoo|1d"])
    done = cli.run()
    assert done.returncode == 1
    assert "jobs entry 'tests.fixtures.sample_jobs.DuplicateFoo|1d'" in done.stderr
    assert "Traceback" not in done.stderr
    assert cli.crontab.calls() == []
    # an entry whose class does not load stops only itself (tests/cli/test_broken_entry.py)
    cli.crontab.configure(["BasicJob|1d", "Nope|1d"])
    done = cli.run()
    assert done.returncode == 1
    assert "jobs entry 'tests.fixtures.sample_jobs.Nope|1d'" in done.stderr
    assert "Traceback" not in done.stderr
    assert [call["app_name"] for call in cli.crontab.calls()] == ["basic-job"]
    done = cli.run("--configtest")
    assert done.returncode == 1 and "Nope" in done.stderr


def test_unknown_option_and_missing_file(cli):
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run("--crontabber.error_retry_tim=5")
    assert done.returncode == 1 and "--crontabber.error_retry_tim: no such option" in done.stderr
    done = cli.run("--admin.conf=/nonexistent.ini")
    assert done.returncode == 1 and "no such file: /nonexistent.ini" in done.stderr


def test_configtest_needs_no_database(cli):
    cli.crontab.configure(["BasicJob|1d"])
    cli.env["RESOURCE_POSTGRESQL_PORT"] = "1"
    done = cli.run("--configtest")
    assert done.returncode == 0 and "configtest OK: 1 jobs" in done.stdout


def test_password_is_never_printed(cli):
    cli.crontab.configure(["BasicJob|1d"])
    cli.env["RESOURCE_POSTGRESQL_PASSWORD"] = "hunter2-wrong"
    done = cli.run("--logging.level=DEBUG")
    assert done.returncode == 1 and "cannot use the state database" in done.stderr
    assert "hunter2" not in done.stdout + done.stderr
    help_text = cli.run("--help").stdout
    assert "hunter2" not in help_text


def _signal_mid_job(cli, signum):
    cli.crontab.configure(["SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=30\n")
    proc = cli.spawn()
    wait_for(lambda: cli.crontab.calls("slow-job"))
    proc.send_signal(signum)
    proc.communicate(timeout=20)
    return proc.returncode


def test_sigterm_releases_the_lock_and_records_the_stop_not_a_failure(cli):
    assert _signal_mid_job(cli, signal.SIGTERM) == 143
    state = cli.crontab.state("slow-job")
    assert state.ongoing is None and state.ongoing_by is None
    assert state.error_count == 0 and state.last_error == {}  # a deploy is not the job's fault
    (logged,) = cli.crontab.log("slow-job")
    assert "Terminated" in logged["exc_type"]


def test_sigint_releases_the_lock(cli):
    assert _signal_mid_job(cli, signal.SIGINT) == 130
    state = cli.crontab.state("slow-job")
    assert state.ongoing is None and "KeyboardInterrupt" in state.last_error["type"]


def test_locked_job_message_says_who_holds_it_since_when(cli):
    cli.crontab.configure(["SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=30\n")
    holder = cli.spawn("--job", "slow-job")
    try:
        wait_for(lambda: cli.crontab.calls("slow-job"))
        done = cli.run("--job", "slow-job", "--force")
        assert done.returncode == 3
        message = done.stderr.strip().splitlines()[-1]
        assert message.startswith("crontabber: slow-job: already running since ")
        assert f":{holder.pid}" in message and "Traceback" not in done.stderr
        assert cli.run().returncode == 0  # a tick: another runner holds it, no failure
    finally:
        holder.terminate()
        holder.communicate(timeout=20)


def test_killed_backfill_does_not_redo_finished_intervals(cli):
    crontab = cli.crontab
    crontab.configure(["FooBackfillJob|1d"])
    assert cli.run().returncode == 0
    crontab.wind(5 * DAY)
    crontab.configure(
        ["FooBackfillJob|1d"], extra="    [[class-FooBackfillJob]]\n        sleep=2\n"
    )
    proc = cli.spawn()
    # calls are recorded as each interval starts: 3 calls = interval 1 done, 2 running
    wait_for(lambda: len(crontab.calls("foo-backfill")) >= 3)
    proc.kill()
    proc.communicate(timeout=20)
    done_days = [c["day"] for c in crontab.calls("foo-backfill")][1:]
    assert crontab.state("foo-backfill").last_success == done_days[-2]
    crontab.configure(["FooBackfillJob|1d"])
    # the dead runner was a process of this host: its marker is taken over at once
    assert cli.run().returncode == 0
    days = [c["day"] for c in crontab.calls("foo-backfill")][1:]
    # only the interval killed mid-way runs again; then the rest, oldest first
    assert days[:2] == done_days and days[2] == done_days[1]
    assert len(days) == 6 and days[2:] == sorted(set(days))[1:]
    assert crontab.state("foo-backfill").ongoing is None


HEAVY = ("boto3", "botocore", "elasticsearch", "sentry_sdk", "msgpack", "isal", "urllib3")


# Every module an idle tick imports beyond `python -c "import psycopg2"` (issue #36: an idle
# tick at most 2x that). A new one fails the test below: import it where it is used, not on
# the tick's path, or add it here knowing it costs every host's every tick.
TICK_IMPORTS = (
    "__future__",
    "_string",
    "_weakrefset",
    "atexit",
    "crontabber",
    "crontabber.alerts",
    "crontabber.alerts.sweep",
    "crontabber.base",
    "crontabber.cli",
    "crontabber.cli.common",
    "crontabber.cli.dispatch",
    "crontabber.cli.run",
    "crontabber.command",
    "crontabber.config",
    "crontabber.config.catalog",
    "crontabber.config.database",
    "crontabber.config.inicache",
    "crontabber.config.targets",
    "crontabber.config.inifile",
    "crontabber.config.names",
    "crontabber.config.options",
    "crontabber.config.settings",
    "crontabber.connection",  # the state store's connection (issue #41: store.py split), 330 lines
    "crontabber.errors",
    "crontabber.failures",
    "crontabber.formats",
    "crontabber.frozen",
    "crontabber.identity",  # the host's name in the fleet (CRONTABBER_HOST_NAME), 50 lines
    "crontabber.leases",
    "crontabber.mixins",
    "crontabber.overrides",
    "crontabber.placement",
    "crontabber.redaction",
    "crontabber.results",
    "crontabber.runs",  # a run's claim and end in the state store (issue #41), 480 lines
    "crontabber.runner",
    "crontabber.schedule",
    "crontabber.scheduling",
    "crontabber.schema",
    "crontabber.sidebyside",
    "crontabber.sqlfiles",
    "crontabber.state",
    "crontabber.store",
    "crontabber.tick",
    "crontabber.version",
    "gc",
    "graphlib",
    "jobs",
    "jobs.defaults",
    "jobs.missing_symbols",
    "jobs.missing_symbols.apps",
    "jobs.prune",
    "jobs.runlog",
    "jobs.search_index",
    "jobs.uploads",
    "jobs.uploads.app",
    "jobs.uploads.options",
    "linecache",
    "logging",
    "signal",
    "string",
    "textwrap",
    "threading",
    "token",
    "tokenize",
    "traceback",
    "weakref",
)


PROBE = """
import json, runpy, sys
sys.argv = ["crontabber", *sys.argv[1:]]
try:
    runpy.run_module("crontabber", run_name="__main__")
except SystemExit as exc:
    print(json.dumps({"code": exc.code, "modules": sorted(sys.modules)}))
"""


def test_an_idle_tick_imports_no_heavy_library(cli):
    """With the repository's real crontabber.ini and nothing due, a tick must not
    import the libraries of jobs that do not run (boto3, elasticsearch...)."""
    import json

    from crontabber.config.catalog import load_jobs
    from crontabber.config.settings import load_settings

    cli.crontab.ini.write_text((REPO / "crontabber.ini").read_text())
    # Every job has just run (without running them: they would touch the shared S3 and ES).
    for job in load_jobs(load_settings(str(cli.crontab.ini), {}, {})):
        cli.crontab.sql(
            "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success,"
            " error_count, depends_on, last_error) VALUES (%s, now() + interval '1 day',"
            " now(), now(), now(), 0, '{}', '{}')",
            (job.app_name,),
        )
    argv = [sys.executable, "-c", PROBE, f"--admin.conf={cli.crontab.ini}"]
    # the tick cron runs every few minutes: the INI file's parse kept (crontabber.config.inicache;
    # load_settings above kept it) is read back, no configobj (tests/unit/test_inicache.py)
    # with an alert target, as a fleet that alerts runs (and as python -m bench tick measures)
    env = {**cli.env, "ALERTS_TARGETS": "ops webhook http://127.0.0.1:9/unused"}
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0, done.stderr
    imported = set(result["modules"])
    assert {"crontabber.runner", "jobs.runlog", "jobs.uploads", "jobs.prune"} <= imported
    assert sorted(name for name in imported if name.split(".")[0] in HEAVY) == []
    baseline = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, runpy, sys, psycopg2; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(imported - set(json.loads(baseline.stdout))) == sorted(TICK_IMPORTS)


def test_processes_a_job_forks_get_the_default_sigterm(cli, tmp_path):
    """The runner's SIGTERM handler raises Terminated; a job's forked workers must
    not inherit it (they would print tracebacks or survive a pool shutdown)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, signal, sys\n"
        "from crontabber.cli.common import terminate_on_sigterm\n"
        "with terminate_on_sigterm():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else 1)\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "    sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    done = subprocess.run([sys.executable, str(probe)], env=cli.env, cwd=REPO, timeout=30)
    assert done.returncode == 0


# What an idle tick must not import: each is a few ms of every cron run on every
# host (bench tick's goal), loaded only by the commands that need them.
NOT_ON_THE_TICK = (
    "crontabber.records",
    "crontabber.cli.operate",
    "crontabber.operator_actions",
    "crontabber.reruns",
    "crontabber.audit_store",
    "crontabber.nagios",
    "crontabber.metrics",
    "crontabber.sentry",
    "pathlib",
    "shutil",
    "difflib",
    "urllib.parse",
    "everett.manager",
    "argparse",
    "gettext",
    "locale",
    "dataclasses",
    "inspect",
    # the version: a tick records the build's (crontabber.version.built), never asks
    # importlib.metadata or git (--version, --configtest and the dashboard do)
    "importlib.metadata",
)


def test_an_idle_tick_imports_none_of_the_operator_modules(cli, tmp_path):
    cli.crontab.configure(["BasicJob|1d"])
    assert cli.run().returncode == 0  # runs BasicJob: the next tick has nothing due
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['crontabber', '--admin.conf={cli.crontab.ini}']\n"
        "try:\n    runpy.run_module('crontabber', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"print(' '.join(m for m in {NOT_ON_THE_TICK!r} if m in sys.modules))\n"
    )
    # a git first on the PATH that leaves a mark: the tick must not run it
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "git").write_text(f"#!/bin/sh\ntouch {tmp_path / 'git-ran'}\nexit 1\n")
    (tmp_path / "bin" / "git").chmod(0o755)
    env = {**cli.env, "PATH": f"{tmp_path / 'bin'}:{cli.env['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "1 skipped" in done.stderr
    assert done.stdout.split() == []
    assert not (tmp_path / "git-ran").exists()
    version = subprocess.run(
        [sys.executable, "-m", "crontabber", "--version"], env=env, cwd=REPO, timeout=60
    )
    assert version.returncode == 0 and (tmp_path / "git-ran").exists()  # the mark works
