"""The search endpoint: a WSGI application and ``python -m search.server``.

- ``GET /search?q=TEXT&size=N`` -> ``{"query", "terms": [[score, term], ...],
  "total", "hits": [{"debug_file", "debug_id", "filename", "code_file",
  "code_id", "score"}]}``; bad input (empty, over 200 characters, a bad size)
  -> 400, Elasticsearch down or the index missing -> 503, always JSON
  ``{"error": ...}``, never a traceback.
- ``GET /__heartbeat__``: 200 when Elasticsearch answers and the alias exists, else 503.
- ``GET /__lbheartbeat__``: 200 while the process serves requests.

``python -m search.server`` serves it with the standard library's wsgiref
(one thread per request); under gunicorn: ``gunicorn search.server:application``.
Configuration from the environment: ``ES_URL``, ``SEARCH_ALIAS`` (default ``symbols``).
"""

from __future__ import annotations

import argparse
import json
import logging
import socketserver
import sys
import threading
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from .engine import BadQuery, SearchResult, SearchUnavailable, Searcher

logger = logging.getLogger(__name__)

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           500: "Internal Server Error", 503: "Service Unavailable"}
Response = tuple[int, dict[str, Any]]


def result_json(result: SearchResult) -> dict[str, Any]:
    """The response body of a search."""
    return {
        "query": result.query,
        "terms": [[score, term] for score, term in result.terms],
        "total": result.total,
        "hits": [{"debug_file": h.debug_file, "debug_id": h.debug_id, "filename": h.filename,
                  "code_file": h.code_file, "code_id": h.code_id, "score": h.score}
                 for h in result.hits],
    }


def parse_size(values: list[str]) -> int:
    """The ``size`` parameter (default 10).

    Raises:
        BadQuery: not a whole number (the range is checked by the search).
    """
    if not values:
        return 10
    try:
        return int(values[-1])
    except ValueError:
        raise BadQuery("size must be a whole number") from None


class SearchApp:
    """The WSGI application. ``searcher`` is built on first use when not given,
    so importing this module (gunicorn) does not connect anywhere."""

    def __init__(self, searcher: Searcher | None = None) -> None:
        self._searcher = searcher
        self._lock = threading.Lock()

    @property
    def searcher(self) -> Searcher:
        with self._lock:
            if self._searcher is None:
                self._searcher = Searcher()
            return self._searcher

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            status, body = self.route(environ)
        except Exception:  # noqa: BLE001 - the last line of defence: log, never show
            logger.exception("search endpoint failed on %s", environ.get("PATH_INFO"))
            status, body = 500, {"error": "internal error"}
        payload = json.dumps(body).encode()
        start_response(f"{status} {REASONS[status]}", [
            ("Content-Type", "application/json"), ("Content-Length", str(len(payload))),
            ("Cache-Control", "no-store")])
        return [payload]

    def route(self, environ: dict[str, Any]) -> Response:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return 405, {"error": "only GET is supported"}
        if path == "/search":
            return self.search(parse_qs(environ.get("QUERY_STRING", "")))
        if path == "/__heartbeat__":
            return self.heartbeat()
        if path == "/__lbheartbeat__":
            return 200, {"status": "ok"}
        return 404, {"error": f"no such endpoint: {path}"}

    def search(self, params: dict[str, list[str]]) -> Response:
        try:
            size = parse_size(params.get("size", []))
            result = self.searcher.search(params.get("q", [""])[-1], size)
        except BadQuery as exc:
            return 400, {"error": exc.problem}
        except SearchUnavailable as exc:
            logger.warning("%s", exc)
            return 503, {"error": str(exc)}
        return 200, result_json(result)

    def heartbeat(self) -> Response:
        searcher = self.searcher
        try:
            health = searcher.es.cluster.health(timeout="2s")["status"]
            present = bool(searcher.es.indices.exists_alias(name=searcher.index))
        except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
            return 503, {"status": "error", "error": f"Elasticsearch unreachable: {type(exc).__name__}"}
        if not present:
            return 503, {"status": "error", "error": f"alias {searcher.index} does not exist"}
        return 200, {"status": "ok", "elasticsearch": health, "alias": searcher.index}


application = SearchApp()


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per request (concurrent clients do not queue)."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        logger.debug("%s " + format, self.address_string(), *args)


def make(host: str, port: int, app: Any = application) -> WSGIServer:
    """A threaded wsgiref server for ``app`` (port 0 picks a free port)."""
    return make_server(host, port, app, server_class=ThreadingWSGIServer, handler_class=QuietHandler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m search.server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = make(args.host, args.port)
    logger.info("serving on http://%s:%d", *server.server_address[:2])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
