"""Building a new versioned index and moving the alias to it (the Elasticsearch
side of the rebuild; the rows come from ``jobs.search_index``'s store).

A build creates ``<alias>-<UTC timestamp>`` with the explicit mapping and
``refresh_interval`` -1, bulk-loads it, checks the document count against the
source count, restores the refresh interval and refreshes, merges it into one
segment, raises its replicas (loaded with none: each document is written once; the merged
segment is then copied whole) and waits until every copy is active, and only then moves the
alias in one ``update_aliases`` call (searches see the old index or the new one, never
neither; on a cluster, the new one with its replicas, so a node lost costs no query). Any
failure deletes the new index and leaves the alias where it was. Versions beyond the newest
``keep`` are deleted afterwards. The index records, in its mapping's ``_meta``, the time of the
source snapshot
it was built from (``source_as_of``).

Between rebuilds, :func:`update` adds or replaces documents in the index the
alias points to (the incremental job of new uploads); :func:`live_index` says
which index that is and what it was built from.
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable

from .documents import SymbolRow, bulk_bodies, index_body
from .errors import RebuildFailed, SearchUnavailable, UpdateFailed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BulkSettings:
    """How the load is sent: documents per bulk request and parallel requests."""

    chunk_size: int = 5000
    threads: int = 2
    queue_size: int = 4


@dataclass(frozen=True)
class Replicas:
    """The copies of the new index beyond its primary, raised before the alias moves:
    ``count`` (``"1"``, ``"2"``...: that many, on a cluster of more nodes than that) or
    Elasticsearch's ``auto_expand_replicas`` range (``"0-1"``, the default: one replica
    wherever there is a second node, none on a single node, which then stays green;
    ``"0-all"``: a copy on every node). ``wait_seconds``: how long the copies may take to
    become active before the rebuild fails (the alias stays where it was)."""

    count: str = "0-1"
    wait_seconds: float = 600.0

    def settings(self) -> dict[str, Any]:
        """The index settings that ask for these replicas.

        Raises:
            ValueError: ``count`` is neither a number nor a range ``N-M`` / ``N-all``.
        """
        if self.count.isdigit():
            return {"number_of_replicas": int(self.count), "auto_expand_replicas": False}
        if re.fullmatch(r"\d+-(\d+|all)", self.count):
            return {"auto_expand_replicas": self.count}
        raise ValueError(
            f"replicas: {self.count!r} is not a number or a range such as 0-1 or 0-all"
        )


@dataclass(frozen=True)
class RebuildResult:
    """What a successful rebuild did; ``load_seconds``: how long of its ``seconds`` it
    took until Elasticsearch had acknowledged the last document."""

    index: str
    documents: int
    seconds: float
    previous: list[str]
    deleted: list[str]
    load_seconds: float = 0.0


def version_name(alias: str, now: dt.datetime) -> str:
    """``<alias>-YYYYmmddHHMMSSffffff`` (UTC): names sort in build order."""
    return f"{alias}-{now.astimezone(dt.timezone.utc):%Y%m%d%H%M%S%f}"


def versions(es: Any, alias: str) -> list[str]:
    """The versioned indices of ``alias``, oldest first."""
    pattern = re.compile(re.escape(alias) + r"-\d{20}")
    found = es.indices.get(index=f"{alias}-*", allow_no_indices=True, expand_wildcards="open")
    return sorted(name for name in found if pattern.fullmatch(name))


def aliased(es: Any, alias: str) -> list[str]:
    """The indices ``alias`` points to now (none before the first build)."""
    from elasticsearch import NotFoundError

    try:
        return sorted(es.indices.get_alias(name=alias))
    except NotFoundError:
        return []


def rebuild(
    es: Any,
    alias: str,
    rows: Iterable[SymbolRow],
    expected: int | None = None,
    keep: int = 2,
    bulk: BulkSettings = BulkSettings(),
    now: dt.datetime | None = None,
    source_as_of: dt.datetime | None = None,
    merge: bool = True,
    replicas: Replicas = Replicas(),
) -> RebuildResult:
    """Build a new version of ``alias`` from ``rows`` (``expected`` of them when given; else
    as many as ``rows`` yields: the index must then hold every one of them); ``source_as_of``
    is the time of the source's snapshot (kept in ``_meta`` for :func:`live_index`).
    ``merge=False`` leaves the index in the segments the load wrote (for the benchmark that
    measures what merging gains); ``replicas``: the copies raised (and waited for) before
    the alias moves.

    First deletes the versions a killed build left (:func:`abandoned`): a build killed
    with SIGKILL never runs its clean-up.

    Raises:
        RebuildFailed: the load or the count check failed, or the replicas did not become
            active in time; the new index is gone.
        Any error of the row source or of Elasticsearch, after the same clean-up.
    """
    start = time.perf_counter()
    abandoned(es, alias, delete=True)
    name = version_name(alias, now or dt.datetime.now(dt.timezone.utc))
    meta = {"source_as_of": source_as_of.isoformat()} if source_as_of else None
    es.indices.create(index=name, **index_body(meta=meta))
    try:
        sent, loaded = _load(es, name, rows, bulk)
        load_seconds = time.perf_counter() - start
        _finish(es, name, sent if expected is None else expected, loaded)
        if merge:
            _merge(es, name)
        _replicate(es, name, replicas)
        previous = _move_alias(es, alias, name)
    except BaseException:
        logger.warning("search index %s failed; deleting it", name)
        es.indices.delete(index=name, ignore_unavailable=True)
        raise
    deleted = prune(es, alias, keep)
    return RebuildResult(name, loaded, time.perf_counter() - start, previous, deleted, load_seconds)


# Bulk responses carry only whether any item failed and the failed items' errors
# (not each item's index, id, version, shards...): a response to 5,000 documents
# that all succeeded is ``{"errors":false}``.
BULK_FILTER = "errors,items.*.error"


@dataclass
class _Tally:
    """What Elasticsearch acknowledged of the bulk requests so far."""

    written: int = 0
    failed: int = 0
    first_error: Any = None

    def add(self, sent: int, response: Any) -> None:
        """Count one bulk response (``BULK_FILTER``ed) to ``sent`` documents."""
        rejected = response.get("items", []) if response.get("errors") else []
        self.written += sent - len(rejected)
        self.failed += len(rejected)
        if rejected and self.first_error is None:
            self.first_error = rejected[0]


def _post(es: Any, index: str, body: bytes, **params: Any) -> Any:
    return es.bulk(operations=body, index=index, filter_path=BULK_FILTER, **params).body


def _oldest(pending: collections.deque[tuple[int, Any]]) -> tuple[int, Any]:
    """The oldest request in flight, once answered: its document count and response."""
    sent, future = pending.popleft()
    return sent, future.result()


def _load(es: Any, name: str, rows: Iterable[SymbolRow], bulk: BulkSettings) -> tuple[int, int]:
    """Bulk-load ``rows``, ``bulk.threads`` requests in flight (the client's persistent
    connections) while the next bodies are built; the number of documents sent and
    the number Elasticsearch acknowledged. Any error (of the rows or of a request) waits for the
    requests in flight before it leaves, so none lands after the caller deletes the index.

    Raises:
        RebuildFailed: Elasticsearch rejected documents.
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    tally = _Tally()
    total = 0
    pending: collections.deque[tuple[int, Future[Any]]] = collections.deque()
    with ThreadPoolExecutor(max_workers=bulk.threads, thread_name_prefix=f"bulk-{name}") as pool:
        try:
            for sent, body in bulk_bodies(rows, bulk.chunk_size):
                if len(pending) >= bulk.threads + bulk.queue_size:
                    tally.add(*_oldest(pending))
                pending.append((sent, pool.submit(_post, es, name, body)))
                total += sent
            while pending:
                tally.add(*_oldest(pending))
        finally:
            for _, future in pending:
                future.cancel()
    if tally.failed:
        raise RebuildFailed(name, f"{tally.failed} documents rejected, first: {tally.first_error}")
    return total, tally.written


