"""The dashboard's WSGI application (``dashboard.app:application`` for
gunicorn; ``python -m dashboard`` serves the same object).

Read-only: it answers GET and HEAD only, and reads the database in a
``READ ONLY`` session; operator actions stay on the audited command line.

============================  ===============================================
``/``                         the page: jobs, pipeline panels, fleet
``/jobs/NAME``                a job's page: its state now (status, next run, pause, deadline), its
metrics, its runs
``/api/jobs``                 ``--list-jobs --json``
``/api/jobs/NAME/history``    ``--history NAME --json`` (``?limit=N``, default 20)
``/api/jobs/NAME/runs/ID``    ``--logs NAME --run ID --json``: the run and what it logged and
printed
``/api/pipeline``             the pipeline panels (:mod:`dashboard.pipeline`)
``/api/fleet``                ``--nagios --json`` and every host's last tick
``/api/alerts``               ``--alerts --json`` (``?limit=N``) and the maintenance windows
``/__heartbeat__``            200 when ``/`` can be drawn whole (configuration, database, every
panel): ``ok``, or ``warning`` with each card that shows an error (Elasticsearch
down), else 503
``/__lbheartbeat__``          200 while the process serves requests
============================  ===============================================

A page path with ``?panels`` answers ``{"now", "panels": {id: html}}``: the
page's script fetches it to replace each panel in place (one renderer, on the
server, for the first view and for every refresh).

Errors are JSON ``{"error": ...}``: an unknown job 404, a bad ``limit`` 400, the
database unreachable 503, a failed query or a bug 500 (logged, no traceback
shown). A page whose data cannot be read is a short HTML page with the error.

Configuration, when the application is built by gunicorn: ``DASHBOARD_CONF``
(the ``crontabber.ini`` to read; default: the runner's ``./config/crontabber.ini``
then ``./crontabber.ini``), the environment as for the runner
(``RESOURCE_POSTGRESQL_PASSWORD``...), and ``DASHBOARD_REFRESH_SECONDS``
(default 10).

Browsers are untrusted (``docs/security.md``). Every response carries a Content-Security-Policy
without inline script or style, ``frame-ancestors 'none'``, ``nosniff`` and
``Referrer-Policy: no-referrer``. A request whose ``Host`` is not allowed is refused with 421
(DNS rebinding: a page on ``evil.example`` resolving to 127.0.0.1 cannot read ``/api/*``):
``DASHBOARD_ALLOWED_HOSTS`` (comma-separated names, ``*`` for any; default ``localhost``,
``127.0.0.1``, ``[::1]`` and the address served on). Optional authentication, for everything
but ``/__lbheartbeat__``: ``DASHBOARD_TOKEN`` (from the environment only, never the INI, never
logged) as ``Authorization: Bearer TOKEN`` or as the password of HTTP Basic (any user name: a
browser asks for it), and/or ``DASHBOARD_TRUSTED_USER_HEADER`` (e.g. ``X-Forwarded-User``: a
reverse proxy that authenticates sets it; then listen on 127.0.0.1 only). ``?limit`` is at most
:data:`MAX_LIMIT`.
"""

from __future__ import annotations

import base64
import hmac
import logging
import os
import threading
from importlib import resources
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, unquote

from crontabber import jsonout
from crontabber.errors import CrontabberError, DatabaseUnavailable, JobNotFound
from crontabber.inspection import JobStatus

from . import charts, page
from .pipeline import failed_panels, panel_warnings, pipeline_document
from .source import HISTORY_LIMIT, METRIC_RUNS, SPARK_RUNS, Source

#: The alerts the overview page shows (the newest).
ALERTS_SHOWN = 10

logger = logging.getLogger("dashboard.app")

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    421: "Misdirected Request",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
MAX_LIMIT = 1000  # ?limit: runs of a history page (a huge one answered 500)
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: On every response: no inline script or style anywhere (the page's are static files).
SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
]
DEFAULT_REFRESH = 10.0
STATIC = {
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
}


class HttpError(Exception):
    """A request answered with ``status`` and ``{"error": message}`` (and ``headers``)."""

    def __init__(
        self, status: int, message: str, headers: list[tuple[str, str]] | None = None
    ) -> None:
        self.status = status
        self.message = message
        self.headers = headers or []
        super().__init__(message)


