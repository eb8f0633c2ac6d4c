"""Rejections through the real job: the upload is ``failed`` at once (no retry), its
error names the member and the rule, and not one object is written. Every rule has a
crafted archive in tests/fixtures/uploads_cases.py, checked without services in
tests/unit/test_uploads_validation.py; here a representative few go end to end."""

from __future__ import annotations

import zipfile

import pytest

from jobs.uploads import validation
from jobs.uploads.records import Limits, UploadStatus
from tests.fixtures.uploads_archives import symbol_members, write_zip, zip_with_bad_crc
from tests.fixtures.uploads_cases import (
    ACCEPTED,
    CASES,
    FIRST,
    GOOD,
    _declared_count,
    _directory_size,
)
from tests.fixtures.uploads_queue import uploads  # noqa: F401 - the fixture

END_TO_END = [
    case
    for case in CASES
    if case[0]
    in (
        "traversal",
        "symlink",
        "bomb",
        "not-a-zip",
        "bad-crc",
        "duplicate",
        # issue #16: the zip specification's fields (each archive has a good member first)
        "empty",
        "directories-only",
        "encrypted",
        "local-encrypted",
        "strong-encryption",
        "local-method",
        "local-size",
        "descriptor-crc",
        "local-zip64-size",
        "multi-disk",
        "entry-count",
        "overlap",
        "version-6.4",
        # issue #24: zip-bomb limits, the end records before the directory, the key set
        "small-bomb",
        "declared-count",
        "declared-count64",
        "directory-size",
        "key-bidi",
        "key-question",
        "key-trailing-space",
        "key-division-slash",
    )
]


@pytest.mark.parametrize(
    "make, member, rule", [c[1:] for c in END_TO_END], ids=[c[0] for c in END_TO_END]
)
def test_a_rejected_archive_fails_at_once_and_writes_nothing(uploads, tmp_path, make, member, rule):
    upload_id = uploads.enqueue(make(tmp_path / "bad.zip"))
    outcome = uploads.worker().drain()[0]
    row = uploads.row(upload_id)
    assert (outcome.status, row["status"], row["attempts"]) == (UploadStatus.FAILED, "failed", 1)
    assert rule in row["error"]
    if member is not None:
        assert repr(member) in row["error"]
    assert uploads.keys() == [] and uploads.files() == []
    assert uploads.worker().drain() == []  # permanent: not retried


@pytest.mark.parametrize(
    "limits, rule",
    [
        (Limits(max_members=1), validation.RULE_TOO_MANY),
        (Limits(max_total_size=4000), validation.RULE_TOTAL_SIZE),
        (Limits(max_member_size=1000), validation.RULE_MEMBER_SIZE),
    ],
    ids=["members", "total", "member"],
)
def test_limits_are_options(uploads, tmp_path, limits, rule):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", GOOD))
    uploads.worker(limits=limits).drain()
    row = uploads.row(upload_id)
    assert row["status"] == "failed" and rule in row["error"] and uploads.keys() == []


def test_a_crc_error_in_a_late_member_writes_nothing_at_all(uploads, tmp_path):
    members = symbol_members(6, 2000, seed=5)
    upload_id = uploads.enqueue(zip_with_bad_crc(tmp_path / "a.zip", members, 5))
    uploads.worker().drain()
    assert uploads.row(upload_id)["status"] == "failed"
    assert uploads.keys() == []


def test_a_corrupt_deflate_stream_is_rejected(uploads, tmp_path):
    path = write_zip(tmp_path / "a.zip", GOOD)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zipped:
        info = zipped.infolist()[0]
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start : start + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    upload_id = uploads.enqueue(path)
    uploads.worker().drain()
    row = uploads.row(upload_id)
    assert row["status"] == "failed" and repr(FIRST) in row["error"], row["error"]
    assert uploads.keys() == []


@pytest.mark.parametrize("make, members", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_the_specification_allows_is_published_right(uploads, tmp_path, make, members):
    upload_id = uploads.enqueue(make(tmp_path / "ok.zip"))
    assert uploads.worker().drain()[0].status == UploadStatus.DONE
    assert uploads.keys() == [f"v1/{name}" for name in members]
    assert {key: uploads.symbol(f"v1/{key}") for key in members} == members
    assert uploads.row(upload_id)["files_uploaded"] == len(members)


def test_an_archive_of_ignorable_names_only_is_done_with_nothing_published(uploads, tmp_path):
    """As Tecken: such an upload completes, its names listed as ignored, no file written."""
    path = write_zip(tmp_path / "a.zip", [("firefox-symbols.txt", b"x"), (".DS_Store", b"y")])
    upload_id = uploads.enqueue(path)
    assert uploads.worker().drain()[0].status == UploadStatus.DONE
    row = uploads.row(upload_id)
    assert (
        row["status"],
        row["files_total"],
        row["files_ignored"],
        row["files_uploaded"],
        row["error"],
    ) == (
        "done",
        2,
        2,
        0,
        None,
    )
    assert uploads.keys() == [] and uploads.files() == []


@pytest.mark.parametrize(
    "make, rule",
    [
        (_declared_count, validation.RULE_TOO_MANY),
        (_directory_size, validation.RULE_DIRECTORY_SIZE),
    ],
)
def test_end_records_refuse_from_the_tail_without_downloading(uploads, tmp_path, make, rule):
    """The ranged GET of the tail is enough: the archive itself is not downloaded."""
    from jobs.uploads import arrival, storage
    from jobs.uploads.errors import Rejected

    upload_id = uploads.enqueue(make(tmp_path / "bad.zip"))
    upload = uploads.store().get(upload_id)
    with pytest.raises(Rejected) as caught:
        arrival.read_directory(uploads.client, uploads.settings, upload, tmp_path)
    assert caught.value.rule == rule and caught.value.member is None