def _finish(es: Any, name: str, expected: int, loaded: int) -> None:
    """Check the counts, restore the load-time settings to the defaults, refresh."""
    if loaded != expected:
        raise RebuildFailed(name, f"loaded {loaded} documents, the source has {expected}")
    es.indices.put_settings(
        index=name, settings={"index": {"refresh_interval": None, "translog.durability": "request"}}
    )
    es.indices.refresh(index=name)
    counted = es.count(index=name)["count"]
    if counted != expected:
        raise RebuildFailed(name, f"index holds {counted} documents, the source has {expected}")


def segment_count(es: Any, index: str) -> int:
    """The searchable segments of ``index`` (an index or alias), all shard copies."""
    found = es.indices.segments(index=index)["indices"]
    return sum(
        1
        for shards in found.values()
        for copies in shards["shards"].values()
        for copy in copies
        for segment in copy["segments"].values()
        if segment["search"]
    )


MERGE_TIMEOUT = 3600  # seconds; ~10 s per million documents on 2 cores


def _merge(es: Any, name: str) -> None:
    """Merge the new index into one segment before searches see it.

    A bulk load leaves ~10 segments per million documents, and every search pays
    for each: each phrase and term query looks its words up per segment, and the
    fetch opens each hit's segment. What merging gains under load is measured by
    ``python -m bench search_merge`` (``docs/search.md``). The merged
    segment (~160 MB per million documents) stays far below the merge policy's
    5 GB ceiling, so the small segments the incremental job adds later are still
    merged into it as usual.
    """
    es.options(request_timeout=MERGE_TIMEOUT).indices.forcemerge(
        index=name, max_num_segments=1, wait_for_completion=True
    )
    es.indices.refresh(index=name)


