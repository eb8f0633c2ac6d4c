"""Review checks: conditional writes (If-None-Match) against the real S3 server."""

from __future__ import annotations

import pytest

from jobs.uploads import storage
from jobs.uploads.errors import S3Unavailable
from jobs.uploads.records import UploadStatus
from tests.fixtures.uploads_archives import PART, large_members, symbol_members, write_zip
from tests.fixtures.uploads_queue import pending_multipart, uploads  # noqa: F401 - the fixture


def test_conditional_writes_skip_identical_and_overwrite_changed_with_update(uploads, tmp_path):
    later = symbol_members(6, 3000, seed=7, prefix="zz")
    first = uploads.enqueue(write_zip(tmp_path / "1.zip", later))
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE]
    changed = later[:3] + [(name, content + b"PUBLIC 1 0 new\n") for name, content in later[3:]]
    new = symbol_members(20, 2000, seed=8, prefix="aa")
    puts: list[tuple[str, bool]] = []
    put = storage.put

    def spy(client, bucket, written, body, upload_id, only_if_new=False):
        puts.append((written.key, only_if_new))
        return put(client, bucket, written, body, upload_id, only_if_new)

    import pytest

    mp = pytest.MonkeyPatch()
    mp.setattr(storage, "put", spy)
    try:
        second = uploads.enqueue(write_zip(tmp_path / "2.zip", new + changed))
        assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE]
    finally:
        mp.undo()
    assert any(cond for key, cond in puts if "/zz" in key)  # the later keys went conditionally
    row = uploads.row(second)
    assert (row["files_uploaded"], row["files_skipped"]) == (23, 3)
    rows = {f["key"]: f for f in uploads.files(second)}
    for name, _ in later[:3]:
        assert f"v1/{name}" not in rows
        meta = uploads.get(f"v1/{name}")[1]["Metadata"]
        assert meta["upload_id"] == str(first)
    for name, content in changed[3:]:
        assert rows[f"v1/{name}"]["update"] is True
        assert uploads.symbol(f"v1/{name}") == content
    for name, _ in new:
        assert rows[f"v1/{name}"]["update"] is False


class _Broken:
    def __init__(self, body, after):
        self.body, self.reads, self.after = body, 0, after

    def read(self, n=-1):
        self.reads += 1
        if self.reads > self.after:
            raise ConnectionError("connection reset (injected)")
        return self.body.read(n)


def _break_download(uploads, monkeypatch, after):
    client = uploads.client
    get = client.get_object

    def get_object(**kwargs):
        response = get(**kwargs)
        if "Range" not in kwargs:
            response["Body"] = _Broken(response["Body"], after)
        return response

    monkeypatch.setattr(client, "get_object", get_object)


def test_a_download_failing_midway_while_members_wait_reports_it(uploads, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(storage, "DOWNLOAD_CHUNK", 4096)
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(30, 3000)))
    _break_download(uploads, monkeypatch, 3)
    # A connection broken after the retries is S3 itself failing: the run stops there.
    with pytest.raises(S3Unavailable):
        uploads.worker().drain()
    row = uploads.row(upload_id)
    assert row["status"] == "pending"
    assert "GetObject" in row["error"], row["error"]
    assert uploads.keys() == [] and uploads.files() == []
    assert list(spool.iterdir()) == []


def test_ctrl_c_during_the_verify_pass_aborts_staged_uploads(uploads, tmp_path, monkeypatch):
    import dataclasses

    import pytest

    from jobs.uploads.store import ClaimRecorder

    uploads.settings = dataclasses.replace(
        uploads.settings, multipart_threshold=PART, part_size=PART
    )
    members = symbol_members(3, 2000) + large_members()
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", members))
    started: list[str] = []
    start = storage.start_multipart

    def spy(*args, **kwargs):
        result = start(*args, **kwargs)
        started.append(result[0])
        return result

    monkeypatch.setattr(storage, "start_multipart", spy)

    def tick(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ClaimRecorder, "tick", tick)
    with pytest.raises(KeyboardInterrupt):
        uploads.worker().drain()
    assert started
    assert uploads.keys() == [] and uploads.files() == []
    assert pending_multipart(uploads) == []
    assert uploads.row(upload_id)["status"] == "pending"


def test_ctrl_c_is_not_swallowed_by_a_failing_download(uploads, tmp_path, monkeypatch):
    import pytest

    from jobs.uploads.store import ClaimRecorder

    monkeypatch.setattr(storage, "DOWNLOAD_CHUNK", 4096)
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(30, 3000)))
    _break_download(uploads, monkeypatch, 3)

    def tick(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ClaimRecorder, "tick", tick)
    with pytest.raises(KeyboardInterrupt):
        uploads.worker().drain()
    assert uploads.keys() == [] and uploads.files() == []
    assert uploads.row(upload_id)["status"] == "pending"


def test_a_member_rejected_early_stops_the_download(uploads, tmp_path, monkeypatch):
    """The first member is corrupt: the upload fails on it without reading the rest of the
    archive (the download is slowed to 2 ms a chunk so that it would still be running)."""
    import time

    from tests.fixtures.uploads_archives import zip_with_bad_crc

    monkeypatch.setattr(storage, "DOWNLOAD_CHUNK", 16 * 1024)
    path = zip_with_bad_crc(tmp_path / "bad.zip", symbol_members(60, 20_000), 0)
    upload_id = uploads.enqueue(path)
    sizes: list[int] = []
    download = storage.download

    def slow(client, bucket, key, target, tries=3, etag=None, written=None):
        def seen(size):
            sizes.append(size)
            time.sleep(0.002)
            return written(size)

        return download(client, bucket, key, target, tries, etag, seen if written else None)

    monkeypatch.setattr(storage, "download", slow)
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.FAILED]
    assert "CRC" in uploads.row(upload_id)["error"]
    assert 0 < max(sizes) < path.stat().st_size / 2
    assert uploads.keys() == []


def test_a_download_failing_after_the_last_member_does_not_undo_a_published_upload(
    uploads, tmp_path, monkeypatch
):
    """Every member's bytes arrived, then the connection broke in the central directory
    (already read from the tail): the upload is done, not sent back to pending."""
    import zipfile

    monkeypatch.setattr(storage, "DOWNLOAD_CHUNK", 4096)
    path = write_zip(tmp_path / "a.zip", symbol_members(30, 3000))
    with zipfile.ZipFile(path) as zipped:
        directory = zipped.start_dir
    upload_id = uploads.enqueue(path)
    _break_download(uploads, monkeypatch, -(-directory // 4096))
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE]
    row = uploads.row(upload_id)
    assert (row["status"], row["attempts"], row["files_uploaded"]) == ("done", 1, 30)
