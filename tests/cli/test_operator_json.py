"""Leftovers of on-call trial 4 (#16; issue #32, item 15) through the real entry point against
the real PostgreSQL: ``--explain --json`` has the last error and the retry time;
``--pause``/``--resume`` honour ``--json``; ``--explain`` of a running job does not also say
it is waiting ("due since"); counts are words ("1 time", never "time(s)"); the runner's INFO
lines print times as the commands do."""

from __future__ import annotations

import json
import re
import signal

from tests.fixtures.waiting import wait_for
from tests.helpers import ok


def test_explain_json_has_the_last_error_and_the_retry_time(cli):
    cli.crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    ok(cli.run())
    facts = json.loads(ok(cli.run("--explain", "trouble", "--json")).stdout)
    assert facts["error_count"] == 1
    assert (
        facts["last_error"]["type"] == "NameError" and facts["last_error"]["value"] == "Trouble!!"
    )
    assert "Traceback" in facts["last_error"]["traceback"] or facts["last_error"]["traceback"]
    assert facts["retry_at"] == facts["next_run"] and facts["retry_at"].endswith("Z")
    text = ok(cli.run("--explain", "trouble")).stdout
    assert "failed 1 time in a row (last: NameError: Trouble!!); error backoff: retry at " in text
    healthy = json.loads(ok(cli.run("--explain", "basic-job", "--json")).stdout)
    assert healthy["last_error"] is None and healthy["retry_at"] is None


def test_pause_and_resume_answer_in_json(cli):
    cli.crontab.configure(["BasicJob|1d", "FooJob|1d"])
    paused = json.loads(ok(cli.run("--pause", "basic-job", "--reason", "INC-1", "--json")).stdout)
    assert paused["name"] == "basic-job" and paused["reason"] == "INC-1"
    assert paused["paused_until"].endswith("Z") and paused["running"] is None
    every = json.loads(ok(cli.run("--pause", "all", "--reason", "maintenance", "--json")).stdout)
    assert every["paused"] == ["foo"] and list(every["kept"]) == ["basic-job"]
    assert every["kept"]["basic-job"]["reason"] == "INC-1"
    resumed = json.loads(ok(cli.run("--resume", "basic-job", "--json")).stdout)
    assert resumed == {
        "name": "basic-job",
        "resumed": True,
        "was": {**resumed["was"], "reason": "INC-1"},
    }
    again = json.loads(ok(cli.run("--resume", "basic-job", "--json")).stdout)
    assert again == {"name": "basic-job", "resumed": False, "was": None}
    rest = json.loads(ok(cli.run("--resume", "all", "--json")).stdout)
    assert list(rest["resumed"]) == ["foo"] and rest["resumed"]["foo"]["reason"] == "maintenance"


def test_explain_of_a_running_job_does_not_say_due_since(cli):
    crontab = cli.crontab
    crontab.configure(["SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=0\n")
    ok(cli.run())  # a first run: next_run set
    crontab.configure(["SlowJob|1d"], extra="    [[class-SlowJob]]\n        sleep=60\n")
    crontab.sql(
        "UPDATE crontabber SET next_run = now() - interval '1 minute' WHERE app_name = 'slow-job'"
    )
    holder = cli.spawn()
    try:
        wait_for(lambda: len(crontab.calls("slow-job")) == 2)
        out = ok(cli.run("--explain", "slow-job")).stdout
        assert "running: " in out and "due since" not in out, out
        assert "the run going now is the one due at " in out
    finally:
        holder.kill()
        holder.communicate(timeout=20)


def test_the_runners_info_lines_print_utc_times_not_raw_datetimes(cli):
    """Trial #16: ``succeeded for 2026-11-19 00:30:00+00:00`` was Python's repr of a time."""
    cli.crontab.configure(["FooBackfillJob|1d"])
    done = ok(cli.run("--job", "foo-backfill", "--force", "--reason", "a test"))
    lines = [line for line in (done.stdout + done.stderr).splitlines() if " succeeded for " in line]
    assert lines, done.stdout + done.stderr
    assert all(
        re.search(r" succeeded for \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", line) for line in lines
    ), lines
    assert "+00:00" not in "".join(lines)


def test_list_jobs_says_when_a_running_jobs_beats_are_missing(cli):
    """Trial #16: for the 60-120 s between a host's death and its lease's end, --list-jobs said
    ``running ... beat 1m ago`` with no hint that the beats had stopped."""
    crontab = cli.crontab
    # Beats 1.5 s apart: "missed" needs two (3 s), which a loaded machine does not delay a
    # live runner by (at 0.3 s, 0.6 s late under load read as two beats missed).
    crontab.configure(
        ["SlowJob|1d"],
        extra=(
            "    heartbeat_seconds=1.5\n    lease_seconds=600\n    [[class-SlowJob]]\n        "
            "sleep=60\n"
        ),
    )
    holder = cli.spawn()
    try:
        wait_for(lambda: crontab.calls("slow-job"))
        assert "beats missed" not in ok(cli.run("--list-jobs")).stdout
        holder.send_signal(signal.SIGSTOP)  # a host that stopped answering: no more beats
        wait_for(lambda: "beats missed" in cli.run("--list-jobs").stdout)
        (row,) = [
            line
            for line in ok(cli.run("--list-jobs")).stdout.splitlines()
            if line.startswith("slow-job")
        ]
        assert " running " in row and re.search(r", beat [^;]+; \d+ beats missed", row), row
        assert " beats missed: taken over after " in ok(cli.run("--list-jobs", "--wide")).stdout
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.communicate(timeout=20)
