"""Every service address comes from configuration, never a development default (issue #44,
item 3; docs/deploy.md, "Installing a host"): one ``es_url`` for every search job
(``resource.elasticsearch.es_url``, else ``ES_URL``; none: refused, never
``127.0.0.1:9201``), and ``--configtest`` of a production host (``crontabber.production``)
refuses each value that points at the development services, one line each."""

from __future__ import annotations

import pytest

SEARCH_JOBS = [
    "jobs.search_index.RebuildSearchIndexCronApp|1h",
    "jobs.search_index.IndexNewUploadsCronApp|5m",
]
NO_ADDRESS = (
    "configuration error in {job}.es_url: no Elasticsearch address: set"
    " resource.elasticsearch.es_url (every search job's) or ES_URL (a URL, or a cluster's"
    " nodes' URLs, comma-separated)"
)
PRODUCTION = {
    "RESOURCE_ELASTICSEARCH_ES_URL": "http://es1.internal:9200,http://es2.internal:9200",
    "AWS_ENDPOINT_URL_S3": "https://s3.internal",
    "AWS_ACCESS_KEY_ID": "AKIAPRODUCTION",
    "AWS_SECRET_ACCESS_KEY": "production-secret",
}


@pytest.fixture
def bare(cli):
    """The cli with no Elasticsearch or S3 address in its environment."""
    for name in ("ES_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        cli.env.pop(name, None)
    cli.crontab.configure(SEARCH_JOBS)
    return cli


def test_configtest_refuses_a_search_job_without_an_address_one_line_each(bare):
    done = bare.run("--configtest")
    assert done.returncode == 1, done.stdout
    assert done.stderr.splitlines() == [
        "crontabber: " + NO_ADDRESS.format(job="rebuild-search-index"),
        NO_ADDRESS.format(job="index-new-uploads"),
    ]


def test_a_search_job_without_an_address_fails_in_one_line_and_reaches_no_default(bare):
    bare.crontab.configure(SEARCH_JOBS[1:])
    done = bare.run("--job", "index-new-uploads", "--force")
    assert done.returncode == 5, done.stderr  # the job failed: recorded, one line
    assert NO_ADDRESS.format(job="index-new-uploads") in done.stderr
    assert "9201" not in done.stderr and "Traceback" not in done.stderr
    state = bare.crontab.state("index-new-uploads")
    assert state.error_count == 1 and "no Elasticsearch address" in state.last_error["value"]


def test_one_es_url_serves_every_search_job(bare):
    bare.env["RESOURCE_ELASTICSEARCH_ES_URL"] = "http://es1.internal:9200"
    done = bare.run("--configtest")
    assert done.returncode == 0, done.stderr
    assert "configtest OK: 2 jobs" in done.stdout
    # the address the jobs use is listed, once, under its own name (docs/deploy.md)
    listed = [line for line in done.stdout.splitlines() if ".es_url = " in line]
    assert listed == [
        "  resource.elasticsearch.es_url = 'http://es1.internal:9200'"
        "  [environment RESOURCE_ELASTICSEARCH_ES_URL]"
    ]
    ini = bare.crontab.ini.read_text()
    bare.env.pop("RESOURCE_ELASTICSEARCH_ES_URL")
    bare.crontab.ini.write_text(
        ini + "[resource]\n    [[elasticsearch]]\n        es_url=http://es1.internal:9200\n"
    )
    done = bare.run("--configtest")
    assert done.returncode == 0, done.stderr
    assert "note:" not in done.stdout  # a known option, in its own section
    assert (
        f"  resource.elasticsearch.es_url = 'http://es1.internal:9200'  [INI file"
        f" {bare.crontab.ini}]" in done.stdout.splitlines()
    ), done.stdout


def test_a_production_configtest_refuses_each_development_value_in_one_line(bare):
    bare.env.update(
        {
            "CRONTABBER_PRODUCTION": "true",
            "ES_URL": "http://127.0.0.1:9201",
            "RESOURCE_ELASTICSEARCH_ES_URL": "http://localhost:9201,http://es2.internal:9200",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9444",
            "AWS_ACCESS_KEY_ID": "symbols",
            "AWS_SECRET_ACCESS_KEY": "symbols-secret",
            # the development PostgreSQL's default address (the tests' may be another port)
            "RESOURCE_POSTGRESQL_HOST": "127.0.0.1",
            "RESOURCE_POSTGRESQL_PORT": "54329",
        }
    )
    done = bare.run("--configtest")
    assert done.returncode == 1, done.stdout
    refused = "configuration error in crontabber.production: "
    assert done.stderr.splitlines() == [
        f"crontabber: {refused}environment ES_URL is the development Elasticsearch"
        f" (http://127.0.0.1:9201): name the production one",
        f"{refused}environment AWS_ENDPOINT_URL_S3 is the development S3 (s3proxy)"
        " (http://127.0.0.1:9444): name the production one",
        f"{refused}the state database (crontabber.host) is the development PostgreSQL"
        " (postgresql://127.0.0.1:54329): name the production one",
        f"{refused}environment RESOURCE_ELASTICSEARCH_ES_URL is the development Elasticsearch"
        " (http://localhost:9201,http://es2.internal:9200): name the production one",
        f"{refused}environment AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY hold the development"
        " S3 keys: set the production ones",
    ]


def test_production_addresses_pass_and_development_keeps_its_own(bare):
    bare.env.update({**PRODUCTION, "CRONTABBER_PRODUCTION": "true"})
    bare.env["RESOURCE_POSTGRESQL_HOST"] = "db1.internal"  # --configtest does not connect
    done = bare.run("--configtest")
    assert done.returncode == 0, done.stderr
    assert "crontabber.production = True  [environment CRONTABBER_PRODUCTION]" in done.stdout
    # not a production host: the development services' addresses are what it should use
    bare.env.update(
        {
            "RESOURCE_POSTGRESQL_HOST": "127.0.0.1",
            "CRONTABBER_PRODUCTION": "false",
            "ES_URL": "http://127.0.0.1:9201",
            "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9444",
            "AWS_ACCESS_KEY_ID": "symbols",
        }
    )
    bare.env.pop("RESOURCE_ELASTICSEARCH_ES_URL")
    done = bare.run("--configtest")
    assert done.returncode == 0, done.stderr
