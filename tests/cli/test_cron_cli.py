"""``--next`` and ``--configtest`` with cron expressions and time zones, through the real
entry point: every malformed case is one line and exit 1; ``--next --schedule`` needs no
configuration and no database."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO


def assert_one_line(done, *texts):
    """Exit 1 and one line on stderr naming the argument or the configuration, holding each
    of ``texts`` (as tests/cli/test_config_cli.py checks the INI mistakes)."""
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    prefixes = ("crontabber: configuration error in ", "crontabber: --")
    assert len(lines) == 1 and lines[0].startswith(prefixes), lines
    for text in texts:
        assert text in lines[0]


def bare(tmp_path, *args):
    """``python -m crontabber ARGS`` in an empty directory (no crontabber.ini) with no
    database settings in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESOURCE_", "CRONTABBER_"))}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "crontabber", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_next_prints_fire_times_with_their_offset_without_configuration(tmp_path):
    # 02:30 in Berlin around the spring-forward of 2026-03-29: 02:30 CET, then 03:00 CEST
    # (02:30 does not exist that day), then 02:30 CEST
    done = bare(
        tmp_path,
        "--next",
        "3",
        "--schedule",
        "30 2 * * *",
        "--time-zone",
        "Europe/Berlin",
        "--after",
        "2026-03-28",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "2026-03-28T02:30:00+01:00  (2026-03-28T01:30:00Z)",
        "2026-03-29T03:00:00+02:00  (2026-03-29T01:00:00Z)",
        "2026-03-30T02:30:00+02:00  (2026-03-30T00:30:00Z)",
    ]
    weekly = ["--next", "2", "--schedule", "@weekly", "--after", "2026-11-28T12:00Z", "--json"]
    done = bare(tmp_path, *weekly)
    assert json.loads(done.stdout) == ["2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"]
    # crontabber's form too, as in the jobs list
    done = bare(tmp_path, "--next", "1", "--schedule", "1d|05:00", "--after", "2026-11-28T06:00Z")
    assert done.stdout.splitlines() == ["2026-11-29T05:00:00+00:00"]


@pytest.mark.parametrize(
    "args,text",
    [
        (["--schedule", "61 * * * *"], "--schedule: bad minute field '61'"),
        (["--schedule", "0 0 30 2 *"], "never fires"),
        (["--schedule", "0 0 * * 8"], "bad day-of-week field '8'"),
        (["--schedule", "0 0 * *"], "expected 5 fields"),
        (["--schedule", "@reboot"], "unknown macro '@reboot'"),
        (["--schedule", "5x"], "bad frequency '5x'"),
        (
            ["--schedule", "0 3 * * *", "--time-zone", "Europe/Berln"],
            "--time-zone: unknown time zone 'Europe/Berln'",
        ),
        (
            ["--schedule", "0 3 * * *", "--after", "yesterday"],
            "--after: 'yesterday' is not an ISO 8601 time",
        ),
        ([], "--next: needs --schedule EXPR or --job NAME"),
    ],
)
def test_next_refuses_each_malformed_case_in_one_line(tmp_path, args, text):
    assert_one_line(bare(tmp_path, "--next", "3", *args), text)


def test_next_refuses_a_bad_count_and_stray_details(tmp_path):
    assert_one_line(bare(tmp_path, "--next", "0", "--schedule", "@daily"), "--next: N must be")
    assert_one_line(bare(tmp_path, "--next", "many", "--schedule", "@daily"), "--next: N must be")
    stray = bare(tmp_path, "--schedule", "@daily")
    assert_one_line(stray, "--schedule: only means something with --next N")


# name: (jobs entry, [[class-BasicJob]] lines, what the one line must say)
MISTAKES = {
    "bad field": ("BasicJob|0 25 * * *", "", "bad hour field '25'"),
    "never fires": ("BasicJob|0 0 31 2 *", "", "never fires"),
    "cron and a time": ("BasicJob|0 3 * * *|05:00", "", "takes no time of day"),
    "bad job zone": (
        "BasicJob|0 3 * * *",
        "time_zone = Mars/Olympus",
        "unknown time zone 'Mars/Olympus'",
    ),
    "bad override": ("BasicJob|1d", "frequency = 0 3 * * 9", "bad day-of-week field '9'"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_configtest_refuses_a_bad_expression_or_zone_in_one_line(cli, mistake):
    entry, option, text = MISTAKES[mistake]
    section = f"    [[class-BasicJob]]\n        {option}\n" if option else ""
    cli.crontab.configure([entry], extra=section)
    assert_one_line(cli.run("--configtest"), text)
    assert_one_line(cli.run(), text)
    assert cli.crontab.calls() == []


def test_a_runner_default_zone_is_refused_when_unknown_and_used_when_known(cli):
    cli.crontab.configure(["BasicJob|30 2 * * *"], extra="    time_zone = Europe/Berln\n")
    unknown_zone = "unknown time zone 'Europe/Berln'"
    assert_one_line(cli.run("--configtest"), "crontabber.time_zone", unknown_zone)
    cli.crontab.configure(["BasicJob|30 2 * * *"], extra="    time_zone = America/New_York\n")
    done = cli.run("--configtest")
    assert done.returncode == 0, done.stderr
    # a job's schedule read in the runner's zone: 02:30 EST = 07:30Z
    done = cli.run("--next", "1", "--job", "basic-job", "--after", "2026-11-28T12:00Z", "--json")
    assert json.loads(done.stdout) == ["2026-11-29T07:30:00Z"], done.stderr
    unknown = cli.run("--next", "1", "--job", "nope")
    assert unknown.returncode != 0 and "no configured job is called 'nope'" in unknown.stderr
    zoned = cli.run("--next", "1", "--job", "basic-job", "--time-zone", "UTC")
    assert_one_line(zoned, "--time-zone")


def test_a_cron_expression_in_the_jobs_section_replaces_the_entrys_time(cli):
    override = "    [[class-BasicJob]]\n        frequency = 30 2 * * 1\n"
    cli.crontab.configure(["BasicJob|1d|05:00"], extra=override)
    assert cli.run("--configtest").returncode == 0
    done = cli.run("--next", "1", "--job", "basic-job", "--after", "2026-11-28T12:00Z", "--json")
    assert json.loads(done.stdout) == ["2026-11-30T02:30:00Z"], done.stderr  # Monday 02:30 UTC
    cli.crontab.configure(["BasicJob|1d|05:00"], extra=override + "        time = 06:00\n")
    assert_one_line(cli.run("--configtest"), "takes no time of day")
