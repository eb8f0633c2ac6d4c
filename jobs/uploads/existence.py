"""Which symbol keys already exist, for few requests whether most keys are new or most exist.

On the local S3 server a LIST of a directory, a HEAD (found or not) and a small PUT
each take about 1.5 ms (and about 1 ms of this process's CPU; measured, see
docs/jobs/uploads.md), so the number of requests is what counts. Reading Tecken's
metadata needs one HEAD per existing object either way; a LIST of a
``<debug_file>/<DEBUG_ID>/`` directory answers for every key in it; and a conditional
PUT (``If-None-Match: *``) needs no check at all for a new key, only a HEAD (and maybe
the PUT again) when the key turns out to exist. With ``K`` keys in ``D`` directories,
of which a fraction ``p`` exists, the extra requests are:

- listing: ``D + p*K``; HEAD per key: ``K``;
- conditional writes: about ``2*p*K`` (a refused PUT, then a HEAD; a compression is
  wasted on each such key, counted in the 2).

``auto`` lists a sample of directories, estimates ``p`` and picks the cheapest way for
the rest: mostly-new archives are written conditionally (no per-key request at all),
mostly-existing ones are HEADed (so identical files are never compressed).
``list`` and ``head`` force one way (``conditional`` is never forced: it needs S3's
conditional writes, which AWS S3 and s3proxy 4 have).
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from . import storage
from .records import Existing

SAMPLE_DIRECTORIES = 16
LIST, HEAD, CONDITIONAL = "list", "head", "conditional"


def choose(sampled_keys: int, sampled_hits: int, keys: int, dirs: int) -> str:
    """Pure: how to check the remaining keys: ``list``, ``head`` or ``conditional``
    (not checked now: written with ``If-None-Match: *``), whichever costs fewest requests."""
    if sampled_keys == 0 or keys == 0:
        return LIST
    p = sampled_hits / sampled_keys
    costs = {CONDITIONAL: 2 * p * keys, LIST: dirs + p * keys, HEAD: keys}
    return min(costs, key=lambda way: costs[way])


def _directory(key: str) -> str:
    return key.rsplit("/", 1)[0] + "/"


def find_existing(pool: Executor, client: Any, bucket: str, keys: list[str],
                  mode: str = "auto") -> dict[str, Existing | None]:
    """``{key: Existing or None}`` for every key checked. In ``auto`` mode keys may be
    left out: they were not checked and are to be written conditionally.

    Raises:
        StorageFailed: when S3 fails after retries.
    """
    dirs = storage.directories(keys)
    if mode == HEAD:
        return _heads(pool, client, bucket, keys)
    sample = dirs if mode == LIST else dirs[:SAMPLE_DIRECTORIES]
    listed = _list(pool, client, bucket, sample)
    sample_set = set(sample)
    sampled = [key for key in keys if _directory(key) in sample_set]
    rest = [key for key in keys if _directory(key) not in sample_set]
    checked = list(sampled)
    candidates = [key for key in sampled if key in listed]
    if rest:
        way = choose(len(sampled), len(candidates), len(keys), len(dirs))
        if way == LIST:
            listed_rest = _list(pool, client, bucket, storage.directories(rest))
            candidates += [key for key in rest if key in listed_rest]
            checked += rest
        elif way == HEAD:
            candidates += rest
            checked += rest
    found = _heads(pool, client, bucket, candidates)
    return {key: found.get(key) for key in checked}


def _list(pool: Executor, client: Any, bucket: str, dirs: list[str]) -> set[str]:
    keys: set[str] = set()
    for listed in pool.map(lambda prefix: storage.list_directory(client, bucket, prefix), dirs):
        keys |= listed
    return keys


def _heads(pool: Executor, client: Any, bucket: str, keys: list[str]) -> dict[str, Existing | None]:
    return dict(zip(keys, pool.map(lambda key: storage.head(client, bucket, key), keys)))
