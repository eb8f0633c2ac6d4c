"""``python -m jobs.uploads`` and the job under ``python -m crontabber``, as subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.uploads_archives import symbol_members, write_zip
from tests.fixtures.uploads_queue import uploads  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def run(uploads, tmp_path):
    ini = tmp_path / "crontabber.ini"
    ini.write_text(
        "[crontabber]\n    jobs='''\n    jobs.uploads.ProcessUploadsCronApp|5m\n    '''\n"
        "    [[class-ProcessUploadsCronApp]]\n"
        f"        inbox_bucket={uploads.bucket}\n        symbols_bucket={uploads.bucket}\n"
        "        concurrency=2\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RESOURCE_POSTGRESQL_DBNAME": uploads.database.dbname,
    }

    def run(module: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", module, f"--admin.conf={ini}", *args],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


def test_enqueue_prints_the_id_and_the_cron_job_publishes_it(run, uploads, tmp_path):
    archive = write_zip(tmp_path / "a.zip", symbol_members(2, 2000))
    done = run("jobs.uploads", "enqueue", str(archive), "--uploaded-by", "ci@example.com")
    assert done.returncode == 0, done.stderr
    upload_id = int(done.stdout.strip())
    row = uploads.row(upload_id)
    assert (row["status"], row["uploaded_by"], row["filename"], row["size"]) == (
        "pending",
        "ci@example.com",
        "a.zip",
        archive.stat().st_size,
    )
    assert row["inbox_key"].startswith("inbox/") and row["inbox_key"].endswith("/a.zip")
    tick = run("crontabber", "--job", "process-uploads")
    assert tick.returncode == 0, tick.stdout + tick.stderr
    assert uploads.row(upload_id)["status"] == "done" and len(uploads.keys()) == 2
    # the run's metrics (issue #34 item 3): what --logs, the metrics file and the checks read
    logs = run("crontabber", "--logs", "process-uploads")
    assert "metrics: files_published=2 uploads_done=1 uploads_not_done=0" in logs.stdout, (
        logs.stdout
    )


def test_reprocess_off_a_terminal_prints_one_line_and_no_progress_bar(run, uploads, tmp_path):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(2, 2000)))
    done = run("jobs.uploads", "reprocess", str(upload_id))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"upload {upload_id}: done (2 uploaded, 0 skipped, 0 ignored)\n"
    assert done.stderr == ""
    again = run("jobs.uploads", "reprocess", str(upload_id))
    assert again.stdout == f"upload {upload_id}: done (2 uploaded, 0 skipped, 0 ignored)\n"
    assert uploads.row(upload_id)["attempts"] == 2


def test_reprocess_of_a_rejected_upload_exits_5_with_the_reason(run, uploads, tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    upload_id = uploads.enqueue(bad)
    done = run("jobs.uploads", "reprocess", str(upload_id))
    assert done.returncode == 5 and "not a zip archive" in done.stdout  # the runner's "failed"


def test_reprocess_of_an_unknown_id_exits_1(run):
    done = run("jobs.uploads", "reprocess", "999999")
    assert done.returncode == 1
    assert done.stderr.startswith("python -m jobs.uploads: upload 999999 does not exist")
    assert done.stderr.count("\n") == 1


def test_demo_twice_queues_once(run, uploads):
    first = run("jobs.uploads", "demo")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("\tqueued") == 3
    second = run("jobs.uploads", "demo")
    assert second.stdout.count("already queued") == 3
    drained = run("jobs.uploads", "drain")
    assert drained.stdout.count("\tdone") == 3, drained.stdout + drained.stderr
    assert len(uploads.keys()) == 6


def test_reprocess_on_a_terminal_shows_a_progress_bar(uploads, tmp_path):
    import pty

    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(3, 2000)))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RESOURCE_POSTGRESQL_DBNAME": uploads.database.dbname,
    }
    options = [
        f"--crontabber.class-ProcessUploadsCronApp.{name}={uploads.bucket}"
        for name in ("inbox_bucket", "symbols_bucket")
    ]
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "jobs.uploads", "reprocess", str(upload_id), *options],
            env=env,
            cwd=REPO,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    bar = [line for line in done.stderr.replace("\r", "\n").splitlines() if line.strip()]
    # each of the 3 members counted once, against a total, with tqdm's elapsed<ETA
    assert bar[-1].startswith("verify+publish: 100%|") and "| 3/3 [" in bar[-1], done.stderr
    assert "<" in bar[-1].split("[", 1)[1], bar[-1]


def test_enqueue_of_a_missing_file_says_so_and_exits_1(run, uploads, tmp_path):
    missing = tmp_path / "nonexistent.zip"
    done = run("jobs.uploads", "enqueue", str(missing))
    assert done.returncode == 1
    assert done.stderr == f"python -m jobs.uploads: {missing}: no such file\n"
    assert "S3" not in done.stderr and done.stdout == ""


def test_enqueue_of_a_file_that_is_not_a_zip_says_so_and_exits_1(run, uploads, tmp_path):
    text = tmp_path / "notes.zip"
    text.write_text("hello")
    done = run("jobs.uploads", "enqueue", str(text))
    assert done.returncode == 1
    assert done.stderr == f"python -m jobs.uploads: {text}: not a zip archive\n"
    assert uploads.keys() == []


def test_help_shows_the_runners_exit_codes(run):
    done = run("jobs.uploads", "--help")
    assert done.returncode == 0 and "5 the work ran and failed" in " ".join(done.stdout.split())


def test_list_shows_the_newest_first_with_status_files_size_key_and_one_line_error(
    run, uploads, tmp_path
):
    good = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(2, 2000)))
    bad_zip = tmp_path / "bad.zip"
    bad_zip.write_bytes(b"not a zip")
    bad = uploads.enqueue(bad_zip)
    waiting = uploads.enqueue(write_zip(tmp_path / "c.zip", symbol_members(1, 100)))
    assert run("jobs.uploads", "reprocess", str(good)).returncode == 0
    assert run("jobs.uploads", "reprocess", str(bad)).returncode == 5
    uploads.sql("UPDATE upload SET error = 'line one\nline two' WHERE id = %s", (waiting,))
    done = run("jobs.uploads", "list")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "AGE", "FILES", "SIZE", "KEY", "ERROR"]
    assert [row.split()[:2] for row in rows] == [
        [str(waiting), "pending"],
        [str(bad), "failed"],
        [str(good), "done"],
    ]
    assert rows[2].split()[3] == "2" and rows[2].endswith(" -")  # 2 files, no error
    assert "not a zip archive" in rows[1] and rows[0].endswith("line one line two")
    assert uploads.row(good)["inbox_key"] in rows[2]
    failed = run("jobs.uploads", "list", "--status", "failed", "--limit", "5")
    assert [row.split()[0] for row in failed.stdout.splitlines()[1:]] == [str(bad)]
    assert len(run("jobs.uploads", "list", "--limit", "1").stdout.splitlines()) == 2


def test_list_json_and_an_empty_list(run, uploads, tmp_path):
    import json

    assert run("jobs.uploads", "list").stdout == "no uploads\n"
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(2, 2000)))
    run("jobs.uploads", "reprocess", str(upload_id))
    done = run("jobs.uploads", "list", "--json")
    [item] = json.loads(done.stdout)
    assert (item["id"], item["status"], item["files"]["total"], item["error"]) == (
        upload_id,
        "done",
        2,
        None,
    )
    assert item["created_at"].endswith("Z") and item["duration_seconds"] >= 0
    assert run("jobs.uploads", "list", "--status", "done", "--json").stdout.count('"id"') == 1


def test_list_refuses_a_bad_status_or_limit_in_one_line(run):
    for args in (["--status", "stuck"], ["--limit", "0"]):
        done = run("jobs.uploads", "list", *args)
        assert done.returncode == 1, done
        assert done.stderr.startswith("python -m jobs.uploads: ") and done.stderr.count("\n") == 1


def test_show_gives_the_files_error_and_timings(run, uploads, tmp_path):
    import json

    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(3, 2000)))
    assert run("jobs.uploads", "reprocess", str(upload_id)).returncode == 0
    done = run("jobs.uploads", "show", str(upload_id), "--files", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"upload {upload_id}: done (attempt 1)"
    text = "\n".join(lines)
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert re.search(rf"^  queued     {stamp} \(\d+s ago\)$", text, re.M), text
    assert re.search(rf"^  completed  {stamp} \(\d+s after it was queued\)$", text, re.M), text
    assert (
        "  files      3 in the archive, 3 uploaded, 0 already there, 0 ignored; 3 written so far"
        in lines
    )
    assert "  error      -" in lines
    assert "(the first 2 of 3, in key order; --files N for more)" in text
    keys = sorted(f["key"] for f in uploads.files(upload_id))
    assert [
        line.split()[0]
        for line in lines
        if line.startswith("    ") and not line.startswith("      ")
    ] == keys[:2]
    assert sum(line.startswith("      code id ") for line in lines) == 2  # INFO CODE_ID
    as_json = json.loads(run("jobs.uploads", "show", str(upload_id), "--json").stdout)
    assert as_json["files_written"] == 3 and [f["key"] for f in as_json["written"]] == keys
    assert as_json["completed_at"].endswith("Z")


def test_show_of_a_failed_upload_gives_its_error(run, uploads, tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    upload_id = uploads.enqueue(bad)
    run("jobs.uploads", "reprocess", str(upload_id))
    lines = run("jobs.uploads", "show", str(upload_id)).stdout.splitlines()
    assert lines[0] == f"upload {upload_id}: failed (attempt 1)"
    assert any(
        line.startswith("  error      rejected: ") and "not a zip archive" in line for line in lines
    ), lines


def test_show_of_an_unknown_id_is_one_line_and_exit_1(run):
    done = run("jobs.uploads", "show", "999999")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "python -m jobs.uploads: upload 999999 does not exist (python -m jobs.uploads list shows "
        "the latest)\n"
    )


def test_drain_on_a_terminal_counts_each_upload_once_with_a_total(uploads, tmp_path):
    import pty

    for name in ("a", "b", "c"):
        uploads.enqueue(write_zip(tmp_path / f"{name}.zip", symbol_members(2, 500)))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RESOURCE_POSTGRESQL_DBNAME": uploads.database.dbname,
    }
    options = [
        f"--crontabber.class-ProcessUploadsCronApp.{name}={uploads.bucket}"
        for name in ("inbox_bucket", "symbols_bucket")
    ]
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "jobs.uploads", "drain", *options],
            env=env,
            cwd=REPO,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    bar = [line for line in done.stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert bar[-1].startswith("drain: 100%|") and "| 3/3 [" in bar[-1], done.stderr
    assert "<" in bar[-1].split("[", 1)[1], bar[-1]  # elapsed<ETA
    assert all("/3 [" in line for line in bar), bar  # the total from the start


def test_list_and_show_escape_control_characters_from_the_uploader(run, uploads, tmp_path):
    """A file name and a member name holding ESC and BEL reach the terminal escaped; the
    inbox key gets a safe name."""
    hostile = tmp_path / "a\x1b[2J\x07\u202e.zip"
    write_zip(
        hostile, [("a\x1b]0;pwned\x07.pdb/ABABABABABABABABABABABABABABABAB1/a.sym", b"MODULE x\n")]
    )
    done = run("jobs.uploads", "enqueue", str(hostile))
    assert done.returncode == 0, done.stderr
    upload_id = int(done.stdout.strip())
    row = uploads.row(upload_id)
    assert row["filename"] == hostile.name and row["inbox_key"].endswith("/a__2J__.zip")
    run("jobs.uploads", "reprocess", str(upload_id))
    shown = {
        args: run("jobs.uploads", *args).stdout for args in (("list",), ("show", str(upload_id)))
    }
    for out in shown.values():
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, out
        assert "a\\x1b]0;pwned\\x07.pdb" in out, out  # the rejection's member name
    assert "(a\\x1b[2J\\x07\\u202e.zip, " in shown[("show", str(upload_id))]


def test_show_names_what_a_replaced_file_held(run, uploads, tmp_path):
    """Issue #33: every replacement records the previous object's MD5, size and upload, and
    ``show`` says them."""
    from tests.fixtures.uploads_archives import sym_text
    from tests.fixtures.uploads_queue import md5

    ident = "44E4EC8C2F41492B9369D6B9A059577C2"
    name = f"xul.pdb/{ident}/xul.sym"
    first_text, second_text = (sym_text("xul.pdb", ident, 3000, seed) for seed in (1, 2))
    first = uploads.enqueue(write_zip(tmp_path / "1.zip", [(name, first_text)]))
    assert run("jobs.uploads", "reprocess", str(first)).returncode == 0
    second = uploads.enqueue(write_zip(tmp_path / "2.zip", [(name, second_text)]))
    assert run("jobs.uploads", "reprocess", str(second)).returncode == 0
    shown = run("jobs.uploads", "show", str(second))
    assert shown.returncode == 0, shown.stderr
    assert f"    v1/{name}  " in shown.stdout and "  replaced" in shown.stdout
    assert f"      replaced the file of upload {first} (" in shown.stdout
    assert f"MD5 {md5(first_text)})" in shown.stdout
    assert f"      code id {ident[:16]} (xul.pdb)" in shown.stdout


def test_a_bad_overwrite_rule_is_one_line(run, uploads, tmp_path):
    ini = tmp_path / "crontabber.ini"
    ini.write_text(ini.read_text() + "        overwrite=keep-last\n")
    done = run("jobs.uploads", "drain")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "'keep-last' is not one of replace, keep-first, versioned" in done.stderr, done.stderr


def test_enqueue_whose_row_is_lost_leaves_no_archive_in_the_inbox(run, uploads, tmp_path):
    # issue #44, P10: the database lost between storing the archive and writing its row (a
    # failover); a trigger ends the session in the middle of the INSERT, as a dying server
    uploads.sql(
        "CREATE FUNCTION test_lose_session() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$;"
        " CREATE TRIGGER test_lose_session BEFORE INSERT ON upload"
        " FOR EACH ROW EXECUTE FUNCTION test_lose_session()"
    )
    archive = write_zip(tmp_path / "a.zip", symbol_members(1, 100))
    done = run("jobs.uploads", "enqueue", str(archive))
    assert done.returncode == 5, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "python -m jobs.uploads: nothing queued: the upload row was not written (PostgreSQL"
    ), line
    assert re.search(r"the archive stored at s3://\S+/inbox/\S+/a\.zip was deleted again", line)
    inbox = uploads.client.list_objects_v2(Bucket=uploads.bucket, Prefix="inbox/")
    assert inbox.get("KeyCount", 0) == 0, inbox.get("Contents")  # no orphan archive
    assert uploads.sql("SELECT count(*) AS n FROM upload") == [{"n": 0}]
    uploads.sql("DROP TRIGGER test_lose_session ON upload")
    done = run("jobs.uploads", "enqueue", str(archive))  # the operator runs it again
    assert done.returncode == 0, done.stderr
    assert uploads.row(int(done.stdout))["status"] == "pending"
