"""The pipeline panels as one document (``/api/pipeline``):

- ``uploads``: queue depth (pending + processing), the oldest pending upload
  and its age, uploads that failed for good in the last day with their reasons;
- ``missing_symbols``: batches waiting in the inbox (S3 objects without a
  batch row: the job's own :func:`pending_batches`), quarantined batches, the
  symbols missed most today (UTC);
- ``search_index``: the index the alias points to and its document count
  (from Elasticsearch), the last successful rebuild run (the runner's log)
  and the incremental indexer's watermark;
- ``prune``: the last prune run, keys and bytes per rule.

A panel whose outside service (Elasticsearch, S3) does not answer carries an
``error`` and ``null`` numbers; the other panels are still shown. A panel whose job
(:data:`OWNERS`) is not configured on this runner reads nothing (its tables need not exist:
a runner of other crontabber apps has none) and is ``{"unavailable": "... is not
configured ...", "query_failed": false}``; one whose query fails is ``{"unavailable": the error,
"query_failed": true}`` (what ``/__heartbeat__`` reports). The database is read through
:class:`dashboard.store.PipelineStore`.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Callable

from crontabber import redact
from crontabber.errors import JobNotFound
from crontabber.inspection import Outcome, job_config

from .store import PanelQueryFailed, PipelineStore

if TYPE_CHECKING:
    from .source import Session, Source

FAILED_WINDOW = dt.timedelta(hours=24)
LIST_LIMIT = 10  # rows in a panel's list (failed uploads, quarantined batches, top symbols)
REBUILD_APP = "rebuild-search-index"
MISSING_APP = "missing-symbols"
PRUNE_APP = "prune-s3"
UPLOADS_APP = "process-uploads"
#: The job whose tables each panel reads (created where that job is configured).
OWNERS = {
    "uploads": UPLOADS_APP,
    "missing_symbols": MISSING_APP,
    "search_index": REBUILD_APP,
    "prune": PRUNE_APP,
}


def _config(source: "Source", app_name: str) -> dict[str, Any]:
    """The configured job's options (``{}`` when it is not configured)."""
    job = source.job(app_name)
    return dict(job_config(job, source.settings.sources)) if job is not None else {}


def uploads_panel(store: PipelineStore, now: dt.datetime) -> dict[str, Any]:
    queue = store.upload_queue()
    failed = store.failed_uploads(now - FAILED_WINDOW, LIST_LIMIT)
    replaced = store.replaced_files(now - FAILED_WINDOW, LIST_LIMIT)
    age = (now - queue.oldest_pending).total_seconds() if queue.oldest_pending else None
    return {
        "queue_depth": queue.depth,
        "pending": queue.pending,
        "processing": queue.processing,
        "oldest_pending": queue.oldest_pending,
        "oldest_pending_age_seconds": age,
        "failed_window_hours": FAILED_WINDOW.total_seconds() / 3600,
        "failed_total": failed.total,
        "failed": [row.as_json() for row in failed.rows],
        "replaced_total": replaced.total,
        "replaced": [row.as_json() for row in replaced.rows],
    }


def waiting_batches(source: "Source", session: "Session") -> dict[str, Any]:
    """How many batches wait in the inbox, the oldest's time, or the S3 error.

    The inbox is listed at most once per ``DASHBOARD_S3_CACHE_SECONDS`` (default 30) for
    every request together, and at most ``DASHBOARD_S3_MAX_LISTED`` objects (default
    10,000: ``waiting_capped`` is then true and the count is a lower bound): a browser, or
    anyone reaching the dashboard, cannot make it list a large bucket once per request."""
    import os

    seconds = float(os.environ.get("DASHBOARD_S3_CACHE_SECONDS", "30"))
    return dict(source.cached("waiting_batches", seconds, lambda: _list_waiting(source, session)))


