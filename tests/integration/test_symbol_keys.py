"""Symbol files as a symbol server must keep them (issue #33), against the real S3 server and
PostgreSQL: one canonical key, a header that matches its path, the operator's overwrite rule,
and one bad upload never holding the good ones back."""

from __future__ import annotations

import dataclasses
import threading
import zipfile

import pytest

from jobs import symbolkey
from jobs.s3 import make_s3_client
from jobs.uploads import symheader
from jobs.uploads.errors import VersioningOff
from jobs.uploads.existence import RULE_KEEP_FIRST
from jobs.uploads.records import Overwrite, UploadStatus
from jobs.uploads.worker import Worker
from tests.fixtures.s3_fault_proxy import S3FaultProxy
from tests.fixtures.s3_gate_proxy import S3GateProxy
from tests.fixtures.uploads_archives import sym_text, symbol_members, write_zip
from tests.fixtures.uploads_cases import HEADER_CASES, KEY_FORMS
from tests.fixtures.uploads_queue import md5, pending_multipart, uploads  # noqa: F401 - the fixture

XUL_ID = "44E4EC8C2F41492B9369D6B9A059577C2"
XUL = f"xul.pdb/{XUL_ID}/xul.sym"


def _good(tmp_path, index: int):
    return write_zip(
        tmp_path / f"good{index}.zip", symbol_members(2, 3000, seed=index, prefix=f"g{index}_")
    )


def test_each_refused_form_is_its_uploads_rejection_and_the_good_uploads_all_publish(
    uploads, tmp_path
):
    """The review's N7 names and headers, each in its own upload between good ones: one
    drain publishes every good upload and nothing of a bad one; each bad one is failed for
    good, its error naming the member and the rule."""
    good = [uploads.enqueue(_good(tmp_path, 0))]
    bad: dict[int, tuple[str, str]] = {}
    for at, (label, name, rule) in enumerate(KEY_FORMS):
        path = write_zip(
            tmp_path / f"bad-{label}.zip",
            [(name, b"MODULE windows x86_64 " + b"0" * 33 + b" x.pdb\n")],
        )
        bad[uploads.enqueue(path)] = (name, rule)
        if at % 5 == 4:
            good.append(uploads.enqueue(_good(tmp_path, len(good))))
    for label, make, member, rule in HEADER_CASES:
        bad[uploads.enqueue(make(tmp_path / f"{label}.zip"))] = (str(member), rule)
    good.append(uploads.enqueue(_good(tmp_path, len(good))))

    outcomes = uploads.worker().drain()

    assert len(outcomes) == len(good) + len(bad)  # one run: no bad name stopped it
    for upload_id in good:
        assert uploads.row(upload_id)["status"] == "done"
    for upload_id, (member, rule) in bad.items():
        row = uploads.row(upload_id)
        assert row["status"] == "failed" and row["attempts"] == 1, row
        assert rule in row["error"] and repr(member) in row["error"], row["error"]
    published = set(uploads.keys())
    assert len(published) == 2 * len(good)
    assert all(key.split("/")[1].startswith("g") for key in published)


def test_the_header_rejection_names_the_headers_values_and_the_paths(uploads, tmp_path):
    text = sym_text("ntdll.pdb", "0" * 32 + "F", 4000)
    upload_id = uploads.enqueue(write_zip(tmp_path / "n.zip", [(XUL, text)]))
    uploads.worker().drain()
    error = uploads.row(upload_id)["error"]
    assert symheader.RULE_MISMATCH in error
    assert f"header: debug file 'ntdll.pdb', debug id {'0' * 32}F" in error
    assert f"path: debug file 'xul.pdb', debug id {XUL_ID}" in error
    assert uploads.keys() == []