def _replicate(es: Any, name: str, replicas: Replicas) -> None:
    """Raise the new index's replicas and wait until every copy of it is active (green).

    Raises:
        RebuildFailed: they were not within ``replicas.wait_seconds`` (too few nodes for a
            fixed count, a node lost while copying, a disk full).
    """
    es.indices.put_settings(index=name, settings={"index": replicas.settings()})
    # a wait that times out is answered 408 with the health: read, not raised
    health = es.options(
        request_timeout=replicas.wait_seconds + 30, ignore_status=408
    ).cluster.health(index=name, wait_for_status="green", timeout=f"{int(replicas.wait_seconds)}s")
    if health.get("timed_out") or health.get("status") != "green":
        raise RebuildFailed(
            name,
            f"its replicas ({replicas.count}) were not all active after "
            f"{replicas.wait_seconds:g} s: the cluster's {health.get('number_of_data_nodes')} "
            f"data node(s) hold {health.get('active_shards')} of its copies "
            f"({health.get('status')})",
        )


def _move_alias(es: Any, alias: str, name: str) -> list[str]:
    """Point ``alias`` at ``name`` only, in one atomic call; the indices it left."""
    previous = aliased(es, alias)
    actions: list[dict[str, Any]] = [{"remove": {"index": old, "alias": alias}} for old in previous]
    actions.append({"add": {"index": name, "alias": alias}})
    es.indices.update_aliases(actions=actions)
    return previous


def abandoned(es: Any, alias: str, delete: bool = False) -> list[str]:
    """The versions newer than the one behind ``alias`` (all of them when there is no alias
    yet), deleted if ``delete``. A build moves the alias to its index as its last step, and
    builds of one alias run one at a time (the runner's job lock), so between builds such a
    version can only be one whose build was killed before it could delete it (kill -9, a lost
    host): part-loaded, it must neither stay nor be counted among the kept versions."""
    current = aliased(es, alias)
    newest = max(current) if current else ""
    doomed = [name for name in versions(es, alias) if name > newest and name not in current]
    if doomed and delete:
        logger.warning(
            "search index %s: deleting %s, left by a build that did not finish",
            alias,
            ", ".join(doomed),
        )
        es.indices.delete(index=",".join(doomed), ignore_unavailable=True)
    return doomed


