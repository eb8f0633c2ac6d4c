"""The dashboard against untrusted browsers (issue #24 item 6), over HTTP against a real
database and S3: security headers on every response, the Host allow-list, the optional
token and trusted-proxy header, a capped ?limit, the S3 listing cached and bounded."""

from __future__ import annotations

import base64
import re
import socket
import threading
import time

from dashboard.app import Guard
from dashboard.server import make
from jobs.missing_symbols import write_batch
from tests.fixtures.dashboard_data import dashboard, pipeline_fleet  # noqa: F401 - fixtures
from tests.fixtures.slow_client import trickle_request
from tests.helpers import s3_client

PATHS = [
    "/",
    "/jobs/prune-s3",
    "/api/jobs",
    "/api/pipeline",
    "/api/fleet",
    "/static/dashboard.js",
    "/__heartbeat__",
    "/__lbheartbeat__",
    "/nope",
    "/api/jobs/prune-s3/history?limit=x",
]


def test_every_response_carries_the_security_headers_and_the_page_no_inline_code(
    dashboard, s3_bucket, es_index
):  # noqa: F811
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    for path in PATHS:
        status, headers, body = dashboard.request(path)
        csp = headers["Content-Security-Policy"] or ""
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, (path, status)
        assert "unsafe-inline" not in csp
        assert headers["X-Content-Type-Options"] == "nosniff", path
        assert headers["Referrer-Policy"] == "no-referrer", path
    for path in ("/", "/jobs/prune-s3"):
        page = dashboard.request(path)[2]
        assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == []  # no inline script
        assert (
            "<style" not in page
            and " style=" not in page
            and " on" not in re.sub(r">[^<]*<", "><", page).replace(" one", "")
        )  # no inline style, no on* handlers


def raw_get(url: str, path: str, host: str) -> tuple[int, bytes]:
    """A request with any ``Host`` (urllib always sends the URL's)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data.split(b"\r\n\r\n", 1)[1]


def test_a_host_not_allowed_is_refused_dns_rebinding(dashboard, s3_bucket, es_index):  # noqa: F811
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    url = dashboard.start(guard=Guard())
    status, body = raw_get(url, "/api/jobs", "evil.example:8100")
    assert status == 421 and b"'evil.example' is not allowed" in body
    for host in ("localhost:8100", "127.0.0.1", "[::1]:8100", "LOCALHOST"):
        assert raw_get(url, "/api/jobs", host)[0] == 200, host
    assert raw_get(url, "/__lbheartbeat__", "evil.example")[0] == 200  # the balancer's probe
    dashboard.stop()
    url = dashboard.start(guard=Guard(allowed_hosts=["ops.example.org"]))
    assert raw_get(url, "/api/jobs", "ops.example.org")[0] == 200
    assert raw_get(url, "/api/jobs", "localhost")[0] == 421


def test_a_token_is_required_when_configured(dashboard, s3_bucket, es_index):  # noqa: F811
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    token = "dash-Token-31337"
    dashboard.start(guard=Guard(token=token))
    status, headers, body = dashboard.request("/api/jobs")
    assert (status, body) == (401, {"error": "authentication required"})
    assert headers["WWW-Authenticate"].startswith("Basic realm=")
    assert dashboard.request("/", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert dashboard.request("/", headers={"Authorization": f"Bearer {token}"})[0] == 200
    basic = base64.b64encode(f"oncall:{token}".encode()).decode()
    assert dashboard.request("/api/fleet", headers={"Authorization": f"Basic {basic}"})[0] == 200
    assert dashboard.request("/__lbheartbeat__")[0] == 200
    assert dashboard.request("/__heartbeat__")[0] == 401


def test_a_trusted_proxy_user_header_is_required_when_configured(dashboard, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start(guard=Guard(user_header="X-Forwarded-User"))
    assert dashboard.request("/api/jobs")[0] == 401
    assert dashboard.request("/api/jobs", headers={"X-Forwarded-User": "alice"})[0] == 200


def test_a_huge_limit_is_a_400_not_a_500(dashboard, s3_bucket, es_index):  # noqa: F811
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    dashboard.start()
    for limit in ("1" + "0" * 30, "1001", "%C2%B2"):  # the last: a superscript two
        status, _, body = dashboard.get(f"/api/jobs/prune-s3/history?limit={limit}")
        assert status == 400 and body["error"].endswith("from 1 to 1000"), (limit, status, body)
    assert dashboard.get("/api/jobs/prune-s3/history?limit=1000")[0] == 200


def test_the_inbox_listing_is_cached_and_bounded(dashboard, s3_bucket, es_index, monkeypatch):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)  # two batches waiting
    monkeypatch.setenv("DASHBOARD_S3_CACHE_SECONDS", "2")
    dashboard.start()
    first = dashboard.get("/api/pipeline")[2]["missing_symbols"]
    assert (first["batches_waiting"], first["waiting_capped"]) == (2, False)
    write_batch(s3_client(), s3_bucket, [{"debug_file": "a.pdb", "debug_id": "A" * 33}])
    assert dashboard.get("/api/pipeline")[2]["missing_symbols"]["batches_waiting"] == 2  # cached
    time.sleep(2.2)
    assert dashboard.get("/api/pipeline")[2]["missing_symbols"]["batches_waiting"] == 3
    dashboard.stop()
    monkeypatch.setenv("DASHBOARD_S3_MAX_LISTED", "2")
    dashboard.start()
    capped = dashboard.get("/api/pipeline")[2]["missing_symbols"]
    # only the first 2 objects are listed (consumed ones among them): a lower bound, marked
    assert capped["waiting_capped"] is True and capped["batches_waiting"] <= 2
    assert re.search(r"batches waiting <[^>]*>\d+</[a-z]+>\+", dashboard.request("/")[2])


def test_no_answer_echoes_the_path_or_names_python(dashboard, s3_bucket, es_index):  # noqa: F811
    """The first review's I2: a 404 does not echo the path; ``Server:`` does not name the
    Python version (the application's answers and the HTTP layer's errors alike)."""
    dashboard.start()
    for path in ("/<script>x</script>", "/static/<img>", "/api/jobs"):
        status, headers, body = dashboard.request(path)
        assert headers["Server"] == "crontabber-dashboard", path
        assert "script" not in str(body) and "img" not in str(body), (path, body)
    port = int(dashboard.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"GET / HTTP/1.0\r\nX-Long: " + b"y" * 70000 + b"\r\n\r\n"
        )  # the HTTP layer's 431
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert b"Server: crontabber-dashboard\r\n" in data and b"Python" not in data


def test_a_client_trickling_its_headers_is_dropped():
    """S3-L7: each byte of the headers within the idle timeout, the whole past the request
    deadline (1 s here): the connection is dropped, the application never runs."""
    called = []

    def app(environ, start_response):
        called.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    server = make("127.0.0.1", 0, app, request_seconds=1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sent, answer = trickle_request(server.server_address[1], 40, 0.25)
    finally:
        server.shutdown()
        server.server_close()
    assert answer == b"" and sent < 40 and called == []
