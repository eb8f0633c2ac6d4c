"""What a production host must not point at (issue #44, item 3): the development services'
addresses and keys, as ``crontabber.config.devdefaults`` knows them, are ``devservices``' (the
layout ``scripts/services.sh`` provisions); and no Elasticsearch client falls back to one."""

from __future__ import annotations

import pytest

import devservices
from crontabber.config.devdefaults import (
    DEVELOPMENT_PORTS,
    DEVELOPMENT_S3_KEYS,
    development_values,
)
from search.client import es_url
from search.errors import NoElasticsearchAddress


def test_the_development_defaults_are_devservices():
    assert DEVELOPMENT_PORTS == {
        "Elasticsearch": devservices.DEFAULT_PORTS["es"],
        "S3 (s3proxy)": devservices.DEFAULT_PORTS["s3"],
        "PostgreSQL": devservices.DEFAULT_PORTS["pg"],
        "PgBouncer": devservices.DEFAULT_PORTS["pgb"],
    }
    assert DEVELOPMENT_S3_KEYS == devservices.DEFAULT_S3_KEYS


@pytest.mark.parametrize(
    "url, development",
    [
        ("http://127.0.0.1:9201", True),
        ("http://localhost:9201/", True),
        ("http://es1.internal:9200,http://127.0.0.2:9201", True),
        ("http://[::1]:9444", True),
        ("http://es1.internal:9201", False),  # another host's 9201
        ("http://127.0.0.1:9200", False),
        ("http://127.0.0.1:notaport", False),
        ("", False),
    ],
)
def test_a_development_address_is_a_loopback_one_on_a_development_port(url, development):
    lines = development_values({}, [("crontabber.class-X.es_url", url)])
    assert bool(lines) is development, lines


def test_a_multi_host_database_is_looked_at_host_by_host():
    from crontabber.config.devdefaults import database_urls

    assert database_urls("db1,127.0.0.1", "5432,54329") == (
        "postgresql://db1:5432,postgresql://127.0.0.1:54329"
    )
    (line,) = development_values({}, [("db", database_urls("db1,127.0.0.1", 54339))])
    assert "is the development PgBouncer" in line


def test_the_development_keys_are_refused_either_of_them():
    assert development_values({"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "x"}, []) == []
    (line,) = development_values({"AWS_SECRET_ACCESS_KEY": "symbols-secret"}, [])
    assert "development S3 keys" in line and "symbols-secret" not in line  # never the secret


def test_no_elasticsearch_address_is_an_error_not_a_default(monkeypatch):
    monkeypatch.delenv("ES_URL", raising=False)
    with pytest.raises(NoElasticsearchAddress, match="no Elasticsearch address: set ES_URL"):
        es_url()
    monkeypatch.setenv("ES_URL", "  ")
    with pytest.raises(NoElasticsearchAddress):
        es_url("")
    monkeypatch.setenv("ES_URL", "http://es1.internal:9200")
    assert es_url() == "http://es1.internal:9200" and es_url("http://b:9200") == "http://b:9200"


def test_the_search_command_and_endpoint_without_an_address_say_so(monkeypatch):
    import io

    from search.cli import main
    from search.server import SearchApp

    monkeypatch.delenv("ES_URL", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert main(["mozilla"], out, err) == 1
    assert err.getvalue() == (
        "search: no Elasticsearch address: set ES_URL (a URL, or a cluster's nodes' URLs,"
        " comma-separated)\n"
    )
    app = SearchApp()
    for path in ("/__heartbeat__", "/search"):
        status, body = app.route({"PATH_INFO": path, "QUERY_STRING": "q=x"})
        assert status == 503 and "no Elasticsearch address" in str(body), (path, body)
