"""The on-call commands (issue #13) through the real entry point against the
real PostgreSQL: --explain, --pause/--resume, --rerun, --mark-success,
--audit, and what --job says and exits with."""

import datetime as dt
import getpass
import json
import socket

from tests.fixtures.runs import backfilled
from tests.fixtures.waiting import wait_for
from tests.helpers import one_line

DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)
ME = f"{getpass.getuser()}@{socket.gethostname()}"


def test_explain_says_what_a_tick_would_do_and_why(cli):
    crontab = cli.crontab
    crontab.configure(["TroubleJob|1d", "SadJob|1d", "BasicJob|1d", "FooBackfillJob|1d"])
    done = cli.run("--explain", "basic-job")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "basic-job: a tick now would run it"
    assert "  never ran" in done.stdout and "  due now" in done.stdout
    assert cli.run().returncode == 0
    out = cli.run("--explain", "basic-job").stdout
    assert out.startswith("basic-job: a tick now would skip it: not due yet")
    assert "not due until " in out and "(in 23h" in out or "(in 1d" in out
    out = cli.run("--explain", "sad").stdout
    assert "parent trouble: 'trouble' errored last time it ran" in out
    assert "waiting: 'trouble' errored last time it ran" in out.splitlines()[0]
    out = cli.run("--explain", "trouble").stdout
    assert "failed 1 time in a row (last: NameError: Trouble!!); error backoff: retry at" in out
    crontab.wind(3 * DAY + dt.timedelta(minutes=1), "foo-backfill")
    out = cli.run("--explain", "foo-backfill").stdout
    assert "backfill: 3 interval(s) pending" in out and out.startswith(
        "foo-backfill: a tick now would run it"
    )
    facts = json.loads(cli.run("--explain", "foo-backfill", "--json").stdout)
    state = crontab.state("foo-backfill")
    assert (
        facts["would_run"] is True
        and facts["is_backfill"] is True
        and len(facts["backfill_pending"]) == 3
    )
    assert facts["next_run"] == state.next_run.astimezone(dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert cli.run("--explain", "nope").returncode == 1


def test_explain_a_running_job_names_its_holder_and_lease(cli):
    crontab = cli.crontab
    crontab.configure(["SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=30\n")
    holder = cli.spawn()
    try:
        wait_for(lambda: crontab.calls("slow-job"))
        out = cli.run("--explain", "slow-job").stdout
        assert out.startswith("slow-job: a tick now would skip it: running on ")
        assert f":{holder.pid} (run " in out and "its lease lasts until" in out
    finally:
        holder.kill()
        holder.communicate(timeout=20)
    out = cli.run("--explain", "slow-job").stdout
    assert "marker left by a dead run" in out and "a tick now would take it over and run it" in out


def test_pause_resume_and_a_pause_that_ends_by_itself(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    done = cli.run("--pause", "basic-job")
    assert done.returncode == 1 and "needs --reason" in one_line(done)
    done = cli.run("--pause", "basic-job", "--until", "yesterday", "--reason", "x")
    assert done.returncode == 1 and "--until" in one_line(done)
    before = crontab.now()
    done = cli.run("--pause", "basic-job", "--reason", "S3 is down (INC-42)", "--until", "2h")
    assert done.returncode == 0 and "basic-job: paused until " in done.stdout
    state = crontab.state("basic-job")
    assert state.paused_by == ME and state.paused_reason == "S3 is down (INC-42)"
    # 2 h from the command's moment (the order of events, not a wall-clock slack)
    assert before + 2 * HOUR <= state.paused_until <= crontab.now() + 2 * HOUR
    assert cli.run().returncode == 0 and crontab.calls("basic-job") == []  # ticks skip it
    done = cli.run("--job", "basic-job")
    assert done.returncode == 6 and "paused until" in done.stdout and ME in done.stdout
    assert "S3 is down (INC-42); --force --reason TEXT runs it anyway" in done.stdout
    assert cli.run("--explain", "basic-job").stdout.startswith(
        "basic-job: a tick now would skip it: paused"
    )
    assert cli.run("--job", "basic-job", "--force", "--reason", "INC-42 drill").returncode == 0
    assert len(crontab.calls("basic-job")) == 1
    crontab.wind(2 * DAY)
    crontab.sql("UPDATE crontabber SET paused_until = clock_timestamp() - interval '1 second'")
    assert cli.run().returncode == 0 and len(crontab.calls("basic-job")) == 2  # the pause ended
    assert cli.run("--resume", "basic-job").stdout == "basic-job: not paused\n"
    cli.run("--pause", "basic-job", "--reason", "again")
    before = crontab.now()
    done = cli.run("--resume", "basic-job", "--reason", "fixed")
    assert done.returncode == 0 and done.stdout.startswith("basic-job: resumed (was paused until")
    # the pause ends now (lateness counts from it), its author and reason stay for --explain
    state = crontab.state("basic-job")
    assert before <= state.paused_until <= crontab.now()
    assert state.paused_reason == "again"
    assert "a pause ended " in cli.run("--explain", "basic-job").stdout


def test_a_new_job_can_be_paused_before_its_first_run(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    assert cli.run("--pause", "basic-job", "--reason", "not yet").returncode == 0
    assert cli.run().returncode == 0 and crontab.calls("basic-job") == []
    assert crontab.state("basic-job").last_run is None


def test_rerun_runs_exactly_those_days_and_moves_nothing_backwards(cli):
    crontab = cli.crontab
    days = backfilled(cli)
    before = crontab.state("foo-backfill")
    third = days[2].astimezone(dt.timezone.utc)
    done = cli.run("--rerun", "foo-backfill", "--reason", "test", "--date", f"{third:%Y-%m-%d}")
    assert done.returncode == 0, done.stderr
    run_id = crontab.log("foo-backfill")[-1]["run_id"]
    assert done.stdout == (
        f"foo-backfill: reran {third:%Y-%m-%d %H:%M} UTC (run {run_id}); last "
        "success and next run unchanged:\n"  # and what each interval did:
        f"  {third:%Y-%m-%d %H:%M} UTC: recorded the day of {third:%Y-%m-%d}\n"
    )
    assert [c["day"] for c in crontab.calls("foo-backfill")][-1] == days[2]
    utc = [
        d.astimezone(dt.timezone.utc) for d in days
    ]  # --date is a UTC day (the session's zone is not)
    done = cli.run(
        "--rerun",
        "foo-backfill",
        "--reason",
        "test",
        "--date",
        f"{utc[0]:%Y-%m-%d}",
        "--to",
        f"{utc[1]:%Y-%m-%d}",
    )
    assert done.returncode == 0
    assert [c["day"] for c in crontab.calls("foo-backfill")][-2:] == days[:2]  # oldest first
    after = crontab.state("foo-backfill")
    assert (after.last_success, after.next_run, after.error_count) == (
        before.last_success,
        before.next_run,
        0,
    )
    # its own lane: the job's row (last run included) is the schedule's
    assert after.ongoing is None and after.last_run == before.last_run


def test_rerun_refusals_and_a_failing_rerun(cli):
    crontab = cli.crontab
    days = backfilled(cli)
    done = cli.run("--rerun", "basic-job", "--reason", "test", "--date", "2026-01-01")
    assert done.returncode == 1 and "basic-job is not a backfill job" in one_line(done)
    assert cli.run("--rerun", "foo-backfill", "--reason", "test").returncode == 1
    done = cli.run("--rerun", "foo-backfill", "--reason", "test", "--date", "2026-13-01")
    assert done.returncode == 1 and "is not a day (YYYY-MM-DD)" in one_line(done)
    done = cli.run("--rerun", "foo-backfill", "--reason", "test", "--date", "2099-01-01")
    assert done.returncode == 1 and "before now" in one_line(done)
    done = cli.run(
        "--rerun",
        "foo-backfill",
        "--reason",
        "test",
        "--date",
        f"{days[2]:%Y-%m-%d}",
        "--to",
        f"{days[0]:%Y-%m-%d}",
    )
    assert done.returncode == 1 and "is before --date" in one_line(done)
    day = days[1].astimezone(dt.timezone.utc)
    crontab.configure(
        ["FailingBackfillJob|1d"],
        extra=f"    [[class-FailingBackfillJob]]\n        fail_on={day:%Y-%m-%d}\n",
    )
    done = cli.run("--rerun", "failing-backfill", "--reason", "test", "--date", f"{day:%Y-%m-%d}")
    assert (
        done.returncode == 5
        and "rerun of" in done.stdout
        and "failed: NameError: bla bla" in done.stdout
    )


def test_job_on_a_backfill_job_with_nothing_due_says_so(cli):
    crontab = cli.crontab
    backfilled(cli)
    calls = len(crontab.calls("foo-backfill"))
    done = cli.run("--job", "foo-backfill")
    assert done.returncode == 7 and "--rerun foo-backfill --date YYYY-MM-DD" in done.stdout
    done = cli.run("--job", "foo-backfill", "--force")
    assert done.returncode == 7  # nothing ran (issue #23)
    assert done.stdout.startswith("foo-backfill: nothing to backfill")
    assert "--rerun foo-backfill --date YYYY-MM-DD" in done.stdout
    assert len(crontab.calls("foo-backfill")) == calls


def test_job_that_fails_exits_5(cli):
    cli.crontab.configure(["TroubleJob|1d"])
    done = cli.run("--job", "trouble")
    assert done.returncode == 5 and done.stdout == "trouble: failed: NameError: Trouble!!\n"
    assert cli.run().returncode == 0  # a tick keeps crontabber's 0 (see --nagios)


def test_mark_success_clears_errors_and_refuses_a_live_lease(cli):
    crontab = cli.crontab
    crontab.configure(
        ["TroubleJob|1d", "SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=30\n"
    )
    assert cli.run("--mark-success", "trouble", "--reason", "test").stdout.startswith(
        "trouble: never ran"
    )
    cli.run("--job", "trouble")
    before = crontab.now()
    done = cli.run("--mark-success", "trouble", "--reason", "fixed by hand")
    assert done.returncode == 0 and done.stdout.startswith("trouble: marked successful")
    state, now = crontab.state("trouble"), crontab.now()
    assert state.error_count == 0 and state.last_error == {}
    assert before <= state.last_success <= now
    assert before + DAY <= state.next_run <= now + DAY
    holder = cli.spawn("--job", "slow-job")
    try:
        wait_for(lambda: crontab.calls("slow-job"))
        done = cli.run("--mark-success", "slow-job", "--reason", "test")
        assert done.returncode == 3 and "refusing to mark it successful" in one_line(done)
    finally:
        holder.kill()
        holder.communicate(timeout=20)


def test_every_operator_action_is_audited(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d", "FooBackfillJob|1d"])
    assert cli.run("--audit").stdout == "no operator actions recorded\n"
    cli.run("--pause", "basic-job", "--reason", "incident 7")
    cli.run("--resume", "basic-job")
    cli.run("--job", "basic-job", "--force", "--reason", "check the fix")
    cli.run("--job", "foo-backfill")
    cli.run(
        "--rerun", "foo-backfill", "--reason", "test", "--date", f"{crontab.now() - DAY:%Y-%m-%d}"
    )
    cli.run("--mark-success", "basic-job", "--reason", "test")
    assert cli.run("--release", "basic-job", "--reason", "test").stdout.endswith(
        "nothing to release\n"
    )  # not audited
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp(), heartbeat = clock_timestamp(),"
        " ongoing_by = %s WHERE app_name = 'basic-job'",
        (f"{socket.gethostname()}:999999",),
    )
    assert "released the marker" in cli.run("--release", "basic-job", "--reason", "test").stdout
    cli.run("--reset-job", "basic-job", "--reason", "start over")
    entries = json.loads(cli.run("--audit", "--json").stdout)
    assert [(e["action"], e["job"]) for e in entries] == [
        ("reset", "basic-job"),
        ("release", "basic-job"),
        ("mark-success", "basic-job"),
        ("rerun", "foo-backfill"),  # its end
        ("rerun", "foo-backfill"),  # its start
        ("force", "basic-job"),
        ("force", "basic-job"),
        ("resume", "basic-job"),
        ("pause", "basic-job"),
    ]
    assert all(e["actor"] == ME for e in entries)
    assert entries[0]["reason"] == "start over" and entries[-1]["reason"] == "incident 7"
    assert entries[4]["detail"]["dates"] and entries[-1]["detail"]["until"]
    assert [entries[n]["detail"]["outcome"] for n in (3, 4, 5, 6)] == [
        "done",
        "started",
        "done",
        "started",
    ]
    rows = crontab.sql("SELECT count(*) AS n FROM crontabber_audit")
    assert rows[0]["n"] == len(entries)
    out = cli.run("--audit", "--audit-job", "foo-backfill").stdout.splitlines()
    assert len(out) == 2 and f"{ME} (db: {crontab.database.user})  rerun foo-backfill" in out[0]
    assert len(cli.run("--audit", "--limit", "2").stdout.splitlines()) == 2


def test_a_rerun_range_is_listed_by_dry_run_and_a_long_one_needs_yes(cli):
    """A typo of 2025 for 2026 reran 692 days and wrote 692 reports (issue #23 section 3):
    --dry-run lists the intervals and runs nothing; more than rerun_confirm_over (31 by
    default) is refused without --yes, naming the count and the range."""
    crontab = cli.crontab
    days = backfilled(cli, days=40)
    calls = len(crontab.calls("foo-backfill"))
    first, last = days[0].astimezone(dt.timezone.utc), days[-1].astimezone(dt.timezone.utc)
    dry = cli.run(
        "--rerun",
        "foo-backfill",
        "--reason",
        "test",
        "--date",
        f"{first:%Y-%m-%d}",
        "--to",
        f"{last:%Y-%m-%d}",
        "--dry-run",
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == "foo-backfill: --rerun would run 40 interval(s), oldest first (nothing ran):"
    assert len(lines) == 41 and lines[1] == f"  {first:%Y-%m-%d %H:%M} UTC"
    refused = cli.run(
        "--rerun",
        "foo-backfill",
        "--reason",
        "test",
        "--date",
        f"{first:%Y-%m-%d}",
        "--to",
        f"{last:%Y-%m-%d}",
    )
    assert refused.returncode == 1
    assert (
        f"40 intervals of foo-backfill ({first:%Y-%m-%d} to {last:%Y-%m-%d}) is more than "
        "rerun_confirm_over (31); check the dates (--dry-run lists them) and add --yes"
    ) in refused.stderr
    assert len(crontab.calls("foo-backfill")) == calls  # neither ran anything
    done = cli.run(
        "--rerun",
        "foo-backfill",
        "--reason",
        "test",
        "--date",
        f"{first:%Y-%m-%d}",
        "--to",
        f"{last:%Y-%m-%d}",
        "--yes",
    )
    assert done.returncode == 0 and len(crontab.calls("foo-backfill")) == calls + 40
    assert cli.run("--list-jobs", "--yes").returncode == 1  # --yes belongs to --rerun