def host_name(host: str) -> str:
    """``Host``'s name without its port (``[::1]:8100`` -> ``[::1]``), lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


#: Addresses that mean "every interface" (never a ``Host`` a browser sends).
WILDCARD_HOSTS = ("0.0.0.0", "::", "", "[::]")


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine (``127.0.0.0/8``, ``::1``,
    ``localhost``)."""
    import ipaddress

    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """Who may ask: the ``Host`` allow-list and the optional authentication (see the module
    docstring). Built from the environment unless given."""

    def __init__(
        self,
        allowed_hosts: Iterable[str] | None = None,
        token: str | None = None,
        user_header: str | None = None,
    ) -> None:
        if allowed_hosts is None:
            listed = os.environ.get("DASHBOARD_ALLOWED_HOSTS", "")
            allowed_hosts = [h for h in listed.split(",") if h.strip()] or DEFAULT_HOSTS
        self.allowed_hosts = {host_name(h) for h in allowed_hosts}
        self.token = token if token is not None else os.environ.get("DASHBOARD_TOKEN", "")
        header = (
            user_header
            if user_header is not None
            else os.environ.get("DASHBOARD_TRUSTED_USER_HEADER", "")
        )
        self.user_key = "HTTP_" + header.upper().replace("-", "_") if header else ""

    def allow_host(self, host: str) -> None:
        """Add the address the server listens on (``python -m dashboard --host``); a
        wildcard address (``0.0.0.0``, ``::``) is no name a browser asks for: not added."""
        if host.strip() not in WILDCARD_HOSTS:
            self.allowed_hosts.add(host_name(f"[{host}]" if ":" in host else host))

    def check(self, environ: dict[str, Any]) -> None:
        """Raises HttpError: 421 for a ``Host`` not allowed, 401 without the credentials."""
        if "*" not in self.allowed_hosts:
            host = host_name(environ.get("HTTP_HOST") or environ.get("SERVER_NAME", ""))
            if host not in self.allowed_hosts:
                raise HttpError(
                    421, f"host {host[:100]!r} is not allowed (DASHBOARD_ALLOWED_HOSTS)"
                )
        if not self.token and not self.user_key:
            return
        if self.user_key and environ.get(self.user_key, "").strip():
            return
        if self.token and hmac.compare_digest(
            _credential(environ.get("HTTP_AUTHORIZATION", "")), self.token.encode()
        ):
            return
        raise HttpError(
            401,
            "authentication required",
            [("WWW-Authenticate", 'Basic realm="crontabber dashboard", charset="UTF-8"')],
        )


def _credential(authorization: str) -> bytes:
    """The token of ``Bearer TOKEN``, or the password of ``Basic base64(user:TOKEN)``."""
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip().encode()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip(), validate=True).partition(b":")[2]
        except ValueError:
            return b""
    return b""


Response = tuple[int, str, bytes]  # status, content type, body


def json_response(status: int, document: Any) -> Response:
    return status, "application/json", (jsonout.dumps(document) + "\n").encode()


def html_response(status: int, text: str) -> Response:
    return status, "text/html; charset=utf-8", text.encode()


