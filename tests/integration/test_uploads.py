"""The upload job against real PostgreSQL and S3: good archives, skips, updates, errors."""

from __future__ import annotations

import zipfile

import botocore.exceptions
import pytest

from jobs.uploads.records import UploadStatus
from tests.fixtures.uploads_archives import sym_text, symbol_members, write_zip
from tests.fixtures.uploads_queue import md5, uploads  # noqa: F401 - the fixture


def test_a_good_archive_is_published_with_tecken_headers_and_metadata(uploads, tmp_path):
    members = symbol_members(3, 20_000) + [
        ("app.pdb/ABCDEF01ABCDEF01ABCDEF01ABCDEF011/app.exe", b"MZ" + b"\0" * 500),
        ("firefox-symbols.txt", b"list"),
        ("xul.pdb/.DS_Store", b"junk"),
    ]
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", members))
    outcomes = uploads.worker().drain()
    assert [(o.upload_id, o.status) for o in outcomes] == [(upload_id, UploadStatus.DONE)]
    row = uploads.row(upload_id)
    assert (
        row["status"],
        row["attempts"],
        row["files_total"],
        row["files_uploaded"],
        row["files_skipped"],
        row["files_ignored"],
    ) == ("done", 1, 6, 4, 0, 2)
    assert row["completed_at"] is not None and row["error"] is None
    assert uploads.keys() == sorted(f"v1/{name}" for name, _ in members[:4])
    name, content = members[0]
    body, response = uploads.get(f"v1/{name}")
    assert response["ContentEncoding"] == "gzip" and response["ContentType"] == "text/plain"
    assert response["Metadata"]["original_size"] == str(len(content))
    assert response["Metadata"]["original_md5_hash"] == md5(content)
    assert uploads.symbol(f"v1/{name}") == content
    exe_body, exe = uploads.get("v1/app.pdb/ABCDEF01ABCDEF01ABCDEF01ABCDEF011/app.exe")
    assert exe_body == members[3][1] and exe.get("ContentEncoding") is None
    files = uploads.files(upload_id)
    assert row["bytes_uploaded"] == sum(f["size"] for f in files)
    assert {f["key"]: (f["compressed"], f["update"]) for f in files}[f"v1/{name}"] == (True, False)


def test_puts_carry_a_crc32_checksum_unsigned_and_without_waiting_for_100_continue(
    uploads, tmp_path
):
    """The job's client: no SHA-256 of the body (not even on this http endpoint), a CRC-32
    the server checks instead, and the body sent with the headers. A body whose bytes do not
    match its checksum is refused, so the checksum is really checked."""
    sent: list[dict[str, str]] = []
    uploads.client.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: sent.append(
            {
                name.lower(): value.decode() if isinstance(value, bytes) else value
                for name, value in request.headers.items()
            }
        ),
    )
    members = symbol_members(2, 3000)
    uploads.enqueue(write_zip(tmp_path / "a.zip", members))
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE]
    assert len(sent) == 3  # the archive into the inbox, then the two symbol files
    for headers in sent:
        assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
        assert len(headers["x-amz-checksum-crc32"]) == 8  # 4 bytes, base64
        assert "expect" not in headers
    assert uploads.symbol(f"v1/{members[0][0]}") == members[0][1]
    # (a top-level key: s3proxy leaves a refused key's directories behind)
    with pytest.raises(botocore.exceptions.ClientError, match="BadDigest"):
        uploads.client.put_object(
            Bucket=uploads.bucket, Key="x.sym", Body=b"abc", ChecksumCRC32="AAAAAA=="
        )
    with pytest.raises(botocore.exceptions.ClientError, match="404"):
        uploads.client.head_object(Bucket=uploads.bucket, Key="x.sym")


def test_an_archive_with_stored_members_and_directory_entries(uploads, tmp_path):
    path = tmp_path / "stored.zip"
    content = sym_text("a.pdb", "AB12AB12AB12AB12AB12AB12AB12AB121", 5000)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("a.pdb/", b"")
        archive.writestr("a.pdb/AB12AB12AB12AB12AB12AB12AB12AB121/", b"")
        archive.writestr("a.pdb/AB12AB12AB12AB12AB12AB12AB12AB121/a.sym", content)
    upload_id = uploads.enqueue(path)
    assert uploads.worker().drain()[0].status is UploadStatus.DONE
    assert uploads.row(upload_id)["files_total"] == 1
    assert uploads.symbol("v1/a.pdb/AB12AB12AB12AB12AB12AB12AB12AB121/a.sym") == content


