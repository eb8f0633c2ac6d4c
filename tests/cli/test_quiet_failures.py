"""A job that fails because a service is down says so in one line naming the
service and its address; the traceback goes to crontabber_log (and Sentry, and
the DEBUG log), not to the terminal (issue #13)."""

import contextlib
import socket
import struct
import threading

from tests.helpers import resetting_server


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_elasticsearch_down_is_one_line_naming_it(cli):
    port = closed_port()
    cli.crontab.configure(
        ["jobs.search_index.RebuildSearchIndexCronApp|1h"],
        extra=(
            f"    [[class-RebuildSearchIndexCronApp]]\n        es_url=http://127.0.0.1:{port}\n"
        ),
    )
    done = cli.run("--job", "rebuild-search-index")
    assert done.returncode == 5
    expected = f"Elasticsearch at http://127.0.0.1:{port}: connection refused"
    assert done.stdout == f"rebuild-search-index: failed: {expected}\n"
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line or " WARNING " in line]
    # the client's retry warnings stay (without tracebacks); ours is the one line
    ours = [line for line in errors if " elastic_transport." not in line]
    assert len(ours) == 1 and expected in ours[0], done.stderr
    assert len(done.stderr.splitlines()) <= 12, done.stderr
    state = cli.crontab.state("rebuild-search-index")
    assert "Traceback" not in state.last_error["traceback"]  # the frames, as crontabber keeps them
    assert "File " in state.last_error["traceback"]
    # issue #42 item 11: the same one line everywhere, never the client's nested repr
    shown = {
        "--list-jobs": cli.run("--list-jobs", "--wide").stdout,  # LAST ERROR column in full
        "--explain": cli.run("--explain", "rebuild-search-index").stdout,
        "--history --json": cli.run("--history", "rebuild-search-index", "--json").stdout,
        "--nagios": "\n".join(
            cli.run("--nagios").stdout.splitlines()[1:]
        ),  # crontabber's status line first
        "--explain --json": cli.run("--explain", "rebuild-search-index", "--json").stdout,
    }
    for command, text in shown.items():
        assert expected in text, (command, text)
        if "--json" not in command:  # the JSON keeps the raw value beside its summary
            assert "NewConnectionError" not in text and "<class" not in text, (command, text)


def test_elasticsearch_resetting_connections_is_one_line_naming_it(cli):
    """A reset carries no address in the client's exceptions (found by the fault suite
    when Elasticsearch was stopped mid-rebuild): the line still names it."""
    with resetting_server() as port:
        cli.crontab.configure(
            ["jobs.search_index.RebuildSearchIndexCronApp|1h"],
            extra=(
                f"    [[class-RebuildSearchIndexCronApp]]\n        es_url=http://127.0.0.1:{port}\n"
            ),
        )
        done = cli.run("--job", "rebuild-search-index")
    assert done.returncode == 5, done.stderr
    expected = f"Elasticsearch at http://127.0.0.1:{port}: connection reset by peer"
    assert done.stdout == f"rebuild-search-index: failed: {expected}\n", done.stderr
    assert "Traceback" not in done.stderr


def test_s3_down_is_one_line_naming_it(cli):
    port = closed_port()
    cli.env["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{port}"
    cli.crontab.configure(["jobs.missing_symbols.MissingSymbolsCronApp|5m"])
    done = cli.run("--job", "missing-symbols")
    assert done.returncode == 5, done.stderr
    assert (
        done.stdout
        == f"missing-symbols: failed: S3 at http://127.0.0.1:{port}: connection refused\n"
    )
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 12, done.stderr


def test_a_debug_log_keeps_the_traceback(cli):
    cli.crontab.configure(["TroubleJob|1d"])
    done = cli.run("--job", "trouble", "--logging.level=DEBUG")
    assert done.returncode == 5 and "Traceback" in done.stderr
    quiet = cli.run("--job", "trouble", "--force")
    assert "Traceback" not in quiet.stderr