def test_a_lowercase_id_is_stored_under_the_uppercase_key_once(uploads, tmp_path):
    text = sym_text("xul.pdb", XUL_ID, 5000)
    lower = write_zip(tmp_path / "lower.zip", [(XUL.replace(XUL_ID, XUL_ID.lower()), text)])
    first = uploads.enqueue(lower)
    second = uploads.enqueue(write_zip(tmp_path / "upper.zip", [(XUL, text)]))
    uploads.worker().drain()
    assert uploads.keys() == [f"v1/{XUL}"]
    assert uploads.symbol(f"v1/{XUL}") == text
    assert [f["key"] for f in uploads.files(first)] == [f"v1/{XUL}"]
    assert uploads.files(second) == []  # the same file: already there
    assert uploads.row(second)["files_skipped"] == 1


def test_the_code_id_and_file_are_kept_with_the_file(uploads, tmp_path):
    text = sym_text("xul.pdb", XUL_ID, 5000)  # INFO CODE_ID <first 16 digits> xul.pdb
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", [(XUL, text)]))
    uploads.worker().drain()
    assert uploads.sql(
        "SELECT code_id, code_file FROM file_upload WHERE upload_id = %s", (upload_id,)
    ) == [{"code_id": XUL_ID[:16], "code_file": "xul.pdb"}]


def _two_versions(uploads, tmp_path, overwrite: Overwrite):
    """Upload 1 writes xul.sym; upload 2 (xul.sym with other bytes, and a new file) follows
    under ``overwrite``. Returns both ids, both texts and the new file's name."""
    first_text = sym_text("xul.pdb", XUL_ID, 5000, seed=1)
    second_text = sym_text("xul.pdb", XUL_ID, 5000, seed=2)
    extra = symbol_members(1, 2000, seed=9, prefix="extra")
    first = uploads.enqueue(
        write_zip(tmp_path / "first.zip", [(XUL, first_text)]), uploaded_by="eve"
    )
    uploads.worker().drain()
    second = uploads.enqueue(
        write_zip(tmp_path / "second.zip", [(XUL, second_text)] + extra), uploaded_by="mallory"
    )
    outcomes = uploads.worker(overwrite=overwrite).drain()
    return first, second, first_text, second_text, extra[0][0], outcomes


def test_replace_writes_over_and_records_what_it_replaced(uploads, tmp_path):
    first, second, first_text, second_text, extra, _ = _two_versions(
        uploads, tmp_path, Overwrite.REPLACE
    )
    assert uploads.row(second)["status"] == "done"
    assert uploads.symbol(f"v1/{XUL}") == second_text
    (row,) = uploads.sql(
        'SELECT "update", previous_upload_id, previous_md5, previous_size '
        "FROM file_upload WHERE upload_id = %s AND key = %s",
        (second, f"v1/{XUL}"),
    )
    assert row == {
        "update": True,
        "previous_upload_id": first,
        "previous_md5": md5(first_text),
        "previous_size": len(first_text),
    }


def test_keep_first_refuses_the_upload_naming_the_earlier_one_and_publishes_nothing(
    uploads, tmp_path
):
    first, second, first_text, _, extra, outcomes = _two_versions(
        uploads, tmp_path, Overwrite.KEEP_FIRST
    )
    row = uploads.row(second)
    assert row["status"] == "failed" and row["attempts"] == 1
    assert RULE_KEEP_FIRST in row["error"] and f"written by upload {first}" in row["error"]
    assert f"MD5 {md5(first_text)}" in row["error"] and repr(XUL) in row["error"]
    assert uploads.symbol(f"v1/{XUL}") == first_text  # the first upload's bytes stay
    assert f"v1/{extra}" not in uploads.keys()  # and nothing of the refused upload is there
    assert uploads.files(second) == []


def test_keep_first_skips_the_same_bytes(uploads, tmp_path):
    text = sym_text("xul.pdb", XUL_ID, 5000)
    uploads.enqueue(write_zip(tmp_path / "a.zip", [(XUL, text)]))
    again = uploads.enqueue(write_zip(tmp_path / "b.zip", [(XUL, text)]))
    uploads.worker(overwrite=Overwrite.KEEP_FIRST).drain()
    assert uploads.row(again)["status"] == "done" and uploads.row(again)["files_skipped"] == 1


