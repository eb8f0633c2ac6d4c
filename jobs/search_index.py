"""The symbol search index's two jobs.

- ``rebuild-search-index`` (hourly): builds a new versioned Elasticsearch index
  from the upload and missing-symbol tables and moves the search alias to it.
  It is the source of truth.
- ``index-new-uploads`` (every 5 minutes): adds the symbol files of uploads
  finished since its watermark to the index the alias points to, so a new
  upload is searchable within minutes instead of after the next rebuild.

See ``search.indexer`` for the Elasticsearch side and ``docs/search.md`` for
the design. Both jobs let the ``search`` package's errors
(``search.errors.SearchError``) propagate: the runner records any exception.
Elasticsearch and the ``search`` package are imported inside ``run()``: an
idle cron tick must not pay for them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools

from crontabber import sqlfiles
from crontabber.base import BaseCronApp, Summary
from crontabber.config.options import DotDict, Namespace
from crontabber.errors import ConfigurationError, CrontabberError
from crontabber.formats import utc_text
from crontabber.frozen import Frozen
from crontabber.mixins import using_postgres
from jobs import SQL_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

    from search.documents import SymbolRow
    from search.indexer import BulkSettings, LiveIndex, RebuildResult, Replicas


class SearchSourceError(CrontabberError):
    """The symbol-file query failed (a missing table, a lost connection...)."""

    def __init__(self, query: str, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"search index source query {query!r} failed: {reason}")


class Snapshot(Frozen):
    """The source of a rebuild: every symbol file, streamed by ``rows`` (plain tuples in
    ``SymbolRow``'s order), as of ``as_of`` (the database time no later than the snapshot).
    No count comes first: the rebuild checks Elasticsearch's count against the rows it read,
    all from this one snapshot (a count query of the same snapshot could not differ, and
    cost a second aggregation of the uploads before the first document was sent)."""

    rows: Iterator[SymbolRow]
    as_of: dt.datetime


class Window(Frozen):
    """The source of an incremental update: the symbol files of uploads
    finished after ``since``, read in a snapshot no earlier than ``as_of``."""

    since: dt.datetime | None
    rows: Iterator[SymbolRow]
    as_of: dt.datetime


class Watermark(Frozen):
    """``index_name`` holds every upload finished up to ``indexed_to`` (less
    the incremental job's overlap)."""

    index_name: str
    indexed_to: dt.datetime


class SymbolFileStore:
    """Every query of the search-index jobs (``sql/jobs/search_index.sql``): the
    symbol files to index, streamed through a server-side cursor so memory
    stays bounded, and the incremental job's watermark."""

    def __init__(self, connection: Any, itersize: int = 10000) -> None:
        self.connection = connection
        self.itersize = itersize

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """Every symbol file, from one read-only snapshot; the transaction ends
        (rolled back: it only read) when the block exits.

        Raises:
            SearchSourceError: a query failed (also while ``rows`` is iterated).
        """
        sql = sqlfiles.load("search_index.sql", SQL_DIR)
        conn = self.connection
        try:
            with self._translated("snapshot"), conn.cursor() as cur:
                cur.execute(sql["snapshot"])
                cur.execute(sql["source_as_of"])
                as_of = cur.fetchone()[0]
            yield Snapshot(self._stream("symbol_files", {}, tuples=True), as_of)
        finally:
            conn.rollback()

    @contextlib.contextmanager
    def new_files(self, since: dt.datetime | None) -> Iterator[Window]:
        """The symbol files of uploads finished after ``since`` (all finished
        uploads for ``None``), from one read-only snapshot, as documents the
        rebuild would write; the transaction ends when the block exits.

        Raises:
            SearchSourceError: a query failed (also while ``rows`` is iterated).
        """
        sql = sqlfiles.load("search_index.sql", SQL_DIR)
        conn = self.connection
        try:
            with self._translated("new_symbol_files"), conn.cursor() as cur:
                cur.execute(sql["window"])
                cur.execute(sql["source_as_of"])
                as_of = cur.fetchone()[0]
            rows = self._stream(
                "new_symbol_files",
                {"since": since or dt.datetime.min.replace(tzinfo=dt.timezone.utc)},
            )
            yield Window(since, rows, as_of)
        finally:
            conn.rollback()

    def watermark(self, alias: str) -> Watermark | None:
        """The incremental job's progress on ``alias``; ``None`` before its first run."""
        with self._translated("read_watermark"), self.connection, self.connection.cursor() as cur:
            cur.execute(
                sqlfiles.load("search_index.sql", SQL_DIR)["read_watermark"], {"alias": alias}
            )
            row = cur.fetchone()
        return Watermark(*row) if row else None

    def save_watermark(self, alias: str, mark: Watermark) -> None:
        """Record ``mark`` for ``alias`` (committed)."""
        with self._translated("save_watermark"), self.connection, self.connection.cursor() as cur:
            cur.execute(
                sqlfiles.load("search_index.sql", SQL_DIR)["save_watermark"],
                {"alias": alias, "index_name": mark.index_name, "indexed_to": mark.indexed_to},
            )

    def count(self) -> int:
        """How many symbol files a rebuild reads now (its own snapshot)."""
        with (
            self._translated("count_symbol_files"),
            self.connection,
            self.connection.cursor() as cur,
        ):
            cur.execute(sqlfiles.load("search_index.sql", SQL_DIR)["count_symbol_files"])
            return int(cur.fetchone()[0])

    def _stream(
        self, query: str, params: dict[str, Any], tuples: bool = False
    ) -> Iterator["SymbolRow"]:
        """The rows of ``query`` through a server-side cursor: ``SymbolRow`` records, or with
        ``tuples`` the cursor's own tuples in the same order (a rebuild's million rows go
        straight to ``search.documents.bulk_lines``, which unpacks them)."""
        cursor = self.connection.cursor(name=f"search_index_{query}")
        cursor.itersize = self.itersize
        with self._translated(query):
            cursor.execute(sqlfiles.load("search_index.sql", SQL_DIR)[query], params or None)
        return self._tuples(cursor, query) if tuples else self._rows(cursor, query)

    def _rows(self, cursor: Any, query: str) -> Iterator["SymbolRow"]:
        from search.documents import SymbolRow

        # each made a SymbolRow in C (tuple.__new__), not through a Python call per row
        with self._translated(query):
            yield from map(functools.partial(tuple.__new__, SymbolRow), cursor)

    def _tuples(self, cursor: Any, query: str) -> Iterator["SymbolRow"]:
        with self._translated(query):
            yield from cursor

    @staticmethod
    @contextlib.contextmanager
    def _translated(query: str) -> Iterator[None]:
        import psycopg2

        try:
            yield
        except psycopg2.Error as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise SearchSourceError(query, reason) from None


#: Where every search job's ``es_url`` comes from when the job's section does not set it:
#: ``[resource] [[elasticsearch]] es_url`` (environment ``RESOURCE_ELASTICSEARCH_ES_URL``),
#: one setting for all of them, as ``resource.postgresql`` is for their databases.
ES_NAMESPACE = "resource.elasticsearch"
ES_URL_DOC = (
    "Elasticsearch URL, or a cluster's nodes' URLs comma-separated; default: "
    "resource.elasticsearch.es_url (every search job's), else $ES_URL; none: the job fails "
    "(there is no development default)"
)
NO_ADDRESS_HINT = "set resource.elasticsearch.es_url (every search job's) or ES_URL"


def es_address(app_name: str, configured: str) -> str:
    """The Elasticsearch address a search job uses: its ``es_url`` (its section's, else
    ``resource.elasticsearch.es_url``), else ``ES_URL``.

    Raises:
        ConfigurationError: none is set (``--configtest`` says so first:
            :func:`es_address_problems`).
    """
    from search.client import es_url
    from search.errors import NoElasticsearchAddress

    try:
        return es_url(configured or None)
    except NoElasticsearchAddress as exc:
        hint = NoElasticsearchAddress(NO_ADDRESS_HINT)
        raise ConfigurationError(f"{app_name}.es_url", str(hint)) from exc


def es_address_problems(app_name: str, config: DotDict) -> tuple[str, ...]:
    """``--configtest``'s refusal of a search job that has no Elasticsearch address."""
    try:
        es_address(app_name, str(config.get("es_url") or ""))
    except ConfigurationError as exc:
        return (str(exc),)
    return ()


@using_postgres()
class RebuildSearchIndexCronApp(BaseCronApp):
    """Build ``<alias>-<UTC timestamp>`` from PostgreSQL, then move ``alias`` to it.

    A failed or partial build never takes the alias; its index is deleted.
    """

    schema_dir = SQL_DIR  # its tables: sql/jobs/schema.sql

    app_name = "rebuild-search-index"
    metric_names = ("documents_indexed", "build_seconds", "indices_deleted")  # run()'s Summary
    app_description = "rebuild the symbol search index in Elasticsearch and swap its alias"
    app_version = "1.0"
    required_config = Namespace()
    required_config.add_option(
        "es_url",
        default="",
        doc=ES_URL_DOC,
        reference_value_from=ES_NAMESPACE,
    )

    @classmethod
    def config_problems(cls, config: DotDict) -> tuple[str, ...]:
        """No Elasticsearch address: refused by ``--configtest``."""
        return es_address_problems(cls.app_name, config)

    required_config.add_option("alias", default="symbols", doc="the alias searches read")
    required_config.add_option(
        "keep", default=2, doc="versioned indices kept (the alias's included)"
    )
    required_config.add_option("chunk_size", default=5000, doc="documents per bulk request")
    required_config.add_option("threads", default=2, doc="bulk requests in flight")
    required_config.add_option(
        "itersize", default=10000, doc="rows fetched per server-side cursor round trip"
    )
    required_config.add_option(
        "replicas",
        default="0-1",
        doc="replicas raised before the alias moves: a number, or a range (auto_expand_replicas): "
        "0-1 is one wherever a second node is (a single node stays green), 0-all one per node",
    )
    required_config.add_option(
        "replica_wait_seconds",
        default=600.0,
        doc=(
            "how long the replicas may take to become active (then the run fails and the alias "
            "stays)"
        ),
    )

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> Summary:
        """Returns the run's summary and metrics (crontabber.base): documents indexed, the
        build's seconds, indices deleted.

        Raises:
            ConfigurationError: a ``replicas`` value Elasticsearch would not take.
        """
        from search.indexer import BulkSettings, Replicas

        config = self.config
        bulk = BulkSettings(chunk_size=int(config.chunk_size), threads=int(config.threads))
        replicas = Replicas(str(config.replicas), float(config.replica_wait_seconds))
        try:
            replicas.settings()
        except ValueError as exc:
            raise ConfigurationError(f"{self.app_name}.replicas", str(exc)) from None
        with self.database_connection_factory() as connection:
            result = rebuild_from(
                connection,
                es_address(self.app_name, config.es_url),
                config.alias,
                keep=int(config.keep),
                bulk=bulk,
                itersize=int(config.itersize),
                replicas=replicas,
            )
        return Summary(
            f"built {result.index} with {result.documents} documents in {result.seconds:.1f} s; "
            f"alias {config.alias} moved from {', '.join(result.previous) or 'nothing'}; "
            f"deleted {', '.join(result.deleted) or 'nothing'}",
            documents_indexed=result.documents,
            build_seconds=round(result.seconds, 3),
            indices_deleted=len(result.deleted),
        )


def rebuild_from(
    connection: Any,
    url: str | None,
    alias: str,
    *,
    keep: int,
    bulk: "BulkSettings",
    itersize: int = 10000,
    replicas: "Replicas | None" = None,
) -> "RebuildResult":
    """The rebuild job's work: every symbol file of ``connection``'s database (one
    snapshot) into a new version of ``alias`` in the Elasticsearch at ``url`` (default:
    ``ES_URL``), then the alias swap (``search.indexer.rebuild``). An exception leaving
    it names ``url`` (``search.client.naming_address``). The fault suite calls it too,
    so what it checks is the job's own path."""
    from search.client import es_url, make_es_client, naming_address
    from search.indexer import Replicas, rebuild

    url = es_url(url)
    es = make_es_client(url, request_timeout=120)
    with naming_address(url), SymbolFileStore(connection, itersize).snapshot() as source:
        return rebuild(
            es,
            alias,
            source.rows,
            keep=keep,
            bulk=bulk,
            source_as_of=source.as_of,
            replicas=replicas or Replicas(),
        )


@using_postgres()
class IndexNewUploadsCronApp(BaseCronApp):
    """Add the symbol files of uploads finished since the last run to the
    index behind ``alias``; the hourly rebuild stays the source of truth.

    The watermark (``search_index_watermark``) names the index it describes
    and moves only after Elasticsearch has taken every document:

    - Elasticsearch down, or documents rejected: the job fails, the watermark
      stays, the next run reads from the same point (nothing is missed).
    - The alias moved to a new index (a rebuild) since the last run: the
      watermark describes the old index, so the run starts from the time of the
      new index's source snapshot (its ``_meta.source_as_of``) instead, and
      adds what finished while it was built.
    - Each run re-reads ``overlap_seconds`` before its starting point: an
      upload's ``completed_at`` is set before its transaction commits, so one
      committing just after a run's snapshot has a time before that run's.
      Writing a document again is harmless (same id, same content).
    - No alias yet: nothing to add to (the first rebuild indexes everything).
    """

    schema_dir = SQL_DIR  # its tables: sql/jobs/schema.sql

    app_name = "index-new-uploads"
    metric_names = ("documents_indexed",)  # run()'s Summary
    app_description = "add the symbol files of newly finished uploads to the live search index"
    app_version = "1.0"
    required_config = Namespace()
    required_config.add_option(
        "es_url",
        default="",
        doc=ES_URL_DOC,
        reference_value_from=ES_NAMESPACE,
    )

    @classmethod
    def config_problems(cls, config: DotDict) -> tuple[str, ...]:
        """No Elasticsearch address: refused by ``--configtest``."""
        return es_address_problems(cls.app_name, config)

    required_config.add_option("alias", default="symbols", doc="the alias searches read")
    required_config.add_option(
        "overlap_seconds", default=600, doc="re-read this much before the watermark (commit delays)"
    )
    required_config.add_option("chunk_size", default=500, doc="documents per bulk request")

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> Summary:
        """Returns the run's summary and metrics (crontabber.base): documents written."""
        from search.client import make_es_client, naming_address

        url = es_address(self.app_name, self.config.es_url)
        with naming_address(url):
            return self._add_new(make_es_client(url, request_timeout=60))

    def _add_new(self, es: Any) -> Summary:
        from search.indexer import live_index, update

        config = self.config
        target = live_index(es, config.alias)
        if target is None:
            return Summary(
                f"no alias {config.alias} yet: nothing written (the rebuild indexes everything)",
                documents_indexed=0,
            )

        def add(connection: Any) -> tuple[int, dt.datetime | None, str]:
            store = SymbolFileStore(connection)
            since, why = starting_point(
                store.watermark(config.alias),
                target,
                config.alias,
                dt.timedelta(seconds=int(config.overlap_seconds)),
            )
            with store.new_files(since) as window:
                written = update(es, config.alias, window.rows, int(config.chunk_size))
            store.save_watermark(config.alias, Watermark(target.name, window.as_of))
            return written, since, why

        # a database lost mid-run (a failover) is waited for, as the runner's writes are:
        # the run starts again from the watermark (documents written twice are the same)
        from crontabber.database import retried_when_lost

        written, since, why = retried_when_lost(
            self.database_connection_factory, add, self.app_name
        )
        return Summary(
            f"{written} symbol files of uploads finished after "
            f"{utc_text(since) if since else 'the beginning'} ({why}) written to "
            f"{target.name}",
            documents_indexed=written,
        )


def starting_point(
    mark: Watermark | None, target: "LiveIndex", alias: str, overlap: dt.timedelta
) -> tuple[dt.datetime | None, str]:
    """Where a run of ``index-new-uploads`` starts reading finished uploads
    (``None``: from the beginning), and why: the watermark when it describes
    the index the alias points to now, else that index's source snapshot time
    (a rebuild moved the alias); ``overlap`` earlier, for late commits."""
    start: dt.datetime | None
    if mark is not None and mark.index_name == target.name:
        start, why = mark.indexed_to, "the watermark"
    else:
        start, why = target.built_from(alias), f"the source time of {target.name}"
    return (start - overlap if start else None), why