def test_an_identical_reupload_is_skipped_and_a_changed_file_overwritten(
    uploads, tmp_path, monkeypatch
):
    from jobs.uploads import archive

    members = symbol_members(4, 10_000)
    first = uploads.enqueue(write_zip(tmp_path / "1.zip", members))
    uploads.worker().drain()
    stamps = {k: uploads.get(k)[1]["LastModified"] for k in uploads.keys()}
    changed = members[:3] + [(members[3][0], members[3][1] + b"PUBLIC 1 0 new\n")]
    second = uploads.enqueue(write_zip(tmp_path / "2.zip", changed))
    compressed: list[str] = []
    spool = archive.spool
    monkeypatch.setattr(
        archive,
        "spool",
        lambda path, info, level, target: (
            compressed.append(info.filename) or spool(path, info, level, target)
        ),
    )
    uploads.worker().drain()
    assert compressed == [members[3][0]]  # the identical files were not recompressed
    row = uploads.row(second)
    assert (row["status"], row["files_uploaded"], row["files_skipped"]) == ("done", 1, 3)
    assert [(f["key"], f["update"]) for f in uploads.files(second)] == [
        (f"v1/{members[3][0]}", True)
    ]
    assert uploads.symbol(f"v1/{members[3][0]}") == changed[3][1]
    for key in uploads.keys()[:3]:
        if key != f"v1/{members[3][0]}":
            assert uploads.get(key)[1]["LastModified"] == stamps[key]  # not rewritten
    assert len(uploads.files(first)) == 4


def test_existence_check_modes_agree(uploads, tmp_path):
    old = symbol_members(5, 5000, seed=3)
    uploads.enqueue(write_zip(tmp_path / "old.zip", old))
    uploads.worker().drain()
    for number, mode in enumerate(("list", "head", "auto")):
        uploads.settings = type(uploads.settings)(
            **{**uploads.settings.__dict__, "existence_check": mode}
        )
        new = symbol_members(2, 500, seed=20 + number)
        upload_id = uploads.enqueue(write_zip(tmp_path / f"{mode}.zip", old + new))
        uploads.worker().drain()
        row = uploads.row(upload_id)
        assert (mode, row["files_uploaded"], row["files_skipped"]) == (mode, 2, 5)


@pytest.mark.parametrize("tail", [64, 1024 * 1024])
def test_the_directory_is_read_from_the_tail_while_downloading_or_after_it(
    uploads, tmp_path, monkeypatch, tail
):
    """The central directory in the fetched tail: checked (and members verified) during the
    download; not in it (a 64-byte tail): all after the download, from the archive itself."""
    from jobs.uploads import arrival, storage

    monkeypatch.setattr(arrival, "TAIL", tail)
    tails: list[int] = []
    fetch_tail = storage.fetch_tail
    monkeypatch.setattr(
        storage, "fetch_tail", lambda *args: tails.append(args[-1]) or fetch_tail(*args)
    )
    early: list[object] = []
    directory = arrival.read_directory
    monkeypatch.setattr(
        arrival, "read_directory", lambda *args: early.append(directory(*args)) or early[-1]
    )
    members = symbol_members(3, 5000, seed=4)
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", members))
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE]
    assert tails == [tail] and uploads.row(upload_id)["files_uploaded"] == 3
    assert (early[0] is None) == (tail == 64)
    assert [uploads.symbol(f"v1/{name}") for name, _ in members] == [c for _, c in members]


def test_an_archive_replaced_after_its_directory_was_read_is_a_retryable_failure(
    uploads, tmp_path, monkeypatch
):
    """The download asks for the ETag the tail had: another version fails it (412), and
    the verify pass, already waiting on the download, reports that, not a corrupt member."""
    from jobs.uploads import storage

    fetch_tail = storage.fetch_tail
    monkeypatch.setattr(storage, "fetch_tail", lambda *args: fetch_tail(*args) and '"other"')
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(3, 5000)))
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.PENDING]
    row = uploads.row(upload_id)
    assert "GetObject" in row["error"] and "PreconditionFailed" in row["error"]
    assert uploads.keys() == [] and uploads.files() == []
