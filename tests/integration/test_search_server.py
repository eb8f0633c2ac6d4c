"""The HTTP endpoint, served by wsgiref on a free port, against the real Elasticsearch."""

import json
import logging
import re
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest

from search.client import make_es_client
from search.engine import Searcher
from search.server import SearchApp, make
from tests.fixtures.search_data import corpus_index, es  # noqa: F401 - the fixture
from tests.fixtures.slow_client import trickle_request
from tests.fixtures.waiting import wait_for

HIT_KEYS = {"debug_file", "debug_id", "filename", "code_file", "code_id", "score"}


def serve(searcher):
    server = make("127.0.0.1", 0, SearchApp(searcher))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def url(corpus_index):  # noqa: F811
    server = serve(Searcher(es(), corpus_index[0]))
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(url, path, **params):
    query = urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(f"{url}{path}?{query}", timeout=30) as response:
            return response.status, response.headers["Content-Type"], json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], json.load(exc)


def test_search_answers_the_documented_shape(url):
    status, kind, body = get(url, "/search", q="firefix", size=2)
    assert (status, kind) == (200, "application/json")
    assert set(body) == {"query", "terms", "total", "hits"}
    assert body["query"] == "firefix" and body["terms"][0] == [1.1, "firefix"]
    assert [0.8571, "firefox"] in body["terms"] and body["total"] >= 2
    assert len(body["hits"]) == 2 and all(set(hit) == HIT_KEYS for hit in body["hits"])
    assert body["hits"][0]["debug_file"].startswith("firefox.")
    assert get(url, "/search", q="xul.pdb")[2]["hits"][0]["filename"] == "xul.sym"


@pytest.mark.parametrize(
    "params, error",
    [
        ({}, "the query is empty"),
        ({"q": "  "}, "the query is empty"),
        ({"q": "x" * 201}, "the query is longer than 200 characters (after Unicode normalisation)"),
        # 170 characters, 510 once NFC-normalised: Elasticsearch answered 500 ("Term too complex")
        (
            {"q": "\ufb2c" * 170},
            "the query is longer than 200 characters (after Unicode normalisation)",
        ),
        ({"q": "xul", "size": "ten"}, "size must be a whole number"),
        ({"q": "xul", "size": "0"}, "size must be between 1 and 100"),
        ({"q": "xul", "size": "101"}, "size must be between 1 and 100"),
    ],
)
def test_bad_input_is_a_400_with_a_json_error(url, params, error):
    assert get(url, "/search", **params) == (400, "application/json", {"error": error})


def test_long_words_within_the_limit_are_searched(url):
    """Within the limit after normalisation, words whose fuzzy automaton is largest still
    search (issue #24 item 9: the limit alone keeps Elasticsearch from refusing them)."""
    for query in ("\ufb2c" * 66, "\U00020000" * 200, "\u0928\u094d\u200d" * 66, "a\u0301" * 100):
        status, kind, body = get(url, "/search", q=query)
        assert (status, kind) == (200, "application/json"), (query[:3], status, body)


@pytest.mark.parametrize(
    "query, error",
    [
        ("q=xul&q=nss3", "parameter 'q' is given 2 times; give it once"),
        ("q=xul&size=1&size=2", "parameter 'size' is given 2 times; give it once"),
        ("q=&q=xul", "parameter 'q' is given 2 times; give it once"),
        ("q=xul&size=", "size must be a whole number"),
    ],
)
def test_a_repeated_or_blank_parameter_is_a_400(url, query, error):
    assert raw(url, f"GET /search?{query} HTTP/1.0\r\n\r\n".encode()) == (
        400,
        "application/json",
        {"error": error},
    )


def raw(url, request):
    """Send ``request`` bytes as they are; (status, content type, JSON body)."""
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers.get("Content-Type"), json.loads(body)


class Broken:
    """A searcher with a bug: the endpoint's last line of defence answers."""

    def search(self, query, size):
        raise RuntimeError("a bug")


