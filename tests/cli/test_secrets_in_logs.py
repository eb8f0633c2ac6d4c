"""No secret reaches the output at --logging.level=DEBUG (issue #24 items 2 and 11): a
password on the command line, an Elasticsearch URL with user:password, the S3 secret key."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.fixtures.prune_buckets import buckets, configure_prune  # noqa: F401 - the fixture
from tests.helpers import REPO, job_command, put_many, resetting_server

PASSWORD = "Wr0ng-Pass-4242"


def test_a_job_command_at_debug_never_prints_a_password_given_on_its_command_line(cli, buckets):
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    done = job_command(
        cli,
        "jobs.prune",
        "--logging.level=DEBUG",
        "history",
        f"--resource.postgresql.password={PASSWORD}",
    )
    assert done.returncode == 1, done  # the wrong password: the database refuses it
    # PostgreSQL's words, or PgBouncer's (the pooled lane)
    assert (
        "password authentication failed" in done.stderr
        or "SASL authentication failed" in done.stderr
    ), done.stderr
    output = done.stdout + done.stderr
    assert PASSWORD not in output, [line for line in output.splitlines() if PASSWORD in line][:3]


def test_a_job_command_at_debug_on_real_s3_prints_no_secret_key(cli, buckets):  # noqa: F811
    inbox, symbols = buckets
    configure_prune(cli, inbox, symbols)
    put_many(symbols, ["reports/missing-symbols/1.csv"])
    done = job_command(cli, "jobs.prune", "--logging.level=DEBUG", "run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert " DEBUG botocore" in done.stderr  # the wire logging is on: the test means something
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    assert secret not in done.stdout + done.stderr


def test_the_runner_at_debug_never_prints_elasticsearch_credentials(cli):
    """A reset connection at DEBUG: the failure line, the client's logs and the stored error
    drop the URL's password (it was printed as ``Elasticsearch at http://elastic:PASSWORD@``)."""
    secret = "Es-Secret-7788"
    with resetting_server() as port:
        url = f"http://elastic:{secret}@127.0.0.1:{port}"
        cli.crontab.configure(
            ["jobs.search_index.RebuildSearchIndexCronApp|1h"],
            extra=(f"    [[class-RebuildSearchIndexCronApp]]\n        es_url={url}\n"),
        )
        done = cli.run("--job", "rebuild-search-index", "--logging.level=DEBUG")
    assert done.returncode == 5, done.stderr[-2000:]
    assert f"Elasticsearch at http://127.0.0.1:{port}: connection reset" in done.stdout
    output = done.stdout + done.stderr
    assert secret not in output, [line for line in output.splitlines() if secret in line][:3]
    state = cli.crontab.state("rebuild-search-index")
    assert secret not in repr(state.last_error)
