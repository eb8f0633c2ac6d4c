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
    code = ("import sys, search.server, search.cli, search.engine, search.indexer;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('crontabber', 'jobs')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
