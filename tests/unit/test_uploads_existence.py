"""The pure choice between LIST per directory, HEAD per key and conditional writes."""

from jobs.uploads.existence import CONDITIONAL, HEAD, LIST, choose


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

