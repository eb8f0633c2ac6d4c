"""A runner that serves, and the drill of issue #45 (items 2 and 4), through the real entry
point and the real PostgreSQL: a long job (scaled down from 10 minutes) and a short job that
falls due again and again while it runs, on a host whose ticks never overlap (one tick, as a
oneshot systemd timer starts it) and on a serving host (``--serve``): the short job runs each
time it falls due while the long one still runs (never held behind it). Then what a server
does with SIGTERM (claims nothing new, lets the runs end for up to kill_grace_seconds, then
stops them, recorded), with a change of its configuration (read again, or refused in one
line), and with its host record (live while it serves). Orders of events, never durations."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.fixtures.waiting import wait_for

FAST = (
    "--crontabber.tick_seconds=1",
    "--crontabber.heartbeat_seconds=0.5",
    "--crontabber.lease_seconds=5",
)
TIMES = 3  # the short job falls due this many times while the long one runs


def _jobs(cli, long_sleep: float, extra: str = "") -> None:
    cli.crontab.configure(
        ["SlowJob|1d", "BasicJob|1d"],
        extra=f"    [[class-SlowJob]]\n        sleep={long_sleep}\n{extra}",
    )


def _due(cli, *names: str) -> None:
    cli.crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, error_count, depends_on, last_error)"
        " SELECT n, clock_timestamp() - interval '1 second', 0, '{}', '{}' FROM unnest(%s::text[]) "
        "AS n"
        " ON CONFLICT (app_name) DO UPDATE SET next_run = EXCLUDED.next_run",
        (list(names),),
    )


def _not_due(cli, *names: str) -> None:
    cli.crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, error_count, depends_on, last_error)"
        " SELECT n, clock_timestamp() + interval '1 day', 0, '{}', '{}' FROM unnest(%s::text[]) AS "
        "n"
        " ON CONFLICT (app_name) DO UPDATE SET next_run = EXCLUDED.next_run",
        (list(names),),
    )


def _runs(cli, name: str) -> list[dict]:
    return cli.crontab.sql(
        "SELECT run_id, status, started, ended FROM crontabber_run WHERE app_name = %s ORDER BY "
        "run_id",
        (name,),
    )


def _drill(cli, runner: subprocess.Popen) -> None:
    """The long job runs; the short one falls due ``TIMES`` times, each time once its run
    before ended: each run starts while the long job still runs."""
    wait_for(lambda: cli.crontab.calls("slow-job"), timeout=60, what="the long job's start")
    for n in range(TIMES + 1):
        wait_for(
            lambda n=n: (
                len(_runs(cli, "basic-job")) == n + 1 and _runs(cli, "basic-job")[-1]["ended"]
            ),
            timeout=60,
        )
        if n < TIMES:
            _due(cli, "basic-job")
    (slow,) = _runs(cli, "slow-job")
    assert slow["ended"] is None, (
        "the long job ended before the short one's last run: the drill proves nothing"
    )
    basic = _runs(cli, "basic-job")
    assert [r["status"] for r in basic] == ["succeeded"] * (TIMES + 1)
    assert all(r["started"] > slow["started"] for r in basic[1:])  # each fell due while it ran
    assert runner.poll() is None


@pytest.mark.parametrize("mode", ["tick", "serve"])
def test_a_short_job_keeps_its_schedule_beside_a_long_one(cli, mode):
    """The drill: on a host whose ticks never overlap (one tick holds the long job) and on a
    serving host, the short job is never held behind the long one."""
    _jobs(cli, 600.0)
    _due(cli, "slow-job", "basic-job")
    args = ("--serve", *FAST) if mode == "serve" else FAST
    runner = cli.spawn(*args, "--crontabber.kill_grace_seconds=1")
    _drill(cli, runner)
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 143, err  # the long job had to be stopped
    (slow,) = _runs(cli, "slow-job")
    assert slow["status"] == "stopped by signal" and slow["ended"] is not None


def test_a_served_run_ends_by_itself_within_the_grace_and_nothing_new_starts(cli):
    _jobs(cli, 3.0)
    _due(cli, "slow-job")
    _not_due(cli, "basic-job")
    server = cli.spawn("--serve", *FAST, "--crontabber.kill_grace_seconds=60")
    wait_for(lambda: cli.crontab.calls("slow-job"), timeout=60, what="the long job's start")
    server.send_signal(signal.SIGTERM)
    _due(cli, "basic-job")  # due after the stop: never claimed
    out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert [r["status"] for r in _runs(cli, "slow-job")] == ["succeeded"]
    assert _runs(cli, "basic-job") == []
    assert "stopping: nothing new is claimed" in err and "stopped serving" in err


def test_a_server_reads_a_changed_configuration_or_refuses_it_in_one_line(cli):
    cli.crontab.configure(["BasicJob|1d"])
    _due(cli, "basic-job")
    server = cli.spawn("--serve", *FAST)
    wait_for(lambda: _runs(cli, "basic-job"), timeout=60, what="basic-job's run")
    ini = cli.crontab.ini
    good = ini.read_text()
    ini.write_text(good.replace("[crontabber]", "[crontabber\n", 1))  # does not parse
    host = cli.crontab.sql("SELECT last_tick FROM crontabber_host")[0]["last_tick"]
    wait_for(
        lambda: cli.crontab.sql("SELECT last_tick FROM crontabber_host")[0]["last_tick"] > host,
        timeout=60,
    )
    _due(cli, "basic-job")  # served on with the configuration in force
    wait_for(lambda: len(_runs(cli, "basic-job")) == 2, timeout=60, what="basic-job's second run")
    cli.crontab.configure(["BasicJob|1d", "FooJob|1d"])  # a new job: read at the next pass
    _due(cli, "foo")
    wait_for(lambda: _runs(cli, "foo"), timeout=60, what="foo, added while serving")
    server.send_signal(signal.SIGTERM)
    out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    refused = [line for line in err.splitlines() if "configuration change refused: " in line]
    assert len(refused) == 1 and "going on with the configuration in force" in refused[0], err
    assert "configuration read again: 2 jobs" in err
    ticks = cli.crontab.sql("SELECT count(*) AS n FROM crontabber_host")
    assert ticks[0]["n"] == 1  # one host, its record renewed by every pass (live)


def test_a_serving_host_is_live_and_one_that_died_reads_gone_within_its_lease(cli):
    cli.crontab.configure(["BasicJob|1d"])
    _not_due(cli, "basic-job")
    server = cli.spawn("--serve", *FAST)
    wait_for(lambda: cli.crontab.sql("SELECT serve_seconds FROM crontabber_host"), timeout=60)
    listed = cli.run("--list-jobs", *FAST).stdout
    assert " serving (a pass every 1 s), last tick " in listed, listed
    assert cli.run("--nagios", *FAST).returncode == 0
    server.kill()  # no goodbye: as a host lost
    server.communicate(timeout=30)

    def gone() -> str:
        done = cli.run("--nagios", *FAST)
        return done.stdout if done.returncode == 1 else ""

    shown = wait_for(gone, timeout=60, what="the server's silence past its tick and lease")
    assert (
        "serving (a pass every 1 s), but no tick since " in shown and "its runner is gone" in shown
    )
    assert " gone: silent (a pass every 1 s)" in cli.run("--list-jobs", *FAST).stdout
    assert cli.run(*FAST).returncode == 0  # a cron tick of the same host: no longer serving
    assert cli.crontab.sql("SELECT serve_seconds FROM crontabber_host")[0]["serve_seconds"] is None
