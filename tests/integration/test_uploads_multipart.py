"""Large objects: multipart uploads (staged during the verify pass, completed after it),
against real PostgreSQL and S3, with a small threshold (S3's minimum part is 5 MiB)."""

from __future__ import annotations

import dataclasses
import functools
import random

import pytest

from jobs.uploads import existence, storage
from jobs.uploads.errors import S3Unavailable
from jobs.uploads.records import UploadStatus
from tests.fixtures.uploads_archives import (
    BIG_ID,
    PART,
    large_members,
    sym_text,
    symbol_members,
    write_zip,
    zip_with_bad_crc,
)
from tests.fixtures.uploads_queue import md5, pending_multipart, uploads  # noqa: F401 - the fixture


@pytest.fixture
def multipart(uploads):  # noqa: F811 - the fixture
    uploads.settings = dataclasses.replace(
        uploads.settings, multipart_threshold=PART, part_size=PART
    )
    return uploads


def test_large_members_round_trip_with_tecken_headers_and_metadata(
    multipart, tmp_path, monkeypatch
):
    # a sample of one directory, the largest member's (checked: new); the binary's own
    # directory is not checked, so it is written conditionally: HEADed before its multipart
    # upload (which takes no condition)
    monkeypatch.setattr(existence, "SAMPLE_DIRECTORIES", 1)
    sym, dll = large_members()
    members = symbol_members(20, 2000) + [sym, (f"dll.pdb/{BIG_ID}/big.dll", dll[1])]
    upload_id = multipart.enqueue(write_zip(tmp_path / "large.zip", members))
    heads: list[str] = []
    head = storage.head
    monkeypatch.setattr(
        storage, "head", lambda client, bucket, key: heads.append(key) or head(client, bucket, key)
    )
    assert [o.status for o in multipart.worker().drain()] == [UploadStatus.DONE]
    assert heads == [f"v1/dll.pdb/{BIG_ID}/big.dll"]
    row = multipart.row(upload_id)
    assert (row["files_uploaded"], row["files_skipped"]) == (22, 0)
    files = {f["key"]: f for f in multipart.files(upload_id)}
    for name, content in members[-2:]:
        body, response = multipart.get(f"v1/{name}")
        meta = response["Metadata"]
        assert (meta["original_size"], meta["original_md5_hash"]) == (
            str(len(content)),
            md5(content),
        )
        assert multipart.symbol(f"v1/{name}") == content
        assert files[f"v1/{name}"]["size"] == len(body) > PART
    sym = multipart.get(f"v1/{members[-2][0]}")[1]
    assert (sym["ContentEncoding"], sym["ContentType"]) == ("gzip", "text/plain")
    assert multipart.get(f"v1/{members[-1][0]}")[1].get("ContentEncoding") is None
    assert pending_multipart(multipart) == []
    # the same archive again: every file skipped, nothing written
    again = multipart.enqueue(write_zip(tmp_path / "again.zip", members))
    multipart.worker().drain()
    assert (multipart.row(again)["files_uploaded"], multipart.row(again)["files_skipped"]) == (
        0,
        22,
    )


def test_a_rejected_archive_aborts_the_staged_multipart_uploads(multipart, tmp_path, monkeypatch):
    members = large_members() + symbol_members(3, 2000)
    upload_id = multipart.enqueue(zip_with_bad_crc(tmp_path / "bad.zip", members, 4))
    aborted: list[str] = []
    abort = storage.abort
    monkeypatch.setattr(
        storage,
        "abort",
        lambda client, bucket, key, upload: (
            aborted.append(key) or abort(client, bucket, key, upload)
        ),
    )
    assert [o.status for o in multipart.worker().drain()] == [UploadStatus.FAILED]
    assert aborted  # parts had been uploaded while the archive was being verified
    assert "CRC" in multipart.row(upload_id)["error"]
    assert multipart.keys() == [] and multipart.files() == []
    assert pending_multipart(multipart) == []


def test_a_failing_part_aborts_the_upload_once_and_publishes_nothing(multipart, tmp_path, caplog):
    members = symbol_members(3, 2000) + large_members()
    upload_id = multipart.enqueue(write_zip(tmp_path / "a.zip", members))

    def refuse_second_part(params, **_):
        if params.get("PartNumber") == 2:
            raise ConnectionError("connection reset by peer (injected)")

    multipart.client.meta.events.register(
        "before-parameter-build.s3.UploadPart", refuse_second_part
    )
    # A connection reset after botocore's retries is S3 itself failing: the run stops there.
    with pytest.raises(S3Unavailable):
        multipart.worker().drain()
    row = multipart.row(upload_id)
    assert row["status"] == "pending"
    assert "UploadPart" in row["error"] and "injected" in row["error"]
    assert multipart.keys() == [] and multipart.files() == []
    assert pending_multipart(multipart) == []
    assert "could not abort" not in caplog.text  # aborted once (a second abort logs this)
    multipart.client.meta.events.unregister(
        "before-parameter-build.s3.UploadPart", refuse_second_part
    )
    assert multipart.worker().reprocess(upload_id).status is UploadStatus.DONE
    assert multipart.symbol(f"v1/{members[-1][0]}") == members[-1][1]
    assert pending_multipart(multipart) == []