def test_every_error_is_json_never_html(url):
    long_url = "/search?q=" + "x" * 100_000
    cases = [
        (
            b"GET /nope HTTP/1.0\r\n\r\n",
            404,
            "no such endpoint (GET /search, /__heartbeat__, /__lbheartbeat__)",
        ),
        (b"POST /search?q=xul HTTP/1.0\r\nContent-Length: 0\r\n\r\n", 405, "only GET is supported"),
        (
            f"GET {long_url} HTTP/1.0\r\n\r\n".encode(),
            414,
            "the request line is longer than 65536 bytes",
        ),
        (b"GET /search?q=xul HTTP/1.0 junk\r\n\r\n", 400, "Bad request version ('junk')"),
        (b"GET\r\n\r\n", 400, "Bad request syntax ('GET')"),
        (b"GET /search?q=xul HTTP/9.9\r\n\r\n", 505, "Invalid HTTP version (9.9)"),
    ]
    for request, status, error in cases:
        assert raw(url, request) == (status, "application/json", {"error": error})
    server = serve(Broken())
    try:
        assert get(f"http://127.0.0.1:{server.server_address[1]}", "/search", q="xul") == (
            500,
            "application/json",
            {"error": "internal error"},
        )
    finally:
        server.shutdown()
        server.server_close()


def test_one_access_log_line_per_request(url, caplog):
    caplog.set_level(logging.INFO, logger="search.access")
    get(url, "/search", q="xul", size=1)
    get(url, "/search", q="xul", size=0)
    get(url, "/nope")
    raw(url, f"GET /search?q={'x' * 100_000} HTTP/1.0\r\n\r\n".encode())

    def logged() -> list[str]:  # a line is logged after its answer is sent: wait for it
        return [r.getMessage() for r in caplog.records if r.name == "search.access"]

    wait_for(lambda: len(logged()) >= 4, what="four access lines")
    lines = logged()
    assert len(lines) == 4, lines
    # each is logged by its request's thread once the answer is sent: in any order
    expected = ["GET /nope 404 ", "GET /search 200 ", "GET /search 400 ", "GET /search 414 "]
    assert sorted(line.rsplit(" ", 2)[0] + " " for line in lines) == expected, lines
    assert all(re.fullmatch(r"GET /\w+ \d{3} \d+\.\d ms", line) for line in lines), lines
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "search.access")


def test_heartbeats_and_unknown_paths(url):
    status, _, body = get(url, "/__heartbeat__")
    assert status == 200 and body["status"] == "ok" and body["elasticsearch"] in ("green", "yellow")
    assert get(url, "/__lbheartbeat__") == (200, "application/json", {"status": "ok"})
    assert get(url, "/nope")[:2] == (404, "application/json")


def test_a_missing_alias_fails_the_heartbeat_and_searches_with_503():
    server = serve(Searcher(es(), "test-no-such-alias"))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, _, body = get(url, "/__heartbeat__")
        assert status == 503 and "alias test-no-such-alias does not exist" in body["error"]
        status, _, body = get(url, "/search", q="xul")
        assert status == 503 and "does not exist" in body["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_elasticsearch_down_is_a_503_with_a_json_error_never_a_traceback():
    closed = make_es_client("http://127.0.0.1:9", request_timeout=2)  # nothing listens on 9
    server = serve(Searcher(closed, "symbols"))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for path in ("/search", "/__heartbeat__"):
            status, kind, body = get(url, path, q="xul")
            assert (status, kind) == (503, "application/json")
            assert "Elasticsearch unreachable: ConnectionError" in body["error"]
            assert "Traceback" not in json.dumps(body)
        assert get(url, "/__lbheartbeat__")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_no_answer_echoes_the_path_names_python_or_may_be_sniffed(url):
    """The first review's I2: a 404 does not echo the path (the client's text), ``Server:``
    does not name the Python version, and every answer says ``nosniff`` (errors of the HTTP
    layer too)."""
    for request in (
        b"GET /<script>x</script> HTTP/1.0\r\n\r\n",
        b"GET /search?q=xul HTTP/1.0\r\n\r\n",
        b"GET\r\n\r\n",
    ):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(request)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:])
        assert headers["Server"] == "symbols-search", request
        assert headers["X-Content-Type-Options"] == "nosniff", request
        assert b"script" not in body and b"Python" not in data, request


def test_a_client_trickling_its_headers_is_dropped():
    """S3-L7: each byte of the headers within the per-read timeout, the whole past the
    request deadline (1 s here): the connection is dropped, the application never runs."""
    server = make("127.0.0.1", 0, SearchApp(Broken()), request_seconds=1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sent, answer = trickle_request(server.server_address[1], 40, 0.25)
    finally:
        server.shutdown()
        server.server_close()
    assert answer == b"" and sent < 40
