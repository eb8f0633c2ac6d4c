"""No operator action leaves a job never due (issue #23, section 2), through the real
entry point against the real PostgreSQL: a first run killed with kill -9 and released,
a job paused before its first tick and resumed, a reset; and a job that never ran while
its schedule says it should have is flagged by --nagios."""

import datetime as dt
import json

from tests.fixtures.runs import slow_job
from tests.fixtures.waiting import wait_for

LATE = ("--crontabber.overdue_warning_seconds=60", "--crontabber.overdue_critical_seconds=7200")


def _nagios(cli, *args):
    done = cli.run("--nagios", *LATE, *args)
    return done.returncode, done.stdout


def test_release_of_a_first_run_killed_with_kill_9_makes_the_job_due(cli):
    crontab = cli.crontab
    slow_job(cli, 30)
    holder = cli.spawn()
    wait_for(lambda: crontab.calls("slow-job"))
    holder.kill()
    holder.communicate(timeout=20)
    assert crontab.state("slow-job").next_run is None  # its first run never ended
    done = cli.run("--release", "slow-job", "--reason", "host died")
    assert done.returncode == 0, done.stderr
    explain = json.loads(cli.run("--explain", "slow-job", "--json").stdout)
    assert explain["due"] is True, explain
    assert "due since" in cli.run("--explain", "slow-job").stdout
    assert "slow-job" in cli.run("--list-jobs").stdout
    # nobody ticks for an hour: --nagios and the list say it is overdue
    crontab.wind(dt.timedelta(hours=1), "slow-job")
    code, out = _nagios(cli)
    assert code == 1 and "slow-job (SlowJob): overdue" in out, out
    (row,) = json.loads(cli.run("--list-jobs", "--json").stdout)["jobs"]
    assert row["status"] == "overdue", row
    slow_job(cli, 0)
    assert cli.run().returncode == 0
    assert len(crontab.calls("slow-job")) == 2
    state = crontab.state("slow-job")
    assert state.last_success is not None and state.next_run > crontab.now()


def test_a_job_paused_before_its_first_tick_runs_at_the_tick_after_resume(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    assert cli.run("--pause", "basic-job", "--reason", "not yet").returncode == 0
    assert cli.run().returncode == 0 and crontab.calls("basic-job") == []
    assert cli.run("--resume", "basic-job").returncode == 0
    assert json.loads(cli.run("--explain", "basic-job", "--json").stdout)["due"] is True
    assert cli.run().returncode == 0
    assert len(crontab.calls("basic-job")) == 1


def test_a_pause_before_the_first_tick_that_ran_out_counts_as_late(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    assert cli.run("--pause", "basic-job", "--until", "1m", "--reason", "x").returncode == 0
    crontab.sql("UPDATE crontabber SET paused_until = clock_timestamp() - interval '2 hours'")
    code, out = _nagios(cli)
    assert code in (1, 2) and "basic-job (BasicJob): overdue: its next run was due" in out, out


def test_reset_job_is_due_at_the_next_tick(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    assert cli.run().returncode == 0
    assert cli.run().returncode == 0 and len(crontab.calls("basic-job")) == 1  # not due
    assert cli.run("--reset-job", "basic-job", "--reason", "redo").returncode == 0
    assert cli.run().returncode == 0 and len(crontab.calls("basic-job")) == 2


def test_a_job_that_never_ran_although_a_tick_came_after_its_time_is_flagged(cli):
    crontab = cli.crontab
    # a tick by a host whose jobs list lacks basic-job (configuration drift) ...
    crontab.configure(["FooJob|1d"])
    assert cli.run().returncode == 0
    # ... while basic-job's schedule said it was due at 00:00 UTC today
    crontab.configure(["FooJob|1d", "BasicJob|1d|00:00"])
    code, out = _nagios(cli, "--crontabber.overdue_warning_seconds=1")
    assert code in (1, 2) and "basic-job (BasicJob): never ran: due since" in out, out
    assert "did not run it" in out
    (row,) = [
        r
        for r in json.loads(cli.run("--list-jobs", "--json").stdout)["jobs"]
        if r["name"] == "basic-job"
    ]
    assert row["status"] != "new", row
