"""jobs.prune from the command line: the operator command, the runner's --job, a kill."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.fixtures.prune_buckets import LEASE, buckets, configure_prune, prune_cmd
from tests.helpers import REPO, keys_in, put_many, s3_client


def test_dry_run_then_run_then_history(cli, buckets):
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    put_many(symbols, [f"reports/missing-symbols/{i}.csv" for i in range(3)] + ["v1/a/1/a.sym"])
    time.sleep(1.2)
    dry = prune_cmd(cli, "run", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "reports: would delete 3 keys, 30 bytes, 0 errors" in dry.stdout
    assert len(keys_in(symbols)) == 4
    done = cli.run("--job", "prune-s3", "--force")
    assert done.returncode == 0, done.stderr
    assert keys_in(symbols) == {"v1/a/1/a.sym"}
    history = prune_cmd(cli, "history")
    lines = history.stdout.splitlines()
    assert any(
        line.startswith("#2 run") and "reports: 3 keys, 30 bytes, 0 errors" in line
        for line in lines
    )
    assert any(line.startswith("#1 dry run") and "reports: 3 keys" in line for line in lines)
    # one UTC format for the start and the end (the end was Python's default str before)
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert all(re.match(rf"#\d+ (dry )?run {stamp} -> {stamp}: ", line) for line in lines), lines


def test_cap_from_the_command_line_says_so(cli, buckets):
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    put_many(symbols, [f"reports/missing-symbols/{i}.csv" for i in range(5)])
    time.sleep(1.2)
    done = prune_cmd(cli, "run", "--cap", "2")
    assert "stopped at the cap of 2 keys" in done.stdout
    assert len(keys_in(symbols)) == 3


def test_the_runners_overrides_are_accepted(cli, buckets):
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    put_many(symbols, [f"reports/missing-symbols/{i}.csv" for i in range(5)])
    time.sleep(1.2)
    done = prune_cmd(cli, "run", "--crontabber.class-PruneS3CronApp.cap=2")
    assert done.returncode == 0, done.stderr
    assert "stopped at the cap of 2 keys" in done.stdout
    assert len(keys_in(symbols)) == 3


def test_a_bad_argument_is_one_line_and_exit_1(cli, buckets):
    configure_prune(cli, *buckets)
    done = prune_cmd(cli, "history", "stray")
    assert done.returncode == 1
    assert done.stderr.startswith("python -m jobs.prune: ") and done.stderr.count("\n") == 1


@pytest.mark.slow  # ~15 s: a kill drill
def test_killed_midway_then_rerun_deletes_the_rest_and_nothing_else(cli, buckets):
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols, threads=1)
    doomed = [f"reports/missing-symbols/{i:05d}.csv" for i in range(3000)]
    put_many(symbols, doomed + ["v1/keep/1/keep.sym", "keep/me"])
    time.sleep(1.2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.prune", f"--admin.conf={cli.crontab.ini}", "run"],
        env=cli.env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = cli.crontab.sql("SELECT coalesce(sum(keys_deleted), 0) AS n FROM prune_rule_result")
        if rows and rows[0]["n"] > 0:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    left = keys_in(symbols)
    assert len(left) > 2, "the run finished before the kill"
    assert cli.crontab.sql("SELECT finished_at FROM prune_run")[0]["finished_at"] is None
    time.sleep(LEASE + 0.2)  # the killed run's lease passes: it is dead
    assert prune_cmd(cli, "run").returncode == 0
    assert keys_in(symbols) == {"v1/keep/1/keep.sym", "keep/me"}
    assert "unfinished (killed?)" in prune_cmd(cli, "history").stdout


@pytest.mark.slow  # ~22 s: a kill drill
def test_killed_right_after_a_batch_is_deleted_the_audit_still_equals_what_is_gone(cli, buckets):
    """kill -9 as soon as S3 shows a second batch gone (observed from outside: a HEAD of its
    last key answers 404), before the run can write it down; after the next run, each run's
    record equals what it deleted (issue #15)."""
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols, threads=1)
    doomed = [f"reports/missing-symbols/{i:05d}.csv" for i in range(6000)]
    put_many(symbols, doomed + ["keep/me"])
    time.sleep(1.2)
    client = s3_client()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobs.prune", f"--admin.conf={cli.crontab.ini}", "run"],
        env=cli.env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:  # the last key of the second batch (keys are deleted in listing order)
            client.head_object(Bucket=symbols, Key=doomed[1999])
        except client.exceptions.ClientError:
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    # S3 finishes a DeleteObjects whose client died (s3proxy deletes its keys one by one): count
    # what is gone once the listing has stopped changing, or the audit seems short by the rest
    gone, settled = set(doomed) - keys_in(symbols), time.monotonic() + 30
    while time.monotonic() < settled:
        time.sleep(0.5)
        now_gone = set(doomed) - keys_in(symbols)
        if now_gone == gone:
            break
        gone = now_gone
    assert 2000 <= len(gone) < 6000, "the kill missed"
    recorded = cli.crontab.sql("SELECT coalesce(sum(keys_deleted), 0) AS n FROM prune_rule_result")
    # how often the kill lands before the batch is counted (informative: the audit must hold either
    # way)
    print(f"killed with {len(gone)} keys gone, {recorded[0]['n']} recorded")
    time.sleep(LEASE + 0.2)  # the killed run's lease passes: the next run reconciles it
    assert prune_cmd(cli, "run").returncode == 0
    assert keys_in(symbols) == {"keep/me"}
    audit = cli.crontab.sql(
        "SELECT run_id, sum(keys_deleted) AS keys, sum(bytes_freed) AS bytes"
        " FROM prune_rule_result GROUP BY run_id ORDER BY run_id"
    )
    assert [(r["keys"], r["bytes"]) for r in audit] == [
        (len(gone), 10 * len(gone)),
        (6000 - len(gone), 10 * (6000 - len(gone))),
    ]
    assert "unfinished (killed?)" in prune_cmd(cli, "history").stdout


def test_progress_bar_on_a_terminal_only(cli, buckets):
    import os
    import pty

    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    put_many(symbols, [f"reports/missing-symbols/{i}.csv" for i in range(3)])
    time.sleep(1.2)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        cli.argv("--job", "prune-s3", "--force"),
        env=cli.env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=60) == 0
    os.close(leader)
    assert b"prune: " in seen and b"3key" in seen.replace(b" ", b"")
    put_many(symbols, [f"reports/missing-symbols/{i}.csv" for i in range(3)])
    time.sleep(1.2)
    piped = cli.run("--job", "prune-s3", "--force")
    assert piped.returncode == 0 and "key/s" not in piped.stderr and "it/s" not in piped.stderr


def test_a_failed_run_exits_5_in_one_line_and_history_shows_its_error(cli, buckets):
    inbox, _ = buckets
    missing = f"test-gone-{uuid.uuid4().hex[:12]}"
    configure_prune(cli, inbox, missing, upload_days=0, batch_days=0)
    done = prune_cmd(cli, "run")
    assert done.returncode == 5, done
    # the failure names the resource (issue #23)
    assert done.stderr.startswith(f"python -m jobs.prune: S3 (bucket {missing}): ")
    assert "NoSuchBucket" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert cli.run("--job", "prune-s3").returncode == 5  # the cron job's run fails the same way
    lines = prune_cmd(cli, "history").stdout.splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert len(lines) == 2 and "unfinished" not in "".join(lines), lines
    for line in lines:
        assert re.match(
            rf"#\d+ run {stamp} -> failed {stamp} \(S3 \(bucket {missing}\): .*NoSuchBucket.*\): "
            r"reports: 0 keys",
            line,
        ), line
