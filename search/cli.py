"""``python -m search TEXT``: search from a terminal and print a table."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import NoReturn, TextIO

from .engine import BadQuery, SearchResult, SearchUnavailable

# The runner's exit codes (crontabber.command.ExitCode: one table for every command), which
# search does not import; tests/unit/test_search_errors.py checks they agree.
EXIT_OK = 0  # found or not
EXIT_ERROR = 1  # a bad argument or query
EXIT_FAILED = 5  # the work ran and failed: Elasticsearch unavailable, the index missing
EXIT_PIPE_CLOSED = 141  # the reader of the output went away (| head)


class SearchParser(argparse.ArgumentParser):
    """argparse's, exiting 1 on a mistake and naming the closest option to a misspelled one
    (as the runner's ``crontabber.parsing.CommandParser``, which search does not import)."""

    def error(self, message: str) -> NoReturn:
        """argparse exits 2, which the runner's table keeps for "locked": exit 1."""
        if message.startswith("unrecognized arguments: "):
            known = [
                flag
                for action in self._actions
                for flag in action.option_strings
                if flag.startswith("--")
            ]
            for word in message.split(": ", 1)[1].split():
                found = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
                if word.startswith("--") and found:
                    message += f" (did you mean {found[0]}?)"
                    break
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


COLUMNS = ("score", "debug_file", "debug_id", "filename", "code_file", "code_id", "matched")


def print_results(result: SearchResult, out: TextIO) -> None:
    """Write ``result`` as the search terms, then an aligned table of hits."""
    terms = ", ".join(f"{term} ({score:g})" for score, term in result.terms)
    print(f"query: {result.query}   terms: {terms or '-'}", file=out)
    print(f"{result.total} found, showing {len(result.hits)}", file=out)
    if not result.hits:
        return
    rows = [COLUMNS] + [
        (
            f"{h.score:.2f}",
            h.debug_file,
            h.debug_id,
            h.filename,
            h.code_file or "-",
            h.code_id or "-",
            h.matched,
        )
        for h in result.hits
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip(), file=out)


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    """Exit codes (the runner's table): 0 found or not, 1 a bad argument or query, 5
    Elasticsearch unavailable or the index missing (the line names its address)."""
    parser = SearchParser(prog="python -m search", description="search symbol files")
    parser.add_argument(
        "query", nargs="+", help="what to look for; several words are one query (quotes optional)"
    )
    parser.add_argument("--size", type=int, default=10, help="hits to show (1-100, default 10)")
    parser.add_argument("--alias", default=None, help="default: $SEARCH_ALIAS, else symbols")
    parser.add_argument(
        "--es-url",
        default=None,
        help="a URL, or a cluster's nodes' URLs comma-separated (default: $ES_URL)",
    )
    args = parser.parse_args(argv)
    from .client import es_url, make_es_client, public_url
    from .engine import Searcher
    from .errors import NoElasticsearchAddress

    try:
        url = es_url(args.es_url)
    except NoElasticsearchAddress as exc:
        print(f"search: {exc}", file=stderr)
        return EXIT_ERROR
    searcher = Searcher(make_es_client(url, request_timeout=10), args.alias)
    try:
        print_results(searcher.search(" ".join(args.query), args.size), stdout)
    except BadQuery as exc:
        print(f"search: {exc}", file=stderr)
        return EXIT_ERROR
    except SearchUnavailable as exc:
        print(f"search: {exc} (Elasticsearch at {public_url(url)})", file=stderr)
        return EXIT_FAILED
    return EXIT_OK
