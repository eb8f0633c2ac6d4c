"""The dashboard with no Elasticsearch address anywhere (issue #44, item 3: there is no
development default any more): the page is drawn, the search card says what to set."""

from __future__ import annotations

from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture


def test_no_elasticsearch_address_is_the_search_cards_error_not_a_500(dashboard, monkeypatch):
    monkeypatch.delenv("ES_URL", raising=False)
    dashboard.crontab.configure(["jobs.search_index.RebuildSearchIndexCronApp|1h", "BasicJob|1d"])
    dashboard.start()
    status, _, page = dashboard.get("/")
    assert status == 200, page
    status, _, body = dashboard.get("/api/pipeline")
    assert status == 200, body
    assert "no Elasticsearch address" in body["search_index"]["error"], body["search_index"]
