"""The pure choice between LIST per directory and HEAD per key."""

from jobs.uploads.existence import choose_listing
from jobs.uploads.storage import directories


def test_many_keys_per_directory_mostly_new_lists():
    assert choose_listing(sampled_keys=40, sampled_hits=2, keys=400, dirs=40)


def test_one_key_per_directory_heads():
    assert not choose_listing(sampled_keys=16, sampled_hits=0, keys=300, dirs=300)


def test_mostly_existing_heads():
    assert not choose_listing(sampled_keys=40, sampled_hits=39, keys=400, dirs=40)


def test_nothing_sampled_lists():
    assert choose_listing(0, 0, 0, 0)


def test_directories_in_order():
    assert directories(["v1/a/B/x", "v1/a/B/y", "v1/c/D/z"]) == ["v1/a/B/", "v1/c/D/"]
