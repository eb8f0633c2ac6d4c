"""Every command of docs/operations.md (the 3 a.m. runbook), run in the
order the document gives, against a real PostgreSQL holding the state the
runbook describes, with the repository's crontabber.ini. A command is a line
``$ python -m crontabber ...`` (or ``python -m jobs.X ...``) in a code block; ``# exit N`` after it
is the
exit code expected (0 otherwise)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys

from crontabber.config.catalog import load_jobs
from crontabber.config.settings import load_settings
from tests.helpers import ENV, REPO

RUNBOOK = REPO / "docs" / "operations.md"
COMMAND = re.compile(
    r"^\$ (python -m (?:crontabber|jobs\.\w+)[^#]*?)\s*(?:#\s*(?:exit (\d+))?.*)?$"
)


def commands() -> list[tuple[str, int]]:
    found, in_block = [], False
    for line in RUNBOOK.read_text().splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        match = COMMAND.match(line) if in_block else None
        if match:
            found.append((match.group(1), int(match.group(2) or 0)))
    return found


def seed(crontab) -> None:
    """The runbook's situation: every job ran a while ago and is not due, except
    prune-s3, failing twice in a row; process-uploads left by a runner that died;
    rebuild-search-index running on another host right now."""
    from crontabber.config.catalog import load_jobs
    from crontabber.config.settings import load_settings

    for job in load_jobs(load_settings(str(crontab.ini), {}, {})):
        crontab.sql(
            "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success,"
            " error_count, depends_on, last_error) VALUES (%s, now() + interval '1 hour',"
            " now() - interval '3 days', now() - interval '1 hour', now() - interval '1 hour',"
            " 0, %s, '{}')",
            (job.app_name, list(job.depends_on)),
        )
    error = {
        "type": "<class 'botocore.exceptions.EndpointConnectionError'>",
        "value": 'Could not connect to the endpoint URL: "http://s3.internal:9000/symbols"',
        "traceback": '  File "jobs/prune/runs.py", line 80, in run\n    ...\n',
    }
    crontab.sql(
        "UPDATE crontabber SET error_count = 2, last_error = %s, last_success = now() -"
        " interval '2 days', next_run = now() + interval '5 minutes'"
        " WHERE app_name = 'prune-s3'",
        (json.dumps(error),),
    )
    crontab.sql(
        "INSERT INTO crontabber_log (app_name, duration, exc_type, exc_value, exc_traceback,"
        " run_id, host, pid) VALUES ('prune-s3', interval '2 seconds', %s, %s, %s, 41,"
        " 'cron-1', 2211)",
        (error["type"], f"EndpointConnectionError({error['value']!r})", error["traceback"]),
    )
    crontab.sql(
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat,"
        " ended, status, error, output) VALUES (41, 'prune-s3', 'scheduled', 'cron-1', 2211,"
        " now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour',"
        " 'failed', %s, %s)",
        (
            f"EndpointConnectionError: {error['value']}",
            "2026-11-25 02:59:58,101 INFO jobs.prune - prune: rule 'old-uploads' listing\n"
            "2026-11-25 02:59:59,920 ERROR crontabber.supervisor - prune-s3 failed: "
            "EndpointConnectionError\n",
        ),
    )
    crontab.sql(
        "UPDATE crontabber SET ongoing = now() - interval '10 minutes', heartbeat = now() -"
        " interval '10 minutes', ongoing_by = 'cron-2:31337', run_id = 42, next_run = now() -"
        " interval '10 minutes' WHERE app_name = 'process-uploads'"
    )
    crontab.sql(
        "UPDATE crontabber SET ongoing = now() - interval '5 minutes', heartbeat = now(),"
        " ongoing_by = 'cron-3:4242', run_id = 43 WHERE app_name = 'rebuild-search-index'"
    )
    # an upload rejected an hour ago, one done, one waiting; a prune run that failed
    crontab.sql(
        "INSERT INTO upload (id, inbox_key, filename, size, uploaded_by, status, attempts,"
        " error, files_total, created_at, claimed_at, claimed_by, completed_at) VALUES"
        " (7001, 'inbox/2026/11/23/ab12/firefox-symbols.zip', 'firefox-symbols.zip', 81234,"
        " 'ci@example.com', 'failed', 1, 'rejected: member ''../evil.sym'': a path outside"
        " the archive', NULL, now() - interval '1 hour', now() - interval '59 minutes',"
        " 'cron-1:2211', now() - interval '59 minutes'),"
        " (7002, 'inbox/2026/11/23/cd34/thunderbird.zip', 'thunderbird.zip', 4096, NULL,"
        " 'done', 1, NULL, 12, now() - interval '30 minutes', now() - interval '29 minutes',"
        " 'cron-2:31337', now() - interval '28 minutes'),"
        " (7003, 'inbox/2026/11/23/ef56/fenix.zip', 'fenix.zip', 2048, NULL, 'pending', 0,"
        " NULL, NULL, now() - interval '2 minutes', NULL, NULL, NULL)"
    )
    crontab.sql(
        "UPDATE upload SET files_uploaded = 10, files_skipped = 2, files_ignored = 0 WHERE id = "
        "7002"
    )
    crontab.sql(
        "INSERT INTO prune_run (dry_run, cap, holder, started_at, finished_at, error)"
        " VALUES (false, 100000, 'cron-1:2211', now() - interval '1 day',"
        " now() - interval '1 day' + interval '3 seconds', %s)",
        ("S3 at http://s3.internal:9000: connection refused",),
    )
    # cron-2 has ticked (the runbook drains it for a kernel patch)
    crontab.sql(
        "INSERT INTO crontabber_host (host, version, last_tick, skew_seconds) VALUES ('cron-2', "
        "'test', now(), 0)"
    )


def test_every_runbook_command_runs_as_documented(cli, s3_bucket, tmp_path):
    steps = commands()
    assert len(steps) >= 15
    shutil.copy(REPO / "crontabber.ini", tmp_path / "crontabber.ini")
    cli.crontab.ini = tmp_path / "crontabber.ini"
    seed(cli.crontab)
    env = {**ENV, **cli.env}
    for name in (
        "CLASS_PRUNES3CRONAPP_INBOX_BUCKET",
        "CLASS_PRUNES3CRONAPP_SYMBOLS_BUCKET",
        "CLASS_MISSINGSYMBOLSREPORTCRONAPP_SYMBOLS_BUCKET",
    ):
        env[f"CRONTABBER_{name}"] = s3_bucket  # the test's own bucket, not the shared ones
    for command, expected in steps:
        argv = [sys.executable, *shlex.split(command)[1:]]
        done = subprocess.run(
            argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == expected, (command, done.stdout, done.stderr)
        shown = done.stderr if "--show-error" in command else done.stdout + done.stderr
        if (
            command.startswith(
                "python -m crontabber --rerun missing-symbols-report --date 2026-11-19 --to "
                "2026-11-25"
            )
            and "--dry-run" in command
        ):
            assert len([line for line in done.stdout.splitlines() if "reports/" in line]) == 7, (
                done.stdout
            )
        if command.startswith("python -m crontabber --history missing-symbols-report"):
            # the week, one line, as the days reported (called for 19th-25th)
            assert "2026-11-18..2026-11-24 (7)" in done.stdout, done.stdout
        if command.startswith("python -m crontabber --logs prune-s3"):
            assert "prune-s3 run 41 (scheduled) on cron-1:2211" in done.stdout
            assert "rule 'old-uploads' listing" in done.stdout
        assert "Traceback" not in shown, (command, done.stderr)  # --show-error prints one
    audit = cli.crontab.sql("SELECT action, app_name FROM crontabber_audit ORDER BY id")
    configured = [job.app_name for job in load_jobs(load_settings(str(cli.crontab.ini), {}, {}))]
    assert [(a["action"], a["app_name"]) for a in audit] == [
        ("force", "prune-s3"),
        ("force", "prune-s3"),  # its start, its end
        ("release", "process-uploads"),
        ("reset", "rebuild-search-index"),
        ("release", "rebuild-search-index"),  # refused, exit 3
        *(("rerun", "missing-symbols-report"),) * 4,  # a day; a week: each its start, its end
        ("pause", "prune-s3"),
        ("resume", "prune-s3"),
        ("mute", "*"),
        ("unmute", "*"),
        *(("pause", name) for name in configured),
        *(("resume", name) for name in configured),
        ("drain", "host:cron-2"),
        ("undrain", "host:cron-2"),
    ]
