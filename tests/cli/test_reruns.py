"""Reruns v2 (issue #34 item 2), through the real entry point: a rerun runs in its own lane
beside the job's schedule, claiming interval by interval; ``--only``, ``--newest-first``,
``--dry-run`` and ``--resume-run`` after a ``kill -9``."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time

from tests.fixtures.waiting import wait_for

DAY = dt.timedelta(days=1)
FAST = ("--crontabber.heartbeat_seconds=0.5", "--crontabber.lease_seconds=3")
# A lease no test waits for: what is taken over under it was taken over for a dead pid.
SLOW = ("--crontabber.heartbeat_seconds=0.5", "--crontabber.lease_seconds=60")


def _slow(cli, sleep: float) -> None:
    cli.crontab.configure(
        ["SlowBackfillJob|1d"], extra=f"    [[class-SlowBackfillJob]]\n        sleep={sleep}\n"
    )


def _started(cli, days: int) -> dt.datetime:
    """slow-backfill run once, then ``days`` days wound back: the day of its first interval."""
    _slow(cli, 0)
    assert cli.run("--job", "slow-backfill").returncode == 0
    (first,) = [c["day"] for c in cli.crontab.calls("slow-backfill")]
    back = days * DAY + dt.timedelta(minutes=1)
    cli.crontab.wind(back, "slow-backfill")
    cli.crontab.sql("DELETE FROM test_job_calls")
    return first.astimezone(dt.timezone.utc) - back


def _calls(cli) -> list[dict]:
    return cli.crontab.sql(
        "SELECT c.day, c.run_id, c.at, c.finished_at, r.kind FROM test_job_calls c"
        " JOIN crontabber_run r USING (run_id) ORDER BY c.id"
    )


def _day(when: dt.datetime) -> str:
    return f"{when.astimezone(dt.timezone.utc):%Y-%m-%d}"


def test_a_backfill_runs_beside_the_schedule_and_no_interval_runs_twice_at_once(cli):
    """The rerun holds its first interval (the scheduled run's first too) when the tick
    starts: the tick waits for that one interval, then runs the job's schedule while the
    rerun goes on; each interval is run by one run at a time."""
    anchor = _started(cli, 6)  # the schedule has 6 intervals to do: anchor + 1 .. anchor + 6
    _slow(cli, 1.0)
    rerun = cli.spawn(
        "--rerun",
        "slow-backfill",
        "--reason",
        "test",
        "--newest-first",
        "--date",
        _day(anchor - 2 * DAY),
        "--to",
        _day(anchor + DAY),
        *FAST,
    )
    wait_for(lambda: _calls(cli), what="the rerun's first interval")
    # The rerun's job stays in that interval (stopped) until the tick has met it: a tick
    # starting slowly on a loaded machine would otherwise find it done.
    (job,) = cli.crontab.sql("SELECT pid FROM test_job_calls")
    os.kill(job["pid"], signal.SIGSTOP)
    try:
        tick = cli.spawn(*FAST)
        wait_for(
            lambda: cli.crontab.sql("SELECT 1 FROM crontabber_run WHERE kind = 'scheduled'"),
            what="the tick's run",
        )
        time.sleep(2)  # its job forks and asks for the interval at once, then every second
    finally:
        os.kill(job["pid"], signal.SIGCONT)
    tick_out, tick_err = tick.communicate(timeout=120)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert tick.returncode == 0, tick_err
    assert "waiting for" in tick_err and "(rerun)" in tick_err  # held by the rerun
    calls = _calls(cli)
    by_kind = {kind: [c for c in calls if c["kind"] == kind] for kind in ("rerun", "scheduled")}
    assert [c["day"] for c in by_kind["rerun"]] == [anchor + i * DAY for i in (1, 0, -1, -2)]
    # newest first: the span still reads earliest to latest (issue #42 item 13)
    first, last = (anchor - 2 * DAY).strftime("%Y-%m-%d"), (anchor + DAY).strftime("%Y-%m-%d")
    assert f"slow-backfill: reran 4 intervals, {first} " in out and f" to {last} " in out, out
    assert [c["day"] for c in by_kind["scheduled"]] == [anchor + i * DAY for i in range(1, 7)]
    # the schedule went on during the backfill: a scheduled interval ran while the rerun did
    rerun_end = max(c["finished_at"] for c in by_kind["rerun"])
    assert any(c["at"] < rerun_end for c in by_kind["scheduled"])
    for one in calls:  # and no interval ran twice at once
        for other in calls:
            if one is not other and one["day"] == other["day"]:
                assert one["finished_at"] <= other["at"] or other["finished_at"] <= one["at"]
    ledger = cli.crontab.sql(
        "SELECT kind, status FROM crontabber_run WHERE app_name = 'slow-backfill' ORDER BY run_id"
    )
    assert ledger[-2:] == [
        {"kind": "rerun", "status": "succeeded"},
        {"kind": "scheduled", "status": "succeeded"},
    ]


def test_a_rerun_killed_mid_range_is_resumed_without_redoing_what_it_finished(cli):
    anchor = _started(cli, 1)
    _slow(cli, 1.0)
    days = [anchor - i * DAY for i in range(6, 1, -1)]
    rerun = cli.spawn(
        "--rerun",
        "slow-backfill",
        "--reason",
        "test",
        "--date",
        _day(days[0]),
        "--to",
        _day(days[-1]),
        *SLOW,
    )
    logged = (
        "SELECT success FROM crontabber_log WHERE app_name = 'slow-backfill' "
        "AND run_id = %s AND success IS NOT NULL ORDER BY success"
    )
    run_id = wait_for(
        lambda: cli.crontab.sql("SELECT run_id FROM crontabber_run WHERE kind = 'rerun'"),
        what="the rerun",
    )[0]["run_id"]
    wait_for(lambda: len(cli.crontab.sql(logged, (run_id,))) >= 2, what="two intervals done")
    os.kill(rerun.pid, signal.SIGKILL)
    rerun.wait(timeout=30)
    done = [r["success"] for r in cli.crontab.sql(logged, (run_id,))]
    assert 2 <= len(done) < len(days)
    # From another host the killed run may still be alive: refused until its lease expires.
    elsewhere = cli.run(
        "--rerun",
        "slow-backfill",
        "--reason",
        "test",
        "--resume-run",
        str(run_id),
        *SLOW,
        host="cron-9",
    )
    assert elsewhere.returncode == 3 and "its lease is live" in elsewhere.stderr
    # On its own host its pid is gone: continued at once, the lease (60 s) not waited for.
    dry = cli.run("--rerun", "slow-backfill", "--resume-run", str(run_id), "--dry-run", *SLOW)
    assert dry.returncode == 0, dry.stderr
    assert f"{len(done)} skipped, continuing run {run_id}" in dry.stdout
    assert dry.stdout.count(f"skipped: done by run {run_id} before it stopped") == len(done)
    calls_before = len(_calls(cli))
    resumed = cli.run(
        "--rerun",
        "slow-backfill",
        "--reason",
        "test",
        "--resume-run",
        str(run_id),
        *SLOW,
        timeout=40,
    )
    assert resumed.returncode == 0, resumed.stderr
    again = [c["day"] for c in _calls(cli)[calls_before:]]
    assert again == [d for d in days if d not in done]  # the rest, in the killed run's order
    (killed,) = cli.crontab.sql("SELECT status FROM crontabber_run WHERE run_id = %s", (run_id,))
    assert killed["status"] == "abandoned"
    (new,) = cli.crontab.sql(
        "SELECT resumed_from, status FROM crontabber_run WHERE kind = 'rerun' AND run_id > %s",
        (run_id,),
    )
    assert new == {"resumed_from": run_id, "status": "succeeded"}


def test_only_failed_or_missing_and_the_dry_run_says_what_each_interval_would_do(cli):
    crontab = cli.crontab
    crontab.configure(["FailingBackfillJob|1d"])
    assert cli.run("--job", "failing-backfill").returncode == 0
    (first,) = [c["day"] for c in crontab.calls("failing-backfill")]
    back = 4 * DAY
    crontab.wind(back, "failing-backfill")
    anchor = first.astimezone(dt.timezone.utc) - back
    bad = anchor + 2 * DAY
    crontab.configure(
        ["FailingBackfillJob|1d"],
        extra=f"    [[class-FailingBackfillJob]]\n        fail_on={_day(bad)}\n",
    )
    assert cli.run("--job", "failing-backfill").returncode == 5  # anchor+1 done, anchor+2 failed
    span = ("--date", _day(anchor - DAY), "--to", _day(anchor + 4 * DAY))
    dry = cli.run(
        "--rerun", "failing-backfill", "--only", "failed", "--newest-first", "--dry-run", *span
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == (
        "failing-backfill: --rerun would run 1 interval(s), newest first, 5 skipped (nothing ran):"
    )
    stamp = "%Y-%m-%d %H:%M UTC"
    first_run, second_run = [
        r["run_id"]
        for r in crontab.sql(
            "SELECT run_id FROM crontabber_run WHERE app_name = 'failing-backfill' ORDER BY run_id"
        )
    ]
    none = "skipped: no unit recorded; --only failed leaves it"
    assert lines[1:] == [
        f"  {anchor + 4 * DAY:{stamp}}: skipped: its last unit succeeded (run {first_run})",
        f"  {anchor + 3 * DAY:{stamp}}: {none}",  # the failure stopped that run before it
        f"  {bad:{stamp}}",
        f"  {anchor + DAY:{stamp}}: skipped: its last unit succeeded (run {second_run})",
        f"  {anchor:{stamp}}: {none}",
        f"  {anchor - DAY:{stamp}}: {none}",
    ]
    crontab.sql("DELETE FROM test_job_calls")
    missing = cli.run("--rerun", "failing-backfill", "--reason", "test", "--only", "missing", *span)
    assert missing.returncode == 0, missing.stderr
    assert [c["day"] for c in crontab.calls("failing-backfill")] == [
        anchor - DAY,
        anchor,
        anchor + 3 * DAY,
    ]
    failed = cli.run("--rerun", "failing-backfill", "--reason", "test", "--only", "failed", *span)
    assert failed.returncode == 5 and "--resume-run" in failed.stdout  # it fails on that day again
    nothing = cli.run("--rerun", "failing-backfill", "--reason", "test", "--only", "missing", *span)
    assert nothing.returncode == 7 and "nothing to rerun" in nothing.stdout
    assert (
        cli.run("--rerun", "failing-backfill", "--only", "done", "--dry-run", *span).returncode == 1
    )
    mixed = cli.run("--rerun", "failing-backfill", "--resume", "failing-backfill")
    assert mixed.returncode == 1 and "--resume-run RUN continues a rerun" in mixed.stderr


def test_a_tick_takes_over_at_once_the_interval_a_killed_rerun_held_on_its_host(cli):
    """The rerun is killed (SIGKILL) in the middle of an interval the schedule also has to
    do: the next tick on the same host does not wait out the rerun's lease (60 s; the tick
    could not finish in time), its pid is gone: the interval is taken over at once."""
    anchor = _started(cli, 2)  # the schedule has anchor + 1 and anchor + 2 to do
    _slow(cli, 2.0)
    held = anchor + DAY
    rerun = cli.spawn("--rerun", "slow-backfill", "--reason", "test", "--date", _day(held), *SLOW)
    (call,) = wait_for(lambda: _calls(cli), what="the rerun in its interval")
    assert call["day"] == held and call["finished_at"] is None
    os.kill(rerun.pid, signal.SIGKILL)
    rerun.wait(timeout=30)
    tick = cli.run(*SLOW, timeout=30)
    assert tick.returncode == 0, tick.stderr
    assert (
        f"run {call['run_id']} (rerun) on" in tick.stderr
        and "is gone; taking its interval over" in tick.stderr
    )
    scheduled = [c["day"] for c in _calls(cli) if c["kind"] == "scheduled"]
    assert scheduled == [anchor + DAY, anchor + 2 * DAY]
    (killed,) = cli.crontab.sql(
        "SELECT status, error FROM crontabber_run WHERE run_id = %s", (call["run_id"],)
    )
    assert killed["status"] == "abandoned" and "is gone; taken over by run" in killed["error"]


def test_a_killed_rerun_reads_as_what_it_was_then_a_tick_records_it_abandoned(cli):
    """Issue #42 item 2: a rerun killed with -9 before it logged an interval is listed by
    --history (it was not), as running with its holder's verdict (not ok), --logs does not
    suggest --release (a lane run holds no marker), and a later tick records it abandoned
    (it stayed running in the ledger forever)."""
    anchor = _started(cli, 0)
    _slow(cli, 30.0)
    rerun = cli.spawn(
        "--rerun",
        "slow-backfill",
        "--reason",
        "test",
        "--date",
        _day(anchor - 3 * DAY),
        "--to",
        _day(anchor - DAY),
        *FAST,
    )
    wait_for(lambda: _calls(cli), what="the rerun's first interval")
    (run,) = cli.crontab.sql("SELECT run_id FROM crontabber_run WHERE kind = 'rerun'")
    os.kill(rerun.pid, signal.SIGKILL)
    rerun.wait(timeout=30)
    history = json.loads(cli.run("--history", "slow-backfill", "--json").stdout)["runs"]
    (shown,) = [r for r in history if r["run_id"] == run["run_id"]]
    assert (shown["outcome"], shown["kind"], shown["verdict"]) == ("running", "rerun", "dead")
    logs = cli.run("--logs", "slow-backfill", "--run", str(run["run_id"]))
    assert "not running: its process no longer exists; the next tick" in logs.stdout, logs.stdout
    assert "--release" not in logs.stdout and f"--resume-run {run['run_id']}" in logs.stdout

    def abandoned() -> bool:
        assert cli.run(*FAST).returncode == 0
        (row,) = cli.crontab.sql(
            "SELECT status, error FROM crontabber_run WHERE run_id = %s", (run["run_id"],)
        )
        return row["status"] == "abandoned"

    wait_for(abandoned, timeout=30, what="a tick past the lease to record it")
    (row,) = cli.crontab.sql("SELECT error FROM crontabber_run WHERE run_id = %s", (run["run_id"],))
    assert row["error"].startswith("killed without recording its end: no heartbeat since ")
    assert "(its lease expired); recorded by the tick of " in row["error"]
    history = json.loads(cli.run("--history", "slow-backfill", "--json").stdout)["runs"]
    (shown,) = [r for r in history if r["run_id"] == run["run_id"]]
    assert shown["outcome"] == "abandoned"
    # the rerun as a whole, from any of its runs: what ran, what is left, how to go on
    rid = run["run_id"]
    lines = cli.run("--history", "slow-backfill", "--run", str(rid)).stdout.splitlines()
    at = next(
        n for n, line in enumerate(lines) if line.startswith(f"rerun {rid} of slow-backfill: ")
    )
    assert lines[at] == f"rerun {rid} of slow-backfill: stopped: 0 of 3 interval(s) done"
    assert (
        lines[at + 1].startswith(f"  run {rid} (first run) on ")
        and ": abandoned, 0 intervals, " in lines[at + 1]
    )
    assert (
        lines[at + 2]
        == f"  left: 3 interval(s); --rerun slow-backfill --resume-run {rid} continues it"
    )
    group = json.loads(cli.run("--history", "slow-backfill", "--run", str(rid), "--json").stdout)[
        "rerun"
    ]
    assert (group["outcome"], len(group["left"]), [r["status"] for r in group["runs"]]) == (
        "stopped",
        3,
        ["abandoned"],
    )


def test_resuming_a_rerun_that_a_newer_one_covers_warns_and_names_the_newer(cli):
    """Issue #42 item 13: ``--resume-run`` of an older rerun whose days a newer rerun covers
    too says so (both would work on the same days) and names the command that joins the newer
    one."""
    anchor = _started(cli, 1)
    _slow(cli, 1.0)
    days = [anchor - i * DAY for i in range(5, 1, -1)]
    span = ("--date", _day(days[0]), "--to", _day(days[-1]))
    older = cli.spawn("--rerun", "slow-backfill", "--reason", "test", *span, *SLOW)
    first = wait_for(
        lambda: cli.crontab.sql("SELECT run_id FROM crontabber_run WHERE kind = 'rerun'"),
        what="the rerun",
    )[0]["run_id"]
    wait_for(lambda: _calls(cli), what="its first interval")
    os.kill(older.pid, signal.SIGKILL)
    older.wait(timeout=30)
    _slow(cli, 0)
    newer = cli.run("--rerun", "slow-backfill", "--reason", "test", *span, *SLOW)
    assert newer.returncode == 0, newer.stderr
    (second,) = cli.crontab.sql(
        "SELECT run_id FROM crontabber_run WHERE kind = 'rerun' AND run_id > %s", (first,)
    )
    dry = cli.run("--rerun", "slow-backfill", "--resume-run", str(first), "--dry-run", *SLOW)
    assert dry.returncode == 0, dry.stderr
    assert (
        f"slow-backfill: warning: a newer rerun, run {second['run_id']}, covers "
    ) in dry.stdout, dry.stdout
    assert (
        f"of run {first}'s plan too: both would work on the same days (each interval once at a "
        f"time); --rerun slow-backfill --resume-run {second['run_id']} joins the newer one"
    ) in dry.stdout
    plain = cli.run("--rerun", "slow-backfill", "--resume-run", str(second["run_id"]), "--dry-run")
    assert "warning: a newer rerun" not in plain.stdout  # the newest: nothing newer covers it
