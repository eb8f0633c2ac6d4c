"""One-line failure descriptions (crontabber/failures.py), on the real client
libraries' exception classes."""

import logging

import psycopg2
from botocore.exceptions import ClientError, EndpointConnectionError
from elastic_transport import ConnectionError as EsConnectionError

from crontabber.failures import NoClientTracebacks, chain, describe


def test_a_plain_error_is_type_and_first_line():
    assert describe(NameError("Trouble!!\nmore")) == "NameError: Trouble!!"


def test_s3_unreachable_names_the_endpoint():
    exc = EndpointConnectionError(
        endpoint_url="http://s3.internal:9000/bucket?list-type=2",
        error=ConnectionRefusedError(111, "Connection refused"),
    )
    assert describe(exc) == "S3 at http://s3.internal:9000: connection refused"


def test_an_s3_answer_is_named_s3():
    exc = ClientError({"Error": {"Code": "NoSuchBucket", "Message": "gone"}}, "ListObjectsV2")
    assert describe(exc).startswith("S3: An error occurred (NoSuchBucket)")


def test_elasticsearch_unreachable_found_behind_a_jobs_own_error():
    class Conn:
        host, port = "es.internal", 9200

    inner = ConnectionRefusedError(111, "Connection refused")
    cause = EsConnectionError("Connection error caused by: ...", errors=(inner,))
    inner.conn = Conn()
    try:
        try:
            raise cause
        except EsConnectionError as exc:
            raise RuntimeError("rebuild failed") from exc
    except RuntimeError as outer:
        assert describe(outer) == "Elasticsearch at http://es.internal:9200: connection refused"
        assert chain(outer)[:2] == [outer, cause]


def test_a_reset_carries_no_connection_so_the_address_comes_from_the_code_that_knew_it():
    from urllib3.exceptions import ProtocolError

    from search.client import naming_address

    reset = ConnectionResetError(104, "Connection reset by peer")
    cause = EsConnectionError(
        "Connection error caused by: ProtocolError(...)",
        errors=(ProtocolError("Connection aborted.", reset),),
    )
    cause.__context__ = reset
    assert describe(cause) == "Elasticsearch: connection reset by peer"
    try:
        with naming_address("http://es.internal:9200/"):
            raise RuntimeError("rebuild failed") from cause
    except RuntimeError as outer:
        assert (
            describe(outer) == "Elasticsearch at http://es.internal:9200: connection reset by peer"
        )


def test_postgresql_is_named():
    assert (
        describe(psycopg2.OperationalError("connection to server failed\nhint"))
        == "PostgreSQL: connection to server failed"
    )


def test_client_library_records_lose_their_tracebacks_ours_keep_them():
    try:
        raise ValueError("x")
    except ValueError:
        import sys

        info = sys.exc_info()
    theirs = logging.LogRecord(
        "elastic_transport.transport", logging.WARNING, "", 0, "retry", (), info
    )
    ours = logging.LogRecord("crontabber.runner", logging.ERROR, "", 0, "failed", (), info)
    flt = NoClientTracebacks()
    assert flt.filter(theirs) and theirs.exc_info is None
    assert flt.filter(ours) and ours.exc_info is info
