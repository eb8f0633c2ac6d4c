"""Which symbol keys already exist, for few requests whether most keys are new or most exist.

On the local S3 server a LIST of a directory, a HEAD (found or not) and a small PUT
each take about 1.5 ms (measured; docs/jobs/uploads.md), so the number of requests is
what counts. Reading Tecken's metadata needs one HEAD per existing object either way;
a LIST of a ``<debug_file>/<DEBUG_ID>/`` directory answers for every key in it.
With ``K`` keys in ``D`` directories, of which a fraction ``p`` exists:

- listing costs ``D + p*K`` requests; HEAD per key costs ``K``;
- so listing wins when ``p < 1 - D/K``: many keys per directory, mostly new.

``auto`` lists a sample of directories, estimates ``p`` and picks the cheaper way for
the rest. ``list`` and ``head`` force one way.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from . import storage
from .records import Existing

SAMPLE_DIRECTORIES = 16


def choose_listing(sampled_keys: int, sampled_hits: int, keys: int, dirs: int) -> bool:
    """Pure: should the remaining directories be listed (True) or their keys HEADed?"""
    if sampled_keys == 0 or keys == 0:
        return True
    return sampled_hits / sampled_keys < 1 - dirs / keys


def _directory(key: str) -> str:
    return key.rsplit("/", 1)[0] + "/"


def find_existing(pool: Executor, client: Any, bucket: str, keys: list[str],
                  mode: str = "auto") -> dict[str, Existing | None]:
    """``{key: Existing or None}`` for every key.

    Raises:
        StorageFailed: when S3 fails after retries.
    """
    dirs = storage.directories(keys)
    if mode == "head":
        return _heads(pool, client, bucket, keys)
    sample = dirs if mode == "list" else dirs[:SAMPLE_DIRECTORIES]
    listed = _list(pool, client, bucket, sample)
    sample_set = set(sample)
    sampled = [key for key in keys if _directory(key) in sample_set]
    rest = [key for key in keys if _directory(key) not in sample_set]
    candidates = [key for key in sampled if key in listed]
    if rest:
        if choose_listing(len(sampled), len(candidates), len(keys), len(dirs)):
            listed_rest = _list(pool, client, bucket, storage.directories(rest))
            candidates += [key for key in rest if key in listed_rest]
        else:
            candidates += rest
    found = _heads(pool, client, bucket, candidates)
    return {key: found.get(key) for key in keys}


def _list(pool: Executor, client: Any, bucket: str, dirs: list[str]) -> set[str]:
    keys: set[str] = set()
    for listed in pool.map(lambda prefix: storage.list_directory(client, bucket, prefix), dirs):
        keys |= listed
    return keys


def _heads(pool: Executor, client: Any, bucket: str, keys: list[str]) -> dict[str, Existing | None]:
    return dict(zip(keys, pool.map(lambda key: storage.head(client, bucket, key), keys)))
