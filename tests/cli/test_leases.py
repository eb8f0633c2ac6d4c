"""Heartbeat leases, fencing, job isolation and timeouts (issue #12), through
the real entry point against the real PostgreSQL. Other hosts are runners in
UTS namespaces of their own (``unshare --uts``), so their host name differs."""

import datetime as dt
import json
import os
import signal
import time

from tests.fixtures.runs import slow_job
from tests.fixtures.tcp_proxy import TcpProxy
from tests.fixtures.waiting import wait_for

FAST = ("--crontabber.heartbeat_seconds=0.3", "--crontabber.lease_seconds=1.5")
HOLD = 1.5  # lease_seconds of FAST
BEAT = 0.3


def gone(pid, within=5.0):
    """Whether process ``pid`` disappears within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_kill_9_mid_job_another_host_takes_over_within_lease_plus_heartbeat(cli):
    crontab = cli.crontab
    lease, beat = 4.0, 0.5  # long enough for a loaded machine's ticks to meet the live lease
    args = (f"--crontabber.heartbeat_seconds={beat}", f"--crontabber.lease_seconds={lease}")
    slow_job(cli, 30)
    holder = cli.spawn(*args, host="host-a")
    wait_for(lambda: crontab.calls("slow-job"))
    (first,) = crontab.sql("SELECT pid, run_id FROM test_job_calls")
    holder.kill()
    killed_at = crontab.now()
    holder.communicate(timeout=20)
    assert gone(first["pid"]), "the job's process outlived its runner (PR_SET_PDEATHSIG)"
    (renewed,) = crontab.sql("SELECT heartbeat FROM crontabber WHERE app_name = 'slow-job'")
    slow_job(cli, 0)
    refused = 0
    ticks = []  # (start, end) of each host-b tick, by the database's clock
    while len(crontab.calls("slow-job")) < 2:
        assert crontab.now() - killed_at < dt.timedelta(seconds=30)
        started = crontab.now()
        done = cli.run(*args, host="host-b")
        ticks.append((started, crontab.now()))
        assert done.returncode == 0, done.stderr  # a tick: refused or taking over, no failure
        if "taking over from" not in done.stderr:
            refused += 1
            assert f"on host-a:{holder.pid} (last heartbeat" in done.stderr
        else:
            assert f"taking over from host-a:{holder.pid} (run {first['run_id']})" in done.stderr
            assert "its lease has expired" in done.stderr
    took_over = crontab.calls("slow-job")[1]
    delay = crontab.sql("SELECT at FROM test_job_calls ORDER BY id")[1]["at"] - killed_at
    assert refused >= 1  # the lease was respected while it lasted
    # the lease runs from the last heartbeat, at most one heartbeat before the kill
    assert delay > dt.timedelta(seconds=lease - beat)
    # ...and no tick that started once it had run out left the job: the last tick took it
    # over and every tick before it started under the live lease (a bound of the ticks' own
    # times, not a wall-clock figure that a loaded machine stretches)
    expiry = renewed["heartbeat"] + dt.timedelta(seconds=lease)
    assert all(start <= expiry for start, _ in ticks[:-1]), (expiry, ticks)
    state = crontab.state("slow-job")
    assert took_over and state.ongoing is None and state.error_count == 0
    assert state.run_id > first["run_id"] and state.heartbeat is None


def test_a_dead_runner_of_this_host_is_taken_over_at_once(cli):
    crontab = cli.crontab
    slow_job(cli, 30)
    holder = cli.spawn()  # the default lease: 120 s
    wait_for(lambda: crontab.calls("slow-job"))
    holder.kill()
    holder.communicate(timeout=20)
    slow_job(cli, 0)
    done = cli.run()
    assert done.returncode == 0, done.stderr
    assert f":{holder.pid} (run " in done.stderr and "that process no longer exists" in done.stderr
    assert len(crontab.calls("slow-job")) == 2 and crontab.state("slow-job").ongoing is None


def test_a_run_stopped_past_its_lease_is_fenced_off_and_changes_nothing(cli):
    crontab = cli.crontab
    slow_job(cli, 30)
    late = cli.spawn(*FAST, host="host-a")
    wait_for(lambda: crontab.calls("slow-job"))
    (first,) = crontab.sql("SELECT pid, run_id FROM test_job_calls")
    for pid in (late.pid, first["pid"]):  # the runner and its job, frozen together
        os.kill(pid, signal.SIGSTOP)
    try:
        slow_job(cli, 0)
        wait_for(
            lambda: (
                cli.run(*FAST, host="host-b").returncode == 0
                and len(crontab.calls("slow-job")) == 2
            ),
            timeout=20,
        )
        newer = crontab.state("slow-job")
        assert newer.ongoing is None and newer.error_count == 0 and newer.run_id > first["run_id"]
    finally:
        for pid in (first["pid"], late.pid):
            os.kill(pid, signal.SIGCONT)
    _, err = late.communicate(timeout=30)
    assert late.returncode == 4, err
    assert f"slow-job: run {first['run_id']} was fenced off" in err and "Traceback" not in err
    assert crontab.state("slow-job") == newer  # the late run overwrote nothing
    fenced = crontab.sql(
        "SELECT * FROM crontabber_log WHERE run_id = %s ORDER BY id", (first["run_id"],)
    )
    # host-b recorded it as abandoned when it took over; then it came back and was refused
    assert [row["exc_type"] for row in fenced] == [
        "<class 'crontabber.errors.RunAbandoned'>",
        "<class 'crontabber.errors.LeaseLost'>",
    ]
    assert all(row["host"] == "host-a" and row["pid"] == late.pid for row in fenced)
    history = json.loads(cli.run("--history", "slow-job", "--json").stdout)
    assert [r["outcome"] for r in history["runs"] if r["run_id"] == first["run_id"]] == [
        "fenced_off"
    ]


def test_a_job_asks_whether_it_still_holds_its_lease(cli):
    """The runner stops renewing (SIGSTOP); the job, polling holds_lease(),
    stops by itself (within lease - heartbeat, before anyone may take over; asserted as an
    order of events: after the freeze, long before its own end)."""
    crontab = cli.crontab
    slow_job(cli, 120, job="LeaseWatchingJob")
    runner = cli.spawn(*FAST)
    wait_for(lambda: crontab.calls("lease-watcher"))
    os.kill(runner.pid, signal.SIGSTOP)
    stopped_at = crontab.now()
    try:
        finished = "SELECT finished_at FROM test_job_calls"
        wait_for(lambda: crontab.sql(finished)[0]["finished_at"], timeout=60)
    finally:
        os.kill(runner.pid, signal.SIGCONT)
    (call,) = crontab.sql("SELECT at, finished_at FROM test_job_calls")
    # it stopped for the lease: after the runner froze, before its 120 s were up
    own_end = call["at"] + dt.timedelta(seconds=120)
    assert stopped_at < call["finished_at"] < own_end, (stopped_at, call)
    runner.communicate(timeout=20)
    assert runner.returncode in (0, 4)


def test_a_job_past_its_timeout_is_stopped_recorded_and_released(cli):
    crontab = cli.crontab
    slow_job(cli, 30, extra="        timeout=1\n")
    done = cli.run("--job", "slow-job")
    assert done.returncode == 5, done.stderr  # job failed
    assert (
        "slow-job: failed: JobTimeout: timeout: slow-job ran longer than its timeout of 1 s"
        in done.stdout
    )
    state = crontab.state("slow-job")
    assert state.ongoing is None and state.error_count == 1
    assert state.last_error["type"] == "<class 'crontabber.errors.JobTimeout'>"
    assert "time.sleep(self.config.sleep)" in state.last_error["traceback"]  # where it was
    (call,) = crontab.sql("SELECT finished_at FROM test_job_calls")
    assert call["finished_at"] is None  # cut short in its sleep
    (row,) = crontab.log("slow-job")
    assert (
        row["exc_type"] == "<class 'crontabber.errors.JobTimeout'>"
        and row["run_id"] == state.run_id
    )


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace_period(cli):
    crontab = cli.crontab
    slow_job(cli, 60, job="StubbornJob", extra="        timeout=0.5\n")
    done = cli.run("--crontabber.kill_grace_seconds=1", "--job", "stubborn")
    # the order of events, not a time: SIGTERM first, SIGKILL once the grace had passed (the
    # runner's line), not its 60 s sleep, ended it
    assert done.returncode == 5, done.stderr
    assert "still running 1 s after SIGTERM; SIGKILL" in done.stderr
    (call,) = crontab.sql("SELECT pid FROM test_job_calls")
    assert gone(call["pid"])
    state = crontab.state("stubborn")
    assert (
        state.ongoing is None
        and state.last_error["type"] == "<class 'crontabber.errors.JobTimeout'>"
    )


def test_the_default_timeout_applies_to_every_job(cli):
    slow_job(cli, 30)
    done = cli.run("--crontabber.default_timeout_seconds=0.5", "--job", "slow-job")
    assert done.returncode == 5 and "timeout of 0.5 s" in done.stdout
    assert "deprecated" not in done.stderr


def test_the_old_name_of_the_default_timeout_still_works_and_says_so(cli):
    """crontabber.default_timeout was renamed default_timeout_seconds (docs/conventions.md,
    "Deprecation policy"): the old name still sets it, and the command line says so in one
    line on stderr (the DeprecationWarning itself is for Python callers: tests/unit)."""
    slow_job(cli, 30)
    done = cli.run("--crontabber.default_timeout=0.5", "--job", "slow-job")
    assert done.returncode == 5 and "timeout of 0.5 s" in done.stdout
    said = [line for line in done.stderr.splitlines() if "deprecated" in line]
    assert len(said) == 1 and said[0].endswith(
        "WARNING crontabber - crontabber.default_timeout is deprecated: it is renamed "
        "crontabber.default_timeout_seconds; the old name is read until the next major release"
    ), done.stderr


def test_a_job_process_that_dies_is_a_failure_and_the_tick_goes_on(cli):
    crontab = cli.crontab
    crontab.configure(["AbortJob|1d", "BasicJob|1d"])
    done = cli.run()
    assert done.returncode == 0, done.stderr
    state = crontab.state("abort-job")
    assert state.ongoing is None and state.error_count == 1
    assert state.last_error["type"] == "<class 'crontabber.errors.JobProcessDied'>"
    assert (
        state.last_error["value"]
        == "abort-job: the job's process died: killed by signal 6 (SIGABRT)"
    )
    assert len(crontab.calls("basic-job")) == 1
    # the tick's log says so too (cron mails stderr): one line, no traceback
    assert (
        "ERROR crontabber.supervisor - abort-job: the job's process died: killed by signal 6"
        in done.stderr
    )
    crontab.configure(["VanishJob|1d"])
    done = cli.run("--job", "vanish-job")
    assert done.returncode == 5 and "Traceback" not in done.stderr
    assert done.stdout == (
        "vanish-job: failed: JobProcessDied: vanish-job: the job's process died: "
        "exit status 3 without reporting how the job ended\n"
    )
    assert crontab.state("vanish-job").ongoing is None


def test_reset_and_release_refuse_a_live_lease_and_release_keeps_history(cli):
    crontab = cli.crontab
    slow_job(cli, 0)
    assert cli.run().returncode == 0
    before = crontab.state("slow-job")
    crontab.wind(dt.timedelta(days=2))
    before = crontab.state("slow-job")
    slow_job(cli, 30)
    holder = cli.spawn()
    try:
        wait_for(lambda: len(crontab.calls("slow-job")) == 2)
        for mode, verb in (("--reset-job", "reset"), ("--release", "release")):
            done = cli.run(mode, "slow-job", "--reason", "test")
            assert done.returncode == 3, done.stderr
            (line,) = done.stderr.strip().splitlines()
            assert line.startswith(
                f"crontabber: slow-job: refusing to {verb} it: it is running on "
            )
            assert f":{holder.pid} (run " in line and "last heartbeat" in line
        assert crontab.state("slow-job").ongoing is not None
    finally:
        holder.kill()
        holder.communicate(timeout=20)
    done = cli.run("--release", "slow-job", "--reason", "test")
    assert done.returncode == 0 and "that process no longer exists" in done.stdout
    after = crontab.state("slow-job")
    assert after.ongoing is None and after.ongoing_by is None and after.run_id is None
    assert (after.last_run, after.last_success, after.next_run, after.first_run) == (
        before.last_run,
        before.last_success,
        before.next_run,
        before.first_run,
    )
    assert "nothing to release" in cli.run("--release", "slow-job", "--reason", "test").stdout
    assert cli.run("--reset-job", "slow-job", "--reason", "test").returncode == 0
    assert crontab.state("slow-job") is None


def _through(cli, proxy):
    """Runner arguments that put the state database (only) behind ``proxy``."""
    return ("--crontabber.host=127.0.0.1", f"--crontabber.port={proxy.port}")


def test_database_lost_briefly_mid_run_the_run_still_records_its_end(cli):
    crontab = cli.crontab
    proxy = TcpProxy((crontab.database.host, int(crontab.database.port)))
    try:
        slow_job(cli, 2.5)
        runner = cli.spawn(
            "--crontabber.heartbeat_seconds=0.3",
            "--crontabber.lease_seconds=8",
            *_through(cli, proxy),
        )
        wait_for(lambda: crontab.calls("slow-job"))
        proxy.cut()
        time.sleep(1.5)
        proxy.restore()
        out, err = runner.communicate(timeout=30)
    finally:
        proxy.close()
    assert runner.returncode == 0, err
    assert "Traceback" not in err and "the state database is back" in err
    state = crontab.state("slow-job")
    assert state.ongoing is None and state.error_count == 0 and state.last_success is not None


def test_database_lost_for_longer_than_the_lease_one_line_then_the_lease_expires(cli):
    crontab = cli.crontab
    proxy = TcpProxy((crontab.database.host, int(crontab.database.port)))
    try:
        slow_job(cli, 30)
        runner = cli.spawn(*FAST, *_through(cli, proxy), host="host-a")
        wait_for(lambda: crontab.calls("slow-job"))
        proxy.cut()
        out, err = runner.communicate(timeout=30)
    finally:
        proxy.close()
    assert runner.returncode == 1 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("crontabber: cannot use the state database at ")
    assert "the end of slow-job's run" in last and "its marker expires with its lease" in last
    # why the job was stopped, whichever stopped it first (the runner, or the job's watchdog)
    assert (
        f"lost the job: its lease could not be renewed for {HOLD - BEAT:g} s; stopping it" in err
    ), err
    (call,) = crontab.sql("SELECT pid FROM test_job_calls")
    assert gone(call["pid"], within=1)  # the job was stopped when the lease ran out
    assert crontab.state("slow-job").ongoing is not None
    slow_job(cli, 0)
    done = cli.run(*FAST, host="host-b")
    assert done.returncode == 0 and "its lease has expired" in done.stderr
    assert crontab.state("slow-job").ongoing is None
