"""Run-ledger details (issue #32, item 15; on-call trial 4, #14): ``--logs`` never calls a run
"running" when its process is dead (``--list-jobs`` says ``orphaned``); an abandoned run's
duration is said one way, up to its last heartbeat. The real entry point
as a subprocess, the real PostgreSQL, kill -9."""

from __future__ import annotations

import datetime as dt
import json

from crontabber.formats import took
from tests.fixtures.runs import chatty, killed_run, ledger, slow_job
from tests.fixtures.waiting import wait_for


def took_text(seconds: float) -> str:
    return took(dt.timedelta(seconds=seconds))


def test_logs_of_a_run_whose_process_is_dead_does_not_say_running(cli):
    slow_job(cli, 30)
    holder = cli.spawn()
    wait_for(lambda: cli.crontab.calls("slow-job"))
    run_id = cli.crontab.state("slow-job").run_id
    live = cli.run("--logs", "slow-job")
    assert live.returncode == 0, live.stderr
    assert live.stdout.splitlines()[0].endswith(": running"), live.stdout
    holder.kill()
    holder.communicate(timeout=20)
    done = cli.run("--logs", "slow-job")  # before any tick takes it over
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    assert header.startswith(f"slow-job run {run_id} ") and ": running" not in header, header
    assert header.endswith(
        ": not running: its process no longer exists; a tick takes the job over (--release "
        "slow-job clears it now)"
    ), header
    assert "orphaned" in cli.run("--list-jobs", "slow-job").stdout


def test_an_abandoned_runs_duration_is_said_one_way(cli):
    """--history and --show-error agree: up to the last heartbeat, "at least" (when the
    process died is not known), not until the takeover in one and the heartbeat in the other."""
    run_id, _ = killed_run(cli)
    assert cli.run().returncode == 0  # the takeover
    (run,) = [
        r
        for r in json.loads(cli.run("--history", "slow-job", "--json").stdout)["runs"]
        if r["run_id"] == run_id
    ]
    (row,) = cli.crontab.sql(
        "SELECT extract(epoch FROM duration) AS seconds FROM crontabber_log WHERE run_id = %s",
        (run_id,),
    )
    assert run["duration"] == float(row["seconds"]), (run, row)
    shown = cli.run("--show-error", "slow-job").stdout
    took = took_text(run["duration"])
    assert f" after at least {took} (to its last heartbeat)" in shown, shown
    table = cli.run("--history", "slow-job").stdout
    (line,) = [line for line in table.splitlines() if f" {run_id} " in line and "abandoned" in line]
    assert f" {took}+ " in line, table


def test_a_run_killed_in_its_first_seconds_keeps_what_it_printed(cli):
    """The output is saved a second after it is printed, not only with the next heartbeat
    (30 s): a runner killed with -9 three seconds in leaves its lines for --logs."""
    chatty(cli, sleep=60)
    holder = cli.spawn()  # the default heartbeat: 30 s
    wait_for(lambda: cli.crontab.calls("chatty"))
    run_id = cli.crontab.state("chatty").run_id
    wait_for(lambda: "chatty: sleeping" in ledger(cli)[0]["output"], timeout=8)
    holder.kill()
    holder.communicate(timeout=20)
    chatty(cli, sleep=0)
    assert cli.run("--release", "chatty", "--reason", "test").returncode == 0
    logs = cli.run("--logs", "chatty", "--run", str(run_id))
    assert logs.returncode == 0, logs.stderr
    assert ": abandoned" in logs.stdout.splitlines()[0], logs.stdout
    for said in ("chatty stdout line 2", "chatty child stderr", "chatty: sleeping"):
        assert said in logs.stdout, logs.stdout
    assert "nothing logged or printed was kept" not in logs.stdout
