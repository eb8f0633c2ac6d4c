"""--list-jobs, --history and --show-error through the real entry point:
exit codes, stdout/stderr, the width in a pipe and in a wide terminal."""

import fcntl
import json
import os
import pty
import struct
import subprocess
import termios

from tests.fixtures.inspect_states import realistic_fleet
from tests.helpers import REPO


def test_help_lists_the_inspection_commands(cli):
    cli.crontab.configure(["FooJob|1d"])
    done = cli.run("--help")
    for text in (
        "--list-jobs [NAME ...]",
        "--history NAME",
        "--show-error NAME",
        "--wide",
        "--limit N",
        "--run ID",
    ):
        assert text in done.stdout, text


def test_list_jobs_in_a_pipe_fits_100_columns_and_filters(cli):
    realistic_fleet(cli.crontab)
    done = cli.run("--list-jobs")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and done.stderr == "" and len(lines) == 9
    assert lines[-1] == f"database: {cli.crontab.database.target}", lines[-1]
    assert max(map(len, lines)) <= 100 and any(len(line) == 100 for line in lines)
    done = cli.run("--list-jobs", "prune-s3", "process-uploads")
    assert [line.split()[:3] for line in done.stdout.splitlines()[1:-1]] == [
        ["process-uploads", "5m", "running"],
        ["prune-s3", "1d@05:00", "paused"],
    ]
    done = cli.run("--list-jobs", "prune-s4")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(
        "crontabber: no configured job is called 'prune-s4'; configured: "
    )
    assert done.stderr.count("\n") == 1


def test_list_jobs_uses_a_wider_terminal(cli):
    realistic_fleet(cli.crontab)
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    env = {key: value for key, value in cli.env.items() if key not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        cli.argv("--list-jobs"), env=env, cwd=REPO, stdout=secondary, stderr=subprocess.PIPE
    )
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    _, err = proc.communicate(timeout=60)  # its stderr pipe closed here
    os.close(primary)
    assert proc.returncode == 0, err
    lines = output.decode().splitlines()
    widest = max(map(len, lines))
    assert 100 < widest <= 160, lines
    assert any(
        "symbols-cron-1" in line and line.rstrip().endswith("beat 1h ago, symbols-cron-1")
        for line in lines
    )


def test_json_documents_of_the_three_commands(cli):
    cli.crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    cli.run()
    done = cli.run("--list-jobs", "--json")
    document = json.loads(done.stdout)
    assert done.returncode == 0 and [job["status"] for job in document["jobs"]] == ["failing", "ok"]
    done = cli.run("--history", "trouble", "--json")
    runs = json.loads(done.stdout)["runs"]
    row = cli.crontab.log("trouble")[0]
    assert [(run["run_id"], run["outcome"]) for run in runs] == [(row["run_id"], "failed")]
    done = cli.run("--show-error", "trouble", "--json")
    failure = json.loads(done.stdout)["failure"]
    assert failure["run_id"] == row["run_id"] and failure["error"]["value"] == "Trouble!!"


def test_show_error_text_and_refusals(cli):
    cli.crontab.configure(["TroubleJob|1d"])
    cli.run()
    done = cli.run("--show-error", "trouble")
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    # the traceback, then the end of what the run logged (its one ERROR line)
    end = lines.index("NameError: Trouble!!", 2)
    assert lines[end - 1 : end + 1] == ['    raise NameError("Trouble!!")', "NameError: Trouble!!"]
    assert (
        lines[end + 2].startswith("--- the last line of what run ")
        and "trouble failed" in lines[-1]
    )
    done = cli.run("--show-error", "trouble", "--run", "424242")
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "trouble: no run 424242 in the run log" in done.stderr
    done = cli.run("--history", "trouble", "--limit", "0")
    assert done.returncode == 1 and "--limit: must be a number of runs, 1 or more" in done.stderr
    done = cli.run("--wide")
    assert done.returncode == 1 and "--wide: only means something with --list-jobs" in done.stderr
    assert "Traceback" not in done.stderr
