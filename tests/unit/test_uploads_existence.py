"""The pure decisions of existence.py: LIST per directory, HEAD per key or conditional
writes; and what a key's object means for its write."""

from jobs.uploads.existence import CONDITIONAL, HEAD, LIST, Verdict, choose, decide
from jobs.uploads.records import Digest, Existing, Written


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
    assert decide(there(md5="other"), "k", digest, 7, True) == Verdict(write=True, update=True)
    assert decide(there(size=11), "k", digest, 7, True) == Verdict(write=True, update=True)
    assert decide(there(upload_id=3), "k", digest, 7, True) == Verdict(write=False)
    # written by this upload, which was stopped before its row: the row, from the metadata
    assert decide(there(upload_id=7, replaced=True), "k", digest, 7, True) == Verdict(
        write=False, row=Written("k", 4, 10, "md5", True, True))
