"""``python -m dashboard``: serve the dashboard with the standard library's
wsgiref, one thread per request, one access-log line per request (logger
``dashboard.access``: method, path, status, duration).

    python -m dashboard [--host 127.0.0.1] [--port 8100] [--admin.conf=FILE]
                        [--refresh SECONDS] [--crontabber.OPTION=VALUE ...]

Settings come from ``crontabber.ini``, the environment and the command line,
exactly as the runner reads them (:func:`crontabber.config.load_settings`);
a bad configuration or an unreachable database is one line on stderr and
exit 1, before anything is served. Under gunicorn
(``gunicorn dashboard.app:application``) see :mod:`dashboard.app`.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socketserver
import sys
import time
from typing import Any, TextIO
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from crontabber import CommandParser, redact_handlers, secret_values, split_overrides
from crontabber.errors import ConfigurationError, CrontabberError
from search.request_deadline import REQUEST_SECONDS, RequestDeadline

from .app import DEFAULT_REFRESH, DashboardApp, is_loopback
from .source import Source

logger = logging.getLogger("dashboard.server")
access_logger = logging.getLogger("dashboard.access")

EXIT_OK, EXIT_ERROR = 0, 1
#: What ``Server:`` says (wsgiref's named the Python version: a hint for an attacker).
SERVER = "crontabber-dashboard"


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server, one thread per request (a slow panel does not hold up the rest)."""

    daemon_threads = True


class NamedServerHandler(ServerHandler):
    """wsgiref's per-request handler, saying :data:`SERVER` (not the Python version)."""

    server_software = SERVER


class AccessLogHandler(RequestDeadline, WSGIRequestHandler):
    """wsgiref's request handler, logging one line per request to ``dashboard.access``.

    A connection that sends nothing for ``timeout`` seconds is closed (``DASHBOARD_IDLE_TIMEOUT``,
    default 30), and one whose request line and headers have not all arrived within
    ``request_seconds`` (``DASHBOARD_REQUEST_TIMEOUT``, default 10) is dropped
    (:mod:`search.request_deadline`): an idle or trickling client cannot hold a thread."""

    timeout = float(os.environ.get("DASHBOARD_IDLE_TIMEOUT", "30"))
    request_seconds = float(os.environ.get("DASHBOARD_REQUEST_TIMEOUT", str(REQUEST_SECONDS)))
    server_version = SERVER

    def version_string(self) -> str:
        return SERVER  # (the base's adds the Python version)

    def handle(self) -> None:
        """wsgiref's, with :class:`NamedServerHandler`."""
        self._started = time.perf_counter()
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # it has sent its error (or the client was dropped)
            return
        handler = NamedServerHandler(
            self.rfile,
            self.wfile,  # type: ignore[arg-type]  # as wsgiref
            self.get_stderr(),
            self.get_environ(),
            multithread=False,
        )
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref's backpointer
        handler.run(self.server.get_app())  # type: ignore[attr-defined]  # a WSGIServer

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        took = (time.perf_counter() - getattr(self, "_started", time.perf_counter())) * 1000
        access_logger.info(
            "%s %s %s %.1f ms",
            self.command or "-",
            (getattr(self, "path", "") or "-")[:200],
            code,
            took,
        )

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        logger.debug("%s " + format, self.address_string(), *args)

    def get_environ(self) -> dict[str, Any]:
        """wsgiref's environment, without the request headers whose name holds ``_``:
        wsgiref maps ``X-Forwarded_User`` to ``HTTP_X_FORWARDED_USER`` like
        ``X-Forwarded-User``, so a client could set the trusted user header past a proxy
        that only strips the dashed name (nginx and gunicorn drop such headers too)."""
        for name in {name for name in self.headers if "_" in name}:
            del self.headers[name]
        return super().get_environ()


def make(host: str, port: int, app: Any, request_seconds: float | None = None) -> WSGIServer:
    """A threaded wsgiref server for ``app`` (port 0 picks a free port); ``request_seconds``:
    the time a client has to send its request line and headers (None: the handler's)."""
    handler: type[AccessLogHandler] = AccessLogHandler
    if request_seconds is not None:
        handler = type(
            "AccessLogHandler", (AccessLogHandler,), {"request_seconds": request_seconds}
        )
    return make_server(host, port, app, server_class=ThreadingWSGIServer, handler_class=handler)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m dashboard",
        description=(
            "Serve the read-only operator dashboard (jobs, run history, pipeline health, fleet) "
            "over HTTP."
        ),
        epilog="Any runner option can be given as --NAMESPACE.OPTION=VALUE, as for "
        "python -m crontabber; under gunicorn: gunicorn dashboard.app:application "
        "with DASHBOARD_CONF=FILE.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=8100, help="port (default 8100; 0: any free port)"
    )
    parser.add_argument(
        "--admin.conf",
        dest="conf",
        metavar="FILE",
        help="the INI file (default: ./config/crontabber.ini or ./crontabber.ini)",
    )
    parser.add_argument(
        "--refresh",
        type=float,
        default=DEFAULT_REFRESH,
        metavar="SECONDS",
        help=f"how often the page refreshes its panels (default {DEFAULT_REFRESH:g})",
    )
    return parser


def load(argv: list[str]) -> tuple[argparse.Namespace, DashboardApp]:
    """The arguments and the application, its configuration loaded and the
    database reached once.

    Raises:
        ConfigurationError: a bad argument or configuration.
        DatabaseUnavailable: the database does not answer.
    """
    args, rest = build_parser().parse_known_args(argv)
    if args.refresh <= 0:
        raise ConfigurationError(
            "--refresh", f"must be a positive number of seconds, not {args.refresh:g}"
        )
    source = Source.load(args.conf, split_overrides(rest))
    with source.session() as session:
        session.pipeline.now()
    app = DashboardApp(source, args.refresh)
    if app.guard.user_key and not is_loopback(args.host):
        raise ConfigurationError(
            "--host",
            f"DASHBOARD_TRUSTED_USER_HEADER trusts a header "
            f"anyone can send to {args.host}: listen on 127.0.0.1 behind "
            "the proxy that sets it",
        )
    app.guard.allow_host(args.host)  # the address it serves on is a name it answers to
    return args, app


def listen(host: str, port: int, app: Any) -> WSGIServer:
    """:func:`make`, its failure to listen naming the address and port.

    Raises:
        ConfigurationError: the address is in use or cannot be bound.
    """
    try:
        return make(host, port, app)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(
                "--host/--port",
                f"{host}:{port} is already in use (another "
                "process listens there): --port N picks another, 0 any "
                "free one",
            ) from None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
            raise ConfigurationError(
                "--host/--port", f"cannot listen on {host}:{port}: {exc.strerror}"
            ) from None
        raise


def main(argv: list[str], stderr: TextIO = sys.stderr) -> int:
    """Serve until interrupted; 1 with one line on stderr when it cannot start."""
    log_format = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(stream=stderr, level=logging.INFO, format=log_format)
    # as the runner's: secrets masked, control characters escaped (a request's path is the
    # client's text, and reaches the terminal of whoever reads the log)
    redact_handlers(secret_values(os.environ), log_format)
    logging.getLogger("everett").setLevel(logging.WARNING)  # it logs raw values, secrets too
    logging.getLogger("elastic_transport").setLevel(logging.ERROR)  # a line per request
    try:
        args, app = load(argv)
        server = listen(args.host, args.port, app)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (CrontabberError, OSError) as exc:
        print(f"python -m dashboard: {exc}", file=stderr)
        return EXIT_ERROR
    logger.info("serving on http://%s:%d/", *server.server_address[:2])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK
