"""The search package's one exception tree.

Search is an HTTP service of its own: it does not depend on the cron runner,
so its errors do not derive from ``crontabber.errors.CrontabberError``. The
jobs that drive it (``jobs/search_index.py``) let these propagate; the runner
records any exception a job raises. Each error carries its data as attributes
and builds its own one-line message.
"""

from __future__ import annotations


class SearchError(Exception):
    """Base of every error the search package raises on purpose."""


class BadQuery(SearchError):
    """The query or the size is not acceptable (an HTTP 400)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class NoElasticsearchAddress(SearchError):
    """No Elasticsearch address was given (no URL, no ``ES_URL``): there is no default, so a
    production host never reaches a development Elasticsearch by accident."""

    def __init__(self, hint: str = "set ES_URL") -> None:
        self.hint = hint
        super().__init__(
            f"no Elasticsearch address: {hint} (a URL, or a cluster's nodes' URLs, comma-separated)"
        )


class SearchUnavailable(SearchError):
    """Elasticsearch is unreachable or the index is missing (an HTTP 503)."""

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"search unavailable ({target}): {reason}")


class RebuildFailed(SearchError):
    """A new index could not be built; it was deleted and the alias did not move."""

    def __init__(self, index: str, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(f"search index {index} not built ({reason}); the alias did not move")


class UpdateFailed(SearchError):
    """Documents of an incremental update were rejected by Elasticsearch; the
    caller's watermark must not move (the next update retries them)."""

    def __init__(self, index: str, failed: int, first: str) -> None:
        self.index = index
        self.failed = failed
        self.first = first
        super().__init__(f"search index {index}: {failed} documents rejected, first: {first}")
