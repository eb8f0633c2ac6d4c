"""search/errors.py: the search package's own error tree (issue #17)."""

import subprocess
import sys
from pathlib import Path

from crontabber.errors import CrontabberError
from search.errors import BadQuery, RebuildFailed, SearchError, SearchUnavailable, UpdateFailed

REPO = Path(__file__).resolve().parent.parent.parent


def test_search_errors_are_one_tree_outside_the_runners():
    for error in (BadQuery, SearchUnavailable, RebuildFailed, UpdateFailed):
        assert issubclass(error, SearchError)
    assert not issubclass(SearchError, CrontabberError)
    assert str(SearchUnavailable("symbols", "down")) == "search unavailable (symbols): down"


def test_the_http_service_does_not_import_the_cron_runner():
    code = (
        "import sys, search.server, search.cli, search.engine, search.indexer;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('crontabber', 'jobs')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_the_search_cli_uses_the_runners_exit_codes():
    from crontabber.command import ExitCode
    from search import cli

    assert (cli.EXIT_OK, cli.EXIT_ERROR, cli.EXIT_FAILED, cli.EXIT_PIPE_CLOSED) == (
        ExitCode.OK,
        ExitCode.ERROR,
        ExitCode.JOB_FAILED,
        ExitCode.PIPE_CLOSED,
    )


def test_an_address_printed_drops_user_password_path_and_query():
    from crontabber.failures import _base
    from search.client import public_url

    cases = {
        "http://elastic:s3cret@es.example:9200/x?api_key=k": "http://es.example:9200",
        "https://user@[::1]:9201": "https://[::1]:9201",
        "http://127.0.0.1:9201": "http://127.0.0.1:9201",
        "https://s3.example": "https://s3.example",
        "not a url": "not a url",
        "http://u:p@es1:9200, https://es2:9200/x": "http://es1:9200,https://es2:9200",
    }
    for url, expected in cases.items():
        assert public_url(url) == expected == _base(url), url
