"""The search endpoint: a WSGI application and ``python -m search.server``.

- ``GET /search?q=TEXT&size=N`` -> ``{"query", "terms": [[score, term], ...],
  "total", "hits": [{"debug_file", "debug_id", "filename", "code_file",
  "code_id", "score"}]}``; bad input (empty, over 200 characters, a bad size,
  a repeated parameter) -> 400, Elasticsearch down or the index missing -> 503.
- ``GET /__heartbeat__``: 200 when Elasticsearch answers and the alias exists, else 503.
- ``GET /__lbheartbeat__``: 200 while the process serves requests.

Every error response is JSON ``{"error": ...}`` (400, 404, 405, 414, 500,
503...), never HTML and never a traceback: the application's own, and, under
``python -m search.server``, those the HTTP layer answers before the
application runs (a request line over 64 KiB, a malformed request).

``python -m search.server`` serves it with the standard library's wsgiref
(one thread per request) and writes one access-log line per request at INFO
(logger ``search.access``: method, path, status, duration); the Elasticsearch
client's own per-request lines and retry tracebacks are not logged unless
``--es-log-level`` asks for them. Under gunicorn (``gunicorn
search.server:application``) gunicorn's own access log and error pages apply.
Configuration from the environment: ``ES_URL`` (a URL, or a cluster's nodes' URLs
comma-separated: a node lost is no error), ``SEARCH_ALIAS`` (default ``symbols``).
"""

from __future__ import annotations

import json
import logging
import socketserver
import sys
import threading
import time
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, quote
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from .engine import Searcher, SearchResult
from .errors import BadQuery, NoElasticsearchAddress, SearchUnavailable
from .request_deadline import REQUEST_SECONDS, RequestDeadline

# Named, not __name__: under ``python -m search.server`` __name__ is __main__.
logger = logging.getLogger("search.server")
access_logger = logging.getLogger("search.access")

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
Response = tuple[int, dict[str, Any]]
INTERNAL_ERROR = json.dumps({"error": "internal error"}).encode()
#: What ``Server:`` says (wsgiref's named the Python version: a hint for an attacker).
SERVER = "symbols-search"
#: Headers of every answer: JSON is never sniffed as something else (a browser that opens it).
NOSNIFF = ("X-Content-Type-Options", "nosniff")
MAX_REQUEST_LINE = 65536  # wsgiref's limit, in bytes
LOGGED_PATH = 200  # characters of a path in the access log
DISCARD_LIMIT = 1 << 20  # bytes read and dropped after a 414


def result_json(result: SearchResult) -> dict[str, Any]:
    """The response body of a search."""
    return {
        "query": result.query,
        "terms": [[score, term] for score, term in result.terms],
        "total": result.total,
        "hits": [
            {
                "debug_file": h.debug_file,
                "debug_id": h.debug_id,
                "filename": h.filename,
                "code_file": h.code_file,
                "code_id": h.code_id,
                "score": h.score,
            }
            for h in result.hits
        ],
    }


def query_params(query_string: str) -> dict[str, str]:
    """The parameters of a query string, each given once (blank values kept).

    Raises:
        BadQuery: a parameter is given more than once (``q=xul&q=nss3``): which
            one was meant is a guess, so none is taken.
    """
    params = parse_qs(query_string, keep_blank_values=True)
    for name, values in params.items():
        if len(values) > 1:
            raise BadQuery(f"parameter {name[:50]!r} is given {len(values)} times; give it once")
    return {name: values[0] for name, values in params.items()}


def parse_size(value: str | None) -> int:
    """The ``size`` parameter (default 10).

    Raises:
        BadQuery: not a whole number (the range is checked by the search).
    """
    if value is None:
        return 10
    try:
        return int(value)
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

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        try:
            status, body = self.route(environ)
        except Exception:  # noqa: BLE001 - the last line of defence: log, never show
            logger.exception("search endpoint failed on %s", environ.get("PATH_INFO"))
            status, body = 500, {"error": "internal error"}
        payload = json.dumps(body).encode()
        start_response(
            f"{status} {REASONS[status]}",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(payload))),
                ("Cache-Control", "no-store"),
                NOSNIFF,
            ],
        )
        return [payload]

    def route(self, environ: dict[str, Any]) -> Response:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return 405, {"error": "only GET is supported"}
        if path == "/search":
            return self.search(environ.get("QUERY_STRING", ""))
        if path == "/__heartbeat__":
            return self.heartbeat()
        if path == "/__lbheartbeat__":
            return 200, {"status": "ok"}
        return 404, {"error": "no such endpoint (GET /search, /__heartbeat__, /__lbheartbeat__)"}

    def search(self, query_string: str) -> Response:
        try:
            params = query_params(query_string)
            size = parse_size(params.get("size"))
            result = self.searcher.search(params.get("q", ""), size)
        except BadQuery as exc:
            return 400, {"error": exc.problem}
        except (SearchUnavailable, NoElasticsearchAddress) as exc:
            logger.warning("%s", exc)
            return 503, {"error": str(exc)}
        return 200, result_json(result)

    def heartbeat(self) -> Response:
        try:
            searcher = self.searcher
        except NoElasticsearchAddress as exc:
            return 503, {"status": "error", "error": str(exc)}
        try:
            health = searcher.es.cluster.health(timeout="2s")["status"]
            present = bool(searcher.es.indices.exists_alias(name=searcher.index))
        except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
            return 503, {
                "status": "error",
                "error": f"Elasticsearch unreachable: {type(exc).__name__}",
            }
        if not present:
            return 503, {"status": "error", "error": f"alias {searcher.index} does not exist"}
        return 200, {"status": "ok", "elasticsearch": health, "alias": searcher.index}