def _race(uploads, tmp_path, multipart: bool) -> tuple[dict[int, bytes], S3GateProxy]:
    """Two uploads of the same new key with other bytes, drained at once by two workers
    under keep-first; their writes of the key are held until both have arrived (both
    checked the key and found it absent), then passed on one after the other."""
    texts = {}
    for seed, who in ((1, "user-a"), (2, "user-b")):
        text = sym_text("race.pdb", XUL_ID, 40000, seed=seed)
        path = write_zip(tmp_path / f"race-{who}.zip", [(f"race.pdb/{XUL_ID}/race.sym", text)])
        texts[uploads.enqueue(path, uploaded_by=who)] = text
    proxy = S3GateProxy(uploads.client.meta.endpoint_url, "race.pdb", count=2)
    threshold = {"multipart_threshold": 1000, "part_size": 8 << 20} if multipart else {}
    settings = dataclasses.replace(uploads.settings, overwrite=Overwrite.KEEP_FIRST, **threshold)
    try:
        client = make_s3_client(
            8, endpoint_url=proxy.url, validate_parameters=False, expect_continue=False
        )
        workers = [
            Worker(uploads.store(), settings, client, uploads.policy, f"w{n}") for n in (1, 2)
        ]
        drains = [threading.Thread(target=worker.drain) for worker in workers]
        for drain in drains:
            drain.start()
        for drain in drains:
            drain.join(timeout=120)
    finally:
        proxy.close()
    return texts, proxy


@pytest.mark.parametrize("multipart", [False, True], ids=["put", "multipart"])
def test_keep_first_holds_when_two_drains_race_for_a_new_key(uploads, tmp_path, multipart):
    """The review's N-2: both uploads find the key absent, both write it; the second write
    is refused by S3 (``If-None-Match: *``), so the first file stays and the second upload
    is refused naming the first, instead of both recording a new file over each other."""
    texts, proxy = _race(uploads, tmp_path, multipart)
    assert proxy.held == 2, "the race did not happen: one write never reached the gate"
    assert sorted(proxy.answers) == [200, 412]
    rows = {upload_id: uploads.row(upload_id) for upload_id in texts}
    (winner,) = [upload_id for upload_id, row in rows.items() if row["status"] == "done"]
    (loser,) = [upload_id for upload_id, row in rows.items() if row["status"] != "done"]
    assert rows[loser]["status"] == "failed", rows[loser]
    assert (
        RULE_KEEP_FIRST in rows[loser]["error"]
        and f"written by upload {winner}" in rows[loser]["error"]
    )
    key = f"v1/race.pdb/{XUL_ID}/race.sym"
    assert uploads.symbol(key) == texts[winner]
    assert uploads.get(key)[1]["Metadata"]["upload_id"] == str(winner)
    assert [f["key"] for f in uploads.files(winner)] == [key] and uploads.files(loser) == []
    assert pending_multipart(uploads) == []


def test_versioned_refuses_to_start_on_a_bucket_without_versions(uploads, tmp_path):
    """The local S3 server (s3proxy on a file system) does not implement versioning: the job
    says so before it claims anything, and the upload waits, its attempts untouched."""
    import botocore.exceptions

    with pytest.raises(botocore.exceptions.ClientError, match="NotImplemented"):
        uploads.client.put_bucket_versioning(
            Bucket=uploads.bucket, VersioningConfiguration={"Status": "Enabled"}
        )  # (why the versioned path itself cannot be run here)
    upload_id = uploads.enqueue(_good(tmp_path, 0))
    with pytest.raises(VersioningOff) as caught:
        uploads.worker(overwrite=Overwrite.VERSIONED).drain()
    assert f"versioning of bucket {uploads.bucket!r} is never enabled" in str(caught.value)
    assert "no upload was claimed" in str(caught.value)
    with pytest.raises(VersioningOff):
        uploads.worker(overwrite=Overwrite.VERSIONED).reprocess(upload_id)
    row = uploads.row(upload_id)
    assert (row["status"], row["attempts"]) == ("pending", 0)


