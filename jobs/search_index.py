"""Rebuild the symbol search index from PostgreSQL (issue #6).

Every run builds a new versioned Elasticsearch index from the upload and
missing-symbol tables and moves the search alias to it; see
``search.indexer`` for the build and ``docs/search.md`` for the design.
Elasticsearch and the ``search`` package are imported inside ``run()``: an
idle cron tick must not pay for them.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Iterator

from crontabber import queries
from crontabber.base import BaseCronApp
from crontabber.errors import CrontabberError
from crontabber.mixins import using_postgres
from crontabber.options import Namespace

if TYPE_CHECKING:
    from search.documents import SymbolRow

logger = logging.getLogger(__name__)


class SearchSourceError(CrontabberError):
    """The symbol-file query failed (a missing table, a lost connection...)."""

    def __init__(self, query: str, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"search index source query {query!r} failed: {reason}")


class SymbolFileStore:
    """Reads the symbol files to index (``sql/search_index.sql``), streaming
    them through a server-side cursor so memory stays bounded."""

    def __init__(self, connection: Any, itersize: int = 10000) -> None:
        self.connection = connection
        self.itersize = itersize

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[tuple[int, Iterator["SymbolRow"]]]:
        """``(count, rows)`` from one read-only snapshot; the transaction ends
        (rolled back: it only read) when the block exits.

        Raises:
            SearchSourceError: a query failed (also while ``rows`` is iterated).
        """
        sql = queries.load("search_index.sql")
        conn = self.connection
        try:
            with self._translated("count_symbol_files"), conn.cursor() as cur:
                cur.execute(sql["snapshot"])
                cur.execute(sql["count_symbol_files"])
                count = int(cur.fetchone()[0])
            cursor = conn.cursor(name="search_index_symbol_files")
            cursor.itersize = self.itersize
            with self._translated("symbol_files"):
                cursor.execute(sql["symbol_files"])
            yield count, self._rows(cursor)
        finally:
            conn.rollback()

    def _rows(self, cursor: Any) -> Iterator["SymbolRow"]:
        from search.documents import SymbolRow

        with self._translated("symbol_files"):
            for row in cursor:
                yield SymbolRow.from_row(row)

    @staticmethod
    @contextlib.contextmanager
    def _translated(query: str) -> Iterator[None]:
        import psycopg2

        try:
            yield
        except psycopg2.Error as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise SearchSourceError(query, reason) from None


@using_postgres()
class RebuildSearchIndexCronApp(BaseCronApp):
    """Build ``<alias>-<UTC timestamp>`` from PostgreSQL, then move ``alias`` to it.

    A failed or partial build never takes the alias; its index is deleted.
    """

    app_name = "rebuild-search-index"
    app_description = "rebuild the symbol search index in Elasticsearch and swap its alias"
    app_version = "1.0"
    required_config = Namespace()
    required_config.add_option("es_url", default="", doc="Elasticsearch URL (default: $ES_URL)")
    required_config.add_option("alias", default="symbols", doc="the alias searches read")
    required_config.add_option("keep", default=2, doc="versioned indices kept (the alias's included)")
    required_config.add_option("chunk_size", default=5000, doc="documents per bulk request")
    required_config.add_option("threads", default=2, doc="bulk requests in flight")
    required_config.add_option("itersize", default=10000, doc="rows fetched per server-side cursor round trip")

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> None:
        from search.client import make_es_client
        from search.indexer import BulkSettings, rebuild

        config = self.config
        es = make_es_client(config.es_url or None, request_timeout=120)
        bulk = BulkSettings(chunk_size=int(config.chunk_size), threads=int(config.threads))
        with self.database_connection_factory() as connection:
            with SymbolFileStore(connection, int(config.itersize)).snapshot() as (count, rows):
                result = rebuild(es, config.alias, rows, count, keep=int(config.keep), bulk=bulk)
        logger.info(
            "rebuild-search-index: %s holds %d documents (%.1f s); alias %s moved from %s; deleted %s",
            result.index, result.documents, result.seconds, config.alias,
            ", ".join(result.previous) or "nothing", ", ".join(result.deleted) or "nothing",
            extra={"app_name": self.app_name},
        )