class DashboardApp:
    """The WSGI application. ``source`` is loaded on first use when not given
    (from ``DASHBOARD_CONF`` and the environment), so importing this module
    (gunicorn) reads nothing and connects nowhere."""

    def __init__(
        self,
        source: Source | None = None,
        refresh_seconds: float | None = None,
        guard: Guard | None = None,
    ) -> None:
        self._source = source
        self._lock = threading.Lock()
        self.guard = guard or Guard()
        self.refresh_seconds = (
            refresh_seconds
            if refresh_seconds is not None
            else float(os.environ.get("DASHBOARD_REFRESH_SECONDS", DEFAULT_REFRESH))
        )

    @property
    def source(self) -> Source:
        """The settings and jobs (loaded once).

        Raises:
            ConfigurationError: the configuration does not load.
        """
        with self._lock:
            if self._source is None:
                self._source = Source.load(os.environ.get("DASHBOARD_CONF") or None, {})
            return self._source

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        extra: list[tuple[str, str]] = []
        try:
            if environ.get("PATH_INFO") != "/__lbheartbeat__":  # the load balancer's probe
                self.guard.check(environ)
            status, content_type, body = self.route(environ)
        except HttpError as exc:
            status, content_type, body = json_response(exc.status, {"error": exc.message})
            extra = exc.headers
        except DatabaseUnavailable as exc:
            logger.warning("%s", exc)
            status, content_type, body = json_response(503, {"error": str(exc)})
        except CrontabberError as exc:  # a bad configuration, a failed panel query
            logger.error("%s on %s", exc, environ.get("PATH_INFO"))
            status, content_type, body = json_response(500, {"error": str(exc)})
        except Exception:  # noqa: BLE001 - the last line of defence: log, never show
            logger.exception("dashboard failed on %s", environ.get("PATH_INFO"))
            status, content_type, body = json_response(500, {"error": "internal error"})
        start_response(
            f"{status} {REASONS[status]}",
            [
                ("Content-Type", content_type),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
                *SECURITY_HEADERS,
                *extra,
            ],
        )
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    def route(self, environ: dict[str, Any]) -> Response:
        """The response to one request.

        Raises:
            HttpError: 404 (no such page or job), 405 (not GET), 400 (a bad parameter).
            DatabaseUnavailable: the database does not answer.
        """
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            raise HttpError(405, "the dashboard is read-only: only GET is supported")
        path = environ.get("PATH_INFO", "") or "/"
        params = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        if path == "/__lbheartbeat__":
            return json_response(200, {"status": "ok"})
        if path == "/__heartbeat__":
            return self.heartbeat()
        if path.startswith("/static/"):
            return self.static(path.removeprefix("/static/"))
        if path == "/":
            return self.overview_page("panels" in params)
        if path == "/api/jobs":
            with self.source.session() as session:
                return json_response(200, self.source.jobs_document(session))
        if path == "/api/pipeline":
            with self.source.session() as session:
                return json_response(200, pipeline_document(self.source, session))
        if path == "/api/fleet":
            with self.source.session() as session:
                return json_response(200, self.source.fleet_document(session))
        if path == "/api/alerts":
            with self.source.session() as session:
                return json_response(200, self.source.alerts_document(session, _limit(params)))
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[:2] == ["api", "jobs"] and parts[3] == "history":
            return self.history_json(unquote(parts[2]), params)
        if len(parts) == 5 and parts[:2] == ["api", "jobs"] and parts[3] == "runs":
            return self.run_json(unquote(parts[2]), parts[4])
        if len(parts) == 2 and parts[0] == "jobs":
            return self.history_page(unquote(parts[1]), "panels" in params)
        raise HttpError(404, "no such page")  # (not the path: the client's text, answered back)

    def heartbeat(self) -> Response:
        """200 ``ok`` only when ``/`` can be drawn whole: the configuration loads, the database
        answers and no panel's query fails (a panel of a job not configured here is not a
        failure); else 503 with the error, or each failed panel's."""
        try:
            now, _, failed, warnings = self.overview_panels()
        except CrontabberError as exc:
            return json_response(503, {"status": "error", "error": str(exc)})
        if failed:
            return json_response(
                503,
                {
                    "status": "error",
                    "panels": failed,
                    "error": f"{len(failed)} panel(s) of / failed: "
                    + "; ".join(f"{k}: {v}" for k, v in failed.items()),
                },
            )
        document = {"status": "ok", "database": "ok", "now": now, "jobs": len(self.source.jobs)}
        if warnings:  # drawn whole, but a card says a service is away: not "ok"
            document.update(
                status="warning",
                warnings=warnings,
                warning=f"{len(warnings)} panel(s) of / show an error: "
                + "; ".join(f"{k}: {v}" for k, v in warnings.items()),
            )
        return json_response(200, document)

    def static(self, name: str) -> Response:
        if name not in STATIC:
            raise HttpError(404, "no such file")
        body = resources.files("dashboard").joinpath("static", name).read_bytes()
        return 200, STATIC[name], body

    def history_json(self, name: str, params: dict[str, list[str]]) -> Response:
        limit = _limit(params)
        with self.source.session() as session:
            try:
                found = self.source.runs(session, name, limit)
            except JobNotFound as exc:
                raise HttpError(404, str(exc)) from None
            return json_response(200, found.as_json())

    def run_json(self, name: str, run: str) -> Response:
        if not (run.isascii() and run.isdigit() and len(run) < 19):
            raise HttpError(400, "a run id is a whole number")
        with self.source.session() as session:
            try:
                record = self.source.run_output(session, name, int(run))
            except JobNotFound as exc:
                raise HttpError(404, str(exc)) from None
        if record is None:
            raise HttpError(404, f"{name}: no run {run} in the run ledger")
        return json_response(200, record.as_json())

    def overview_panels(self) -> tuple[Any, dict[str, str], dict[str, str], dict[str, str]]:
        """The database clock, the overview's panels (id -> HTML), the panels that could
        not be read, with why: each is read on its own, so one that fails (a missing table, a
        bug in its query) is drawn as its error and the others as usual; and the panels read
        whole whose card shows an error (:func:`dashboard.pipeline.panel_warnings`).

        Raises:
            DatabaseUnavailable: the database does not answer.
            ConfigurationError: the configuration does not load.
        """
        source, failed = self.source, {}

        def read(key: str, build: Callable[[], Any]) -> Any:
            try:
                return build()
            except DatabaseUnavailable:
                raise
            except CrontabberError as exc:
                logger.error("panel %s of /: %s", key, exc)
                failed[key] = str(exc)
                return None

        with source.session() as session:
            now = session.pipeline.now()
            views = read("jobs", lambda: source.jobs_views(session)[0])
            runs = (
                read(
                    "jobs",
                    lambda: {
                        view.name: source.runs(session, view.name, SPARK_RUNS).runs
                        for view in views
                        if view.status is not JobStatus.BROKEN
                    },
                )
                if views is not None
                else {}
            )
            pipeline = read("pipeline", lambda: pipeline_document(source, session))
            fleet = read("fleet", lambda: source.fleet_document(session))
            alerts = read("alerts", lambda: source.alerts_document(session, ALERTS_SHOWN))
        warnings: dict[str, str] = {}
        if pipeline is not None:
            failed.update({f"pipeline.{k}": v for k, v in failed_panels(pipeline).items()})
            warnings = {f"pipeline.{k}": v for k, v in panel_warnings(pipeline).items()}
        return (
            now,
            _panels_html(now, views, runs, alerts, pipeline, fleet, failed),
            failed,
            warnings,
        )

    def overview_page(self, panels_only: bool) -> Response:
        try:
            now, panels, _, _ = self.overview_panels()
        except DatabaseUnavailable as exc:
            if panels_only:
                raise
            return html_response(503, _error_page(str(exc)))
        if panels_only:
            return json_response(200, {"now": now, "panels": panels})
        return html_response(200, page.page("crontabber", now, panels, self.refresh_seconds))

    def history_page(self, name: str, panels_only: bool) -> Response:
        with self.source.session() as session:
            try:
                found = self.source.runs(session, name, HISTORY_LIMIT)
                record = session.state.run_output(found.app_name)  # the name is resolved
            except JobNotFound as exc:
                if panels_only:
                    raise HttpError(404, str(exc)) from None
                return html_response(404, _error_page(str(exc)))
            view, _ = self.source.job_view(session, found.app_name)
            groups = self.source.rerun_groups(session, found.runs)
            metrics = charts.metrics_panel(
                found.app_name,
                self.source.metric_runs(session, found.app_name, METRIC_RUNS),
                METRIC_RUNS,
            )
        panels = {"state": page.state_panel(found.app_name, view, found.now)}
        if metrics is not None:  # a job whose runs returned no metric has no such panel
            panels["metrics"] = metrics
        if groups:  # what a rerun did, whole: its runs (killed ones too), done, left
            panels["reruns"] = page.reruns_panel(groups, found.now)
        panels["history"] = page.history_panel(
            found.app_name, found.runs, found.more, found.now, found.is_backfill
        )
        panels["output"] = page.output_panel(record, found.now, found.runs)
        if panels_only:
            return json_response(200, {"now": found.now, "panels": panels})
        return html_response(
            200,
            page.page(
                f"crontabber: {found.app_name}", found.now, panels, self.refresh_seconds, back=True
            ),
        )