application = SearchApp()


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per request (concurrent clients do not queue)."""

    daemon_threads = True


class JsonServerHandler(ServerHandler):
    """wsgiref's per-request handler; an application that raises gets a JSON 500."""

    error_headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(INTERNAL_ERROR))),
        NOSNIFF,
    ]
    error_body = INTERNAL_ERROR
    server_software = SERVER


class JsonRequestHandler(RequestDeadline, WSGIRequestHandler):
    """wsgiref's request handler with JSON error pages and an access log; a client that has
    not sent its request line and headers within ``request_seconds`` is dropped
    (:mod:`.request_deadline`).

    The HTTP layer answers some requests before the application sees them (a
    request line over 64 KiB: 414; a malformed one: 400); the standard
    library answers those with an HTML page, these are JSON like every other
    error. One access-log line per request (:meth:`handle` serves exactly one).
    """

    status: int | str | None = None
    server_version = SERVER

    def version_string(self) -> str:
        return SERVER  # (the base's adds the Python version)

    def handle(self) -> None:
        start = time.perf_counter()
        self.status = None
        try:
            self._serve_one()
        finally:
            self._log_access(time.perf_counter() - start)

    def _serve_one(self) -> None:
        # wsgiref's handle(), with the JSON ServerHandler and our limit's message
        self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414, f"the request line is longer than {MAX_REQUEST_LINE} bytes")
            self._discard_request()
            return
        if not self.parse_request():  # it has sent its error
            return
        handler = JsonServerHandler(
            self.rfile,
            self.wfile,  # type: ignore[arg-type]  # as wsgiref
            self.get_stderr(),
            self.get_environ(),
            multithread=False,
        )
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref's backpointer
        handler.run(self.server.get_app())  # type: ignore[attr-defined]  # a WSGIServer

    def _discard_request(self) -> None:
        """Read what is left of an oversized request (to the end of its headers,
        at most 1 MiB, for at most 2 s) before the connection closes: closing a
        socket with unread bytes sends a reset, and a client still sending
        then loses the response it was sent (seen in the tests: the 414 lost)."""
        deadline = time.monotonic() + 2
        tail, left = b"", DISCARD_LIMIT
        try:
            self.connection.settimeout(0.5)
            while left > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(65536, left))
                if not chunk:
                    return
                left -= len(chunk)
                seen = tail + chunk
                if b"\r\n\r\n" in seen or b"\n\n" in seen:
                    return
                tail = seen[-3:]
        except OSError:  # a timeout or a reset: nothing more to save
            return

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer ``code`` with ``{"error": message}`` (the reason phrase when none)."""
        reason = self.responses.get(code, ("Error", ""))[0]
        body = json.dumps({"error": message or reason}).encode()
        self.log_error("code %d, message %s", code, message)
        # A request line that did not parse leaves the version at HTTP/0.9, for
        # which the base class sends the body alone: send the status and headers.
        if self.request_version in ("", "HTTP/0.9"):
            self.request_version = "HTTP/1.0"
        self.close_connection = True
        self.send_response(code, reason)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header(*NOSNIFF)
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # called once per response, by send_response or wsgiref's ServerHandler.close
        self.status = int(code) if isinstance(code, int) else code  # HTTPStatus or "200"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        logger.debug("%s " + format, self.address_string(), *args)

    def _log_access(self, seconds: float) -> None:
        method, path = self.command, getattr(self, "path", "")
        if not method:  # the request line was too long or not read
            method, _, path = self.raw_requestline[:LOGGED_PATH].decode("latin-1").partition(" ")
        path = quote(path.partition("?")[0][:LOGGED_PATH], safe="/%:@!$&'()*+,;=-._~")
        access_logger.info(
            "%s %s %s %.1f ms", method or "-", path or "-", self.status or "-", seconds * 1000
        )


def make(
    host: str, port: int, app: Any = application, request_seconds: float = REQUEST_SECONDS
) -> WSGIServer:
    """A threaded wsgiref server for ``app`` (port 0 picks a free port); a client has
    ``request_seconds`` to send its request line and headers."""
    handler = type(
        "JsonRequestHandler", (JsonRequestHandler,), {"request_seconds": request_seconds}
    )
    return make_server(host, port, app, server_class=ThreadingWSGIServer, handler_class=handler)


def main(argv: list[str] | None = None) -> int:
    from .cli import SearchParser

    parser = SearchParser(
        prog="python -m search.server",
        description="Serve the search endpoint (GET /search?q=TEXT&size=N, "
        "/__heartbeat__, /__lbheartbeat__) over HTTP, with the standard library's "
        "wsgiref; one access-log line per request.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="port (default 8000; 0: any free port)"
    )
    parser.add_argument(
        "--es-log-level",
        default="ERROR",
        help="level of the Elasticsearch client's own log (default ERROR; INFO "
        "logs each request to Elasticsearch, WARNING each retry)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # The client logs every request at INFO and every retry with a traceback at
    # WARNING: with Elasticsearch down, ~100 lines per search. The 503 and the
    # access line already say what happened.
    logging.getLogger("elastic_transport").setLevel(args.es_log_level.upper())
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
