"""The missing-symbols job and commands as real processes: kills around the commit,
``python -m jobs.missing_symbols write`` and ``demo``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from jobs.missing_symbols.consume import PAUSE_ENV, PAUSE_FILE_ENV
from tests.fixtures.missing_symbols_data import (
    AGGREGATE,
    brute_force,
    entries,
    ini,
    table_totals,
    write_random,
)
from tests.helpers import REPO, s3_client


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def other_sessions(crontab):
    return crontab.sql(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> "
        "pg_backend_pid()"
    )[0]["n"]


@pytest.mark.parametrize("point, recorded", [("before_commit", 0), ("after_commit", 2)])
def test_a_runner_killed_around_the_commit_leaves_exact_totals_after_a_rerun(
    cli, s3_bucket, tmp_path, point, recorded
):
    written = write_random(s3_bucket, (300, 10, 200, 50, 400))
    cli.crontab.configure(
        entries(f"{AGGREGATE}|5m"), extra=ini(s3_bucket, workers=2, per_transaction=2)
    )
    marker = tmp_path / "paused"
    env = {**cli.env, PAUSE_ENV: point, PAUSE_FILE_ENV: str(marker)}
    proc = subprocess.Popen(
        cli.argv("--job=missing-symbols"),
        env=env,
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(marker.exists)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its decoding workers
        proc.wait(10)
    wait_for(lambda: other_sessions(cli.crontab) == 0)  # the server saw the dead client
    rows = cli.crontab.sql("SELECT count(*) AS n FROM missing_symbol_batch")
    assert rows == [{"n": recorded}]
    assert (
        cli.run("--reset-job=missing-symbols", "--reason=test").returncode == 0
    )  # the operator clears it
    try:
        done = cli.run("--job=missing-symbols", timeout=30)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the rerun hung; its stderr:\n{exc.stderr.decode()}")
    assert done.returncode == 0, done.stderr
    assert cli.crontab.state("missing-symbols").error_count == 0
    assert table_totals(cli.crontab) == brute_force(written)
    assert cli.crontab.sql("SELECT count(*) AS n FROM missing_symbol_batch") == [{"n": 5}]


def test_runners_started_together_count_every_batch_once(cli, s3_bucket):
    """Four hosts' cron ticks at once: the job's row lock lets one consume (the others
    exit 2 or 3, or run after it and find nothing new); totals are exact."""
    written = write_random(s3_bucket, [120] * 12)
    cli.crontab.configure(
        entries(f"{AGGREGATE}|5m"), extra=ini(s3_bucket, workers=2, per_transaction=3)
    )
    procs = [cli.spawn("--job=missing-symbols", "--force") for _ in range(4)]
    errors = [proc.communicate(timeout=60)[1] for proc in procs]
    codes = sorted(proc.returncode for proc in procs)
    assert codes[0] == 0 and set(codes) <= {0, 2, 3}, codes
    assert not [e for e in errors if "Traceback" in e], errors  # the worker pool ends quietly
    assert table_totals(cli.crontab) == brute_force(written)
    assert cli.crontab.sql("SELECT count(*) AS n FROM missing_symbol_batch") == [{"n": 12}]


def command(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "jobs.missing_symbols", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_write_command_writes_a_batch_from_json_lines_that_the_job_counts(cli, s3_bucket, tmp_path):
    events = [
        {"debug_file": "a.pdb", "debug_id": "A" * 33, "count": 2},
        {
            "debug_file": "b.pdb",
            "debug_id": "B" * 33,
            "code_file": "b.dll",
            "code_id": "C0DE",
            "seen_at": "2026-11-20T10:00:00Z",
        },
    ]
    source = tmp_path / "events.jsonl"
    source.write_text("\n".join(json.dumps(e) for e in events) + "\n\n")
    done = command("write", str(source), "--bucket", s3_bucket)
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert key.startswith("missing/") and key.endswith(".msgpack")
    cli.crontab.configure(entries(f"{AGGREGATE}|5m"), extra=ini(s3_bucket, workers=2))
    assert cli.run().returncode == 0
    assert table_totals(cli.crontab)[0] == {
        ("a.pdb", "A" * 33, "", ""): 2,
        ("b.pdb", "B" * 33, "b.dll", "C0DE"): 1,
    }


def test_write_command_rejects_a_bad_json_line(s3_bucket, tmp_path):
    source = tmp_path / "events.jsonl"
    source.write_text('{"debug_file": "a.pdb"}\n{nope\n')
    done = command("write", str(source), "--bucket", s3_bucket)
    assert done.returncode == 1
    assert f"{source}:2: not JSON" in done.stderr and done.stdout == ""


def test_demo_creates_the_bucket_and_writes_two_batches():
    bucket = f"test-demo-{uuid.uuid4().hex[:12]}"
    done = command("demo", "--bucket", bucket)
    s3 = s3_client()
    try:
        assert done.returncode == 0, done.stderr
        keys = done.stdout.split()
        assert len(keys) == 2
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="missing/")["Contents"]
        assert sorted(o["Key"] for o in listed) == sorted(keys)
    finally:
        for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=obj["Key"])
        s3.delete_bucket(Bucket=bucket)


def test_write_takes_the_jobs_bucket_from_the_ini_and_the_runners_overrides(s3_bucket, tmp_path):
    source = tmp_path / "events.jsonl"
    source.write_text(json.dumps({"debug_file": "a.pdb", "debug_id": "A" * 33}) + "\n")
    ini = tmp_path / "crontabber.ini"
    ini.write_text(
        "[crontabber]\n    jobs='''\n    jobs.missing_symbols.MissingSymbolsCronApp|5m\n"
        "    '''\n    [[class-MissingSymbolsCronApp]]\n"
        f"        inbox_bucket={s3_bucket}\n        prefix=from-ini/\n"
    )
    done = command(f"--admin.conf={ini}", "write", str(source))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("from-ini/")
    done = command(
        "write",
        str(source),
        f"--admin.conf={ini}",
        "--crontabber.class-MissingSymbolsCronApp.prefix=overridden/",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("overridden/")
    listed = s3_client().list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert sorted(o["Key"].split("/")[0] for o in listed) == ["from-ini", "overridden"]


def test_mistakes_are_one_line_with_the_shared_exit_codes(s3_bucket, tmp_path):
    missing = tmp_path / "nope.jsonl"
    cases = [
        (("write", str(missing), "--bucket", s3_bucket), 1, f"{missing}: no such file"),
        (("write",), 1, "the following arguments are required: file"),
        (("write", str(missing), "stray"), 1, "unrecognized argument 'stray'"),
        (("demo", "--logging.level=LOUD"), 1, "'LOUD' is not a log level"),
        (
            ("demo", "--crontabber.class-MissingSymbolsCronApp.prefx=p/"),
            1,
            "no such option; did you mean --crontabber.class-MissingSymbolsCronApp.prefix?",
        ),
    ]
    for args, code, message in cases:
        done = command(*args)
        assert done.returncode == code, (args, done)
        assert done.stderr.startswith("python -m jobs.missing_symbols: "), (args, done.stderr)
        assert message in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)


@pytest.mark.slow  # ~25 s: botocore retries an S3 that is down
def test_s3_down_is_one_line_naming_it_and_exit_5(tmp_path):
    source = tmp_path / "events.jsonl"
    source.write_text(json.dumps({"debug_file": "a.pdb", "debug_id": "A" * 33}) + "\n")
    done = command("write", str(source), env={"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"})
    assert done.returncode == 5, done
    assert done.stderr == (
        "python -m jobs.missing_symbols: S3 at http://127.0.0.1:9: connection refused\n"
    )


def test_help_shows_the_one_exit_code_table():
    done = command("--help")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "exit codes (one table for every command): 0 ok" in text
    assert "5 the work ran and failed" in text and "--crontabber.class-CLASS.OPTION=VALUE" in text