def _limit(params: dict[str, list[str]]) -> int:
    """``?limit=N`` (default 20).

    Raises:
        HttpError: 400, not one whole number from 1 to :data:`MAX_LIMIT`.
    """
    values = params.get("limit", [str(HISTORY_LIMIT)])
    if (
        len(values) != 1
        or not values[0].isascii()
        or not values[0].isdigit()
        or not 1 <= int(values[0]) <= MAX_LIMIT
    ):
        raise HttpError(
            400, f"limit must be given once, as a whole number of runs from 1 to {MAX_LIMIT}"
        )
    return int(values[0])


def _error_page(message: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>crontabber: '
        f'error</title></head><body><h1>crontabber dashboard</h1><p class="warn">'
        f'{page.esc(message)}</p><p><a href="/">back</a></p></body></html>\n'
    )


application = DashboardApp()


def _panels_html(
    now: Any,
    views: Any,
    runs: Any,
    alerts: Any,
    pipeline: Any,
    fleet: Any,
    failed: dict[str, str],
) -> dict[str, str]:
    """The overview's panels, id -> HTML, from what was read of each (None: not read, drawn
    as its error from ``failed``, by panel key); the health panel needs both the fleet and
    the jobs, and shows the fleet's error first."""
    health = (
        page.health_panel(fleet["check"], views)
        if fleet is not None and views is not None
        else page.error_panel("Health", failed.get("fleet") or failed.get("jobs", ""))
    )
    return {
        "health": health,
        "jobs": page.jobs_panel(views, runs or {}, now)
        if views is not None
        else page.error_panel("Jobs", failed["jobs"]),
        "alerts": page.alerts_panel(alerts)
        if alerts is not None
        else page.error_panel("Alerts", failed["alerts"]),
        "pipeline": page.pipeline_panel(pipeline)
        if pipeline is not None
        else page.error_panel("Pipeline", failed["pipeline"]),
        "fleet": page.fleet_panel(fleet)
        if fleet is not None
        else page.error_panel("Fleet", failed["fleet"]),
    }
