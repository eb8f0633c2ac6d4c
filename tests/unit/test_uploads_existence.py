"""The pure decisions of existence.py: LIST per directory, HEAD per key or conditional
writes; and what a key's object means for its write."""

import pytest

from jobs.uploads.errors import Rejected
from jobs.uploads.existence import (
    CONDITIONAL,
    HEAD,
    LIST,
    RULE_KEEP_FIRST,
    Verdict,
    choose,
    decide,
)
from jobs.uploads.records import Digest, Existing, Overwrite, Written


def test_mostly_new_is_written_conditionally():
    assert choose(sampled_keys=40, sampled_hits=2, keys=400, dirs=40) == CONDITIONAL


def test_one_key_per_directory_all_new_is_written_conditionally():
    assert choose(sampled_keys=16, sampled_hits=0, keys=300, dirs=300) == CONDITIONAL


def test_many_keys_per_directory_partly_existing_lists():
    assert choose(sampled_keys=40, sampled_hits=10, keys=400, dirs=40) == LIST


def test_mostly_existing_heads():
    assert choose(sampled_keys=40, sampled_hits=39, keys=400, dirs=40) == HEAD
    assert choose(sampled_keys=16, sampled_hits=12, keys=300, dirs=300) == HEAD


def test_nothing_sampled_lists():
    assert choose(0, 0, 0, 0) == LIST


def test_decide_writes_unless_the_same_bytes_are_there_and_recovers_its_own_rows():
    digest = Digest(10, "md5")

    def there(size=10, md5="md5", upload_id=None, replaced=False):
        return Existing(4, size, md5, upload_id, replaced)

    assert decide(None, "k", digest, 7, True) == Verdict(write=True, update=False)
    assert decide(there(md5="other"), "k", digest, 7, True) == Verdict(
        write=True, update=True, previous=there(md5="other")
    )
    assert decide(there(size=11), "k", digest, 7, True) == Verdict(
        write=True, update=True, previous=there(size=11)
    )
    assert decide(there(upload_id=3), "k", digest, 7, True) == Verdict(write=False)
    # written by this upload, which was stopped before its row: the row, from the metadata
    assert decide(there(upload_id=7, replaced=True), "k", digest, 7, True) == Verdict(
        write=False, row=Written("k", 4, 10, "md5", True, True)
    )


def test_keep_first_refuses_another_uploads_file_and_names_it():
    digest = Digest(10, "md5")
    other = Existing(4, 12, "earlier", 20, False)
    with pytest.raises(Rejected) as caught:
        decide(other, "v1/k", digest, 7, True, Overwrite.KEEP_FIRST, "x.pdb/ID/x.sym")
    assert caught.value.rule == RULE_KEEP_FIRST and caught.value.member == "x.pdb/ID/x.sym"
    assert "upload 20" in str(caught.value) and "MD5 earlier" in str(caught.value)
    # the same bytes are skipped, and this upload's own object (a retried attempt) replaced
    assert decide(
        Existing(4, 10, "md5", 20, False), "k", digest, 7, True, Overwrite.KEEP_FIRST
    ) == Verdict(write=False)
    mine = Existing(4, 12, "earlier", 7, False)
    assert decide(mine, "k", digest, 7, True, Overwrite.KEEP_FIRST).write
    for rule in (Overwrite.REPLACE, Overwrite.VERSIONED):
        assert decide(other, "k", digest, 7, True, rule) == Verdict(True, True, None, other)