def prune(es: Any, alias: str, keep: int) -> list[str]:
    """Delete versions beyond the newest ``keep`` (never one the alias points to)."""
    current = set(aliased(es, alias))
    old = versions(es, alias)[:-keep] if keep > 0 else versions(es, alias)
    doomed = [name for name in old if name not in current]
    if doomed:
        es.indices.delete(index=",".join(doomed), ignore_unavailable=True)
    return doomed


@dataclass(frozen=True)
class LiveIndex:
    """The index an alias points to, and the time of the source snapshot it
    was built from (``None`` for an index built without one)."""

    name: str
    source_as_of: dt.datetime | None

    def built_from(self, alias: str) -> dt.datetime | None:
        """``source_as_of``, or for an index without it, an hour before the
        time in its name (a build's snapshot is taken seconds before its index
        is named); ``None`` when neither is known."""
        if self.source_as_of is not None:
            return self.source_as_of
        match = re.fullmatch(re.escape(alias) + r"-(\d{20})", self.name)
        if not match:
            return None
        named = dt.datetime.strptime(match.group(1), "%Y%m%d%H%M%S%f").replace(
            tzinfo=dt.timezone.utc
        )
        return named - dt.timedelta(hours=1)


def live_index(es: Any, alias: str) -> LiveIndex | None:
    """The index ``alias`` points to now; ``None`` when there is no alias yet.

    Raises:
        SearchUnavailable: Elasticsearch is unreachable or answers with an error.
    """
    from elasticsearch import ApiError, NotFoundError, TransportError

    try:
        found = es.indices.get_mapping(index=alias, filter_path="*.mappings._meta")
    except NotFoundError:
        return None
    except (TransportError, ApiError) as exc:
        raise _unavailable(alias, exc) from None
    if not found:  # the filter removes indices without _meta, not the alias's absence
        names = aliased(es, alias)
        return LiveIndex(names[-1], None) if names else None
    name = sorted(found)[-1]  # one: a rebuild moves the alias in one call
    stamp = found[name].get("mappings", {}).get("_meta", {}).get("source_as_of")
    return LiveIndex(name, dt.datetime.fromisoformat(stamp) if stamp else None)


def update(es: Any, alias: str, rows: Iterable[SymbolRow], chunk_size: int = 500) -> int:
    """Index ``rows`` into the index behind ``alias`` (a document per row,
    replaced when its id exists, as a rebuild would write it), then refresh
    it so they are searchable when this returns; the number written.

    Writes go through the alias with ``require_alias``: an index a rebuild
    has just pruned is never re-created by a write, and a write after an
    alias swap lands in the new index.

    Raises:
        UpdateFailed: Elasticsearch rejected documents (the others were written).
        SearchUnavailable: Elasticsearch is unreachable.
    """
    from elasticsearch import ApiError, TransportError

    tally = _Tally()
    try:
        for sent, body in bulk_bodies(rows, chunk_size):
            tally.add(sent, _post(es, alias, body, require_alias=True))
        es.indices.refresh(index=alias)
    except (TransportError, ApiError) as exc:
        raise _unavailable(alias, exc) from None
    if tally.failed:
        raise UpdateFailed(alias, tally.failed, str(tally.first_error))
    return tally.written


def _unavailable(alias: str, exc: Exception) -> SearchUnavailable:
    status = getattr(getattr(exc, "meta", None), "status", None)
    if status is None:
        return SearchUnavailable(alias, f"Elasticsearch unreachable: {type(exc).__name__}")
    return SearchUnavailable(alias, f"Elasticsearch error {status}: {type(exc).__name__}")