def _list_waiting(source: "Source", session: "Session") -> dict[str, Any]:
    import os

    config = _config(source, MISSING_APP)
    if not config:
        return {
            "batches_waiting": None,
            "oldest_waiting": None,
            "waiting_capped": False,
            "waiting_error": f"{MISSING_APP} is not configured",
        }
    from botocore.exceptions import BotoCoreError, ClientError

    from jobs.missing_symbols.consume import pending_batches_listed
    from jobs.missing_symbols.store import MissingSymbolStore
    from jobs.s3 import make_s3_client

    s3 = source.client(
        "s3", lambda: make_s3_client(connect_timeout=3, read_timeout=10, max_attempts=1)
    )
    cap = int(os.environ.get("DASHBOARD_S3_MAX_LISTED", "10000"))
    try:
        waiting, capped = pending_batches_listed(
            MissingSymbolStore(session.connection),
            s3,
            str(config["inbox_bucket"]),
            str(config["prefix"]),
            cap,
        )
    except (BotoCoreError, ClientError) as exc:
        return {
            "batches_waiting": None,
            "oldest_waiting": None,
            "waiting_capped": False,
            "waiting_error": redact(
                f"S3: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ),
        }
    oldest = dt.datetime.fromtimestamp(waiting[0].modified, dt.timezone.utc) if waiting else None
    return {
        "batches_waiting": len(waiting),
        "oldest_waiting": oldest,
        "waiting_capped": capped,
        "waiting_error": None,
    }


def missing_symbols_panel(source: "Source", session: "Session", now: dt.datetime) -> dict[str, Any]:
    store = session.pipeline
    quarantined = store.quarantined_batches(LIST_LIMIT)
    day = now.astimezone(dt.timezone.utc).date()
    return {
        **waiting_batches(source, session),
        "quarantined_total": quarantined.total,
        "quarantined": [row.as_json() for row in quarantined.rows],
        "day": day,
        "most_missed": [row.as_json() for row in store.most_missed(day, LIST_LIMIT)],
    }


def live_index_facts(source: "Source", alias: str, es_url: str) -> dict[str, Any]:
    """The index ``alias`` points to, its document count and source time, from
    Elasticsearch (``error`` when it does not answer)."""
    from elasticsearch import ApiError, TransportError

    from search.client import make_es_client
    from search.errors import NoElasticsearchAddress, SearchUnavailable
    from search.indexer import live_index

    try:  # no address anywhere (no development default): the card says what to set
        es = source.client(
            f"es:{es_url}", lambda: make_es_client(es_url or None, request_timeout=5)
        )
        live = live_index(es, alias)
        documents = int(es.count(index=live.name)["count"]) if live is not None else None
    except (NoElasticsearchAddress, SearchUnavailable, ApiError, TransportError) as exc:
        return {
            "index": None,
            "documents": None,
            "source_as_of": None,
            "error": redact(
                f"Elasticsearch: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ),
        }
    return {
        "index": live.name if live else None,
        "documents": documents,
        "source_as_of": live.source_as_of if live else None,
        "error": None if live else f"alias {alias} does not exist yet",
    }


def last_rebuild(source: "Source", session: "Session") -> dict[str, Any] | None:
    """The newest successful run of the rebuild job (of its last 20), from the runner's log."""
    try:
        found = source.runs(session, REBUILD_APP, 20)
    except JobNotFound:
        return None
    run = next((run for run in found.runs if run.outcome is Outcome.OK), None)
    if run is None:
        return None
    return {
        "run_id": run.run_id,
        "by": run.by,
        "started": run.started,
        "ended": run.ended,
        "duration": run.duration(found.now),
    }


def search_index_panel(source: "Source", session: "Session") -> dict[str, Any]:
    config = _config(source, REBUILD_APP)
    if not config:
        return {
            "alias": None,
            "index": None,
            "documents": None,
            "source_as_of": None,
            "error": f"{REBUILD_APP} is not configured",
            "last_rebuild": None,
            "watermark": None,
        }
    alias = str(config["alias"])
    watermark = session.pipeline.watermark(alias)
    return {
        "alias": alias,
        **live_index_facts(source, alias, str(config.get("es_url") or "")),
        "last_rebuild": last_rebuild(source, session),
        "watermark": watermark.as_json() if watermark else None,
    }


def prune_panel(session: "Session") -> dict[str, Any]:
    prune = session.pipeline.last_prune()
    return {"last_run": prune.as_json() if prune else None}


def pipeline_document(source: "Source", session: "Session") -> dict[str, Any]:
    """The four panels and the database clock they were read at; a panel that cannot be
    read says why (see the module docstring), the others are read all the same."""
    now = session.pipeline.now()
    builders: dict[str, Callable[[], dict[str, Any]]] = {
        "uploads": lambda: uploads_panel(session.pipeline, now),
        "missing_symbols": lambda: missing_symbols_panel(source, session, now),
        "search_index": lambda: search_index_panel(source, session),
        "prune": lambda: prune_panel(session),
    }
    return {"now": now, **{name: _panel(source, name, build) for name, build in builders.items()}}


def _panel(source: "Source", name: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    owner = OWNERS[name]
    if source.job(owner) is None:
        return {"unavailable": f"{owner} is not configured on this runner", "query_failed": False}
    try:
        return build()
    except PanelQueryFailed as exc:
        return {"unavailable": str(exc), "query_failed": True}


def panel_warnings(document: dict[str, Any]) -> dict[str, str]:
    """The panels of ``document`` read whole whose card shows an error all the same (the
    search index's when Elasticsearch does not answer), with it: ``/__heartbeat__``'s
    warnings."""
    return {
        name: str(panel["error"])
        for name, panel in document.items()
        if isinstance(panel, dict) and panel.get("error") and not panel.get("unavailable")
    }


def failed_panels(document: dict[str, Any]) -> dict[str, str]:
    """The panels of ``document`` whose query failed, with the error."""
    return {
        name: str(panel["unavailable"])
        for name, panel in document.items()
        if isinstance(panel, dict) and panel.get("query_failed")
    }
