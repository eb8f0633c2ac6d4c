"""``python -m search`` and ``python -m search.server`` as subprocesses."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.fixtures.search_data import corpus_index  # noqa: F401 - the fixture
from tests.helpers import ENV

REPO = Path(__file__).resolve().parent.parent.parent


def env(alias):
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ES_URL": ENV.get("ES_URL", ""),
        "SEARCH_ALIAS": alias,
    }


def search(alias, *args):
    return subprocess.run(
        [sys.executable, "-m", "search", *args],
        env=env(alias),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cli_prints_a_table(corpus_index):  # noqa: F811
    done = search(corpus_index[0], "firefix", "--size", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "query: firefix   terms: firefix (1.1), firefox (0.8571)"
    assert lines[2].split() == [
        "score",
        "debug_file",
        "debug_id",
        "filename",
        "code_file",
        "code_id",
        "matched",
    ]
    assert len(lines) == 5 and lines[3].split()[1].startswith("firefox.")
    assert lines[3].split()[-1] == "firefox"


def test_the_cli_exit_codes(corpus_index):  # noqa: F811
    """The runner's table (issue #23): a bad query is 1 (2 means "locked"), Elasticsearch
    unavailable is 5, and the line names its address without the password."""
    done = search(corpus_index[0], "")
    assert (done.returncode, done.stderr) == (1, "search: the query is empty\n")
    assert search(corpus_index[0]).returncode == 1  # argparse's own error: 2 otherwise
    done = search(corpus_index[0], "\ufb2c" * 170)  # 510 characters once normalised
    assert (done.returncode, done.stderr) == (
        1,
        "search: the query is longer than 200 characters (after Unicode normalisation)\n",
    )
    done = search(corpus_index[0], "xul", "--es-url", "http://elastic:s3cret@127.0.0.1:9")
    assert done.returncode == 5 and "Elasticsearch unreachable" in done.stderr
    assert "(Elasticsearch at http://127.0.0.1:9)" in done.stderr
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_server_serves_until_terminated(corpus_index):  # noqa: F811
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.server", "--port", str(port)],
        env=env(corpus_index[0]),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        body = None
        for _ in range(100):
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/search?q=xlu.pdb&size=1", timeout=10
                ) as response:
                    body = json.load(response)
                break
            except OSError:
                time.sleep(0.1)
        assert body is not None and body["hits"][0]["debug_file"] == "xul.pdb"
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_the_server_logs_one_line_per_request_with_elasticsearch_down():
    """Three searches with Elasticsearch unreachable (a closed port): per request
    the 503's warning and the access line, not the client's request lines and
    retry tracebacks (356-514 lines before)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.server", "--port", str(port)],
        env={**env("symbols"), "ES_URL": "http://127.0.0.1:9"},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        statuses = []
        while len(statuses) < 3:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/search?q=xul", timeout=30)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
            except OSError:
                time.sleep(0.1)  # not listening yet
        assert statuses == [503, 503, 503]
        # the access line is written after the response is sent
        deadline = time.monotonic() + 10
        while sum("search.access" in line for line in lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # anything else it would write about these requests
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        reader.join(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
    assert "serving on" in lines[0] and len(lines) == 7, "".join(lines)
    assert sum(" INFO search.access: GET /search 503 " in line for line in lines) == 3
    assert (
        sum(
            " WARNING search.server: search unavailable (symbols): Elasticsearch unreachable"
            in line
            for line in lines
        )
        == 3
    )


def test_the_cli_takes_several_words_and_says_what_an_option_was_meant(corpus_index):  # noqa: F811
    """Trial #16: ``python -m search xul mozglue`` was an argparse error; ``--prot`` got no
    "did you mean"; ``python -m search.server --help`` showed RST backticks and no help or
    default for --host and --port."""
    alias = corpus_index[0]
    done = search(alias, "xul", "mozglue", "--size", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("query: xul mozglue   terms: ")
    assert done.stdout == search(alias, "xul mozglue", "--size", "3").stdout
    done = search(alias, "xul", "--sizee", "3")
    assert done.returncode == 1
    assert done.stderr.endswith("unrecognized arguments: --sizee 3 (did you mean --size?)\n")
    server = [sys.executable, "-m", "search.server"]
    done = subprocess.run(
        [*server, "--help"], env=env(alias), cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "``" not in done.stdout
    assert "(default 127.0.0.1)" in done.stdout and "(default 8000;" in done.stdout
    done = subprocess.run(
        [*server, "--prot", "1"],
        env=env(alias),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "(did you mean --port?)" in done.stderr
