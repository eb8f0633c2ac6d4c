"""A pause stops the jobs' own data-changing commands too (issue #23 section 3):
``python -m jobs.prune run`` deleted objects while prune-s3 was paused, with no warning and no
audit entry. Now it refuses (exit 6, naming the pause) unless --force, and --audit has both."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fixtures.prune_buckets import buckets, configure_prune, wait_past_retention
from tests.helpers import job_command, keys_in, put_many


def test_prune_run_refuses_while_prune_s3_is_paused_unless_forced(cli, buckets):  # noqa: F811
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    doomed = [f"reports/missing-symbols/{i}.csv" for i in range(5)]
    put_many(symbols, doomed + ["keep/me"])
    assert (
        cli.run("--pause", "prune-s3", "--reason", "S3 incident INC-7", "--until", "2h").returncode
        == 0
    )
    refused = job_command(cli, "jobs.prune", "run")
    assert refused.returncode == 6, refused.stderr
    assert "refusing to run 'python -m jobs.prune run': paused until" in refused.stderr
    assert "S3 incident INC-7" in refused.stderr and "--force" in refused.stderr
    assert keys_in(symbols) >= set(doomed)  # nothing deleted
    assert job_command(cli, "jobs.prune", "run", "--dry-run").returncode == 0  # deletes nothing
    wait_past_retention(cli, symbols, doomed)
    forced = job_command(cli, "jobs.prune", "run", "--force", "--reason", "INC-7 cleanup")
    assert forced.returncode == 0, forced.stderr
    assert not keys_in(symbols) & set(doomed)
    audit = cli.run("--audit", "--json")
    assert audit.returncode == 0
    entries = [e for e in json.loads(audit.stdout) if e["action"] == "command"]
    assert [(e["detail"]["outcome"], e["detail"]["force"], e["reason"]) for e in entries] == [
        ("done", True, "INC-7 cleanup"),
        ("refused (exit 6)", False, None),
    ]  # newest first
    assert all(e["detail"]["command"] == "python -m jobs.prune run" for e in entries)


def test_uploads_drain_refuses_while_process_uploads_is_paused(cli, buckets):  # noqa: F811
    inbox, symbols = buckets
    cli.crontab.configure(
        ["jobs.uploads.ProcessUploadsCronApp|5m"],
        extra=(
            f"    [[class-ProcessUploadsCronApp]]\n        inbox_bucket={inbox}\n        "
            f"symbols_bucket={symbols}\n"
        ),
    )
    assert cli.run("--pause", "process-uploads", "--reason", "bad release").returncode == 0
    done = job_command(cli, "jobs.uploads", "drain")
    assert done.returncode == 6 and "paused until" in done.stderr, done.stderr
    assert job_command(cli, "jobs.uploads", "drain", "--force", "--reason", "test").returncode == 0