def test_an_s3_error_about_one_uploads_key_fails_that_upload_only(uploads, tmp_path):
    """S3 answers 500 for every request about one upload's keys (as a file-system back end
    does for a name it refuses) while the bucket answers: that upload fails this attempt,
    the uploads after it are published in the same run."""
    proxy = S3FaultProxy(uploads.client.meta.endpoint_url, "poison")
    try:
        client = make_s3_client(
            8,
            endpoint_url=proxy.url,
            max_attempts=2,
            validate_parameters=False,
            expect_continue=False,
        )
        before = uploads.enqueue(_good(tmp_path, 0))
        poison = uploads.enqueue(
            write_zip(tmp_path / "p.zip", symbol_members(2, 3000, seed=5, prefix="poison"))
        )
        after = [uploads.enqueue(_good(tmp_path, index)) for index in (1, 2)]
        outcomes = uploads.worker(client=client).drain()
    finally:
        proxy.close()
    assert proxy.refused > 0
    assert [o.upload_id for o in outcomes] == [before, poison, *after]
    assert uploads.row(poison)["status"] == "pending"  # back in the queue for a retry
    assert "InternalError" in uploads.row(poison)["error"]
    assert [uploads.row(i)["status"] for i in (before, *after)] == ["done"] * 3
    assert not any("poison" in key for key in uploads.keys())


def test_s3_down_still_stops_the_drain(uploads, tmp_path):
    """Every request failing (the bucket too) is S3 down: the drain stops at the first
    upload, as before (docs/reliability.md), the others untouched."""
    proxy = S3FaultProxy(uploads.client.meta.endpoint_url, "/")
    try:
        client = make_s3_client(
            8,
            endpoint_url=proxy.url,
            max_attempts=1,
            validate_parameters=False,
            expect_continue=False,
        )
        ids = [uploads.enqueue(_good(tmp_path, index)) for index in range(3)]
        from jobs.uploads.errors import S3Unavailable

        with pytest.raises(S3Unavailable):
            uploads.worker(client=client).drain()
    finally:
        proxy.close()
    assert [uploads.row(i)["attempts"] for i in ids] == [1, 0, 0]


def test_the_canonical_names_check_what_a_windows_cache_would_change():
    for label, name, rule in KEY_FORMS:
        with pytest.raises(symbolkey.BadKey) as caught:
            symbolkey.parse(name)
        assert caught.value.rule == rule, label
    assert zipfile.ZipInfo(XUL).filename == symbolkey.parse(XUL).path


def _real_files() -> list[tuple[str, bytes]]:
    """The real dump_syms output of tests/fixtures/breakpad, under the keys their MODULE
    records name."""
    import lzma
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent / "fixtures" / "breakpad"
    texts = [
        (here / "libdemo.so.sym").read_bytes(),
        lzma.decompress((here / "libpython3.11.so.1.0.sym.xz").read_bytes()),
    ]
    files = []
    for text in texts:
        _, _, _, debug_id, debug_file = text.split(b"\n", 1)[0].decode().split(" ", 4)
        files.append((f"{debug_file}/{debug_id}/{debug_file}.sym", text))
    return files


def test_real_breakpad_files_pass_unchanged(uploads, tmp_path):
    files = _real_files()
    upload_id = uploads.enqueue(write_zip(tmp_path / "real.zip", files))
    assert uploads.worker().drain()[0].status is UploadStatus.DONE
    for name, text in files:
        assert uploads.symbol(f"v1/{name}") == text  # byte for byte
    rows = uploads.sql(
        "SELECT key, code_id, code_file FROM file_upload WHERE upload_id = %s ORDER BY key",
        (upload_id,),
    )
    assert rows == [
        {
            "key": "v1/libdemo.so/D59EFD2A1FCF6360D63C673972D1C9F80/libdemo.so.sym",
            "code_id": "2AFD9ED5CF1F6063D63C673972D1C9F84589F8AF",
            "code_file": None,
        },
        {
            "key": (
                "v1/libpython3.11.so.1.0/4EF8DA4969D358FE9B73EA876F2591CD0/libpython3.11.so.1.0.sym"
            ),
            "code_id": "49DAF84ED369FE589B73EA876F2591CD4C3588BB",
            "code_file": None,
        },
    ]
