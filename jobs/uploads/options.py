"""The upload job's options, each declared once: name, default, meaning.

``ProcessUploadsCronApp`` (:mod:`.app`) declares them to the runner from this table, and
the typed records the code uses (:class:`.records.UploadSettings`, :class:`.records.Limits`,
:class:`.worker.Policy`) take their defaults from :data:`DEFAULTS`, so a default is
written in one place. Plain data: the runner imports every job module on each tick, and
this costs it nothing (the records, with their dataclasses, are imported only when the
job runs).
"""

from __future__ import annotations

from jobs import defaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MiB, GiB = 1024**2, 1024**3

#: (name, default, doc), in the order ``--help`` and the docs show them.
OPTIONS: tuple[tuple[str, Any, str], ...] = (
    # where archives come from and symbol files go
    ("inbox_bucket", defaults.INBOX_BUCKET, "bucket holding uploaded archives"),
    ("inbox_prefix", defaults.UPLOADS_PREFIX, "key prefix of archives stored by `enqueue`"),
    ("symbols_bucket", defaults.SYMBOLS_BUCKET, "bucket symbol files are written to"),
    ("symbols_prefix", defaults.SYMBOLS_PREFIX, "key prefix: <prefix>/<debug_file>/<ID>/<file>"),
    # how objects are written
    ("compress_extensions", "sym", "comma-separated extensions stored gzipped"),
    (
        "gzip_level",
        1,
        "isal deflate level (0-3) for stored members (deflated ones keep their stream)",
    ),
    ("concurrency", 8, "threads (and S3 connections) per upload"),
    (
        "multipart_threshold",
        8 * MiB,
        "objects larger than this (bytes, as stored) are written by multipart upload",
    ),
    ("part_size", 8 * MiB, "multipart part size in bytes (S3: >= 5 MiB)"),
    ("existence_check", "auto", "auto, list or head (see docs/jobs/uploads.md)"),
    (
        "overwrite",
        "replace",
        "a key holding other bytes: replace, keep-first or versioned (docs/security.md)",
    ),
    # the queue
    ("max_attempts", 3, "attempts before an upload stays failed"),
    ("lease_seconds", 600.0, "a claim not renewed for this long is taken over"),
    ("retry_delay_seconds", 300.0, "wait before retrying a failed attempt"),
    ("heartbeat_seconds", 30.0, "how often a worker renews its claim"),
    ("max_uploads_per_run", 0, "uploads per run (0: until the queue is empty)"),
    # what an archive may hold (zip bombs, runaway uploads)
    ("max_members", 20_000, "files an archive may hold"),
    ("max_total_size", 8 * GiB, "uncompressed bytes per archive"),
    ("max_member_size", 4 * GiB, "uncompressed bytes per file"),
    ("max_ratio", 200.0, "largest uncompressed:compressed ratio"),
    ("ratio_min_size", 1 * MiB, "unused (max_ratio applies to every member)"),
)

#: Each option's default, by name.
DEFAULTS: dict[str, Any] = {name: default for name, default, _ in OPTIONS}

#: The ``overwrite`` option's rules (:class:`.records.Overwrite`).
OVERWRITE_RULES = ("replace", "keep-first", "versioned")


def parse_overwrite(text: str) -> str:
    """The ``overwrite`` option's value, checked when the configuration is read.

    Raises:
        ValueError: not one of :data:`OVERWRITE_RULES` (the message lists them).
    """
    rule = str(text).strip().lower()
    if rule not in OVERWRITE_RULES:
        raise ValueError(f"{text!r} is not one of {', '.join(OVERWRITE_RULES)}")
    return rule


#: Options whose text is parsed by a function of their own (others: by their default's type).
CONVERTERS = {"overwrite": parse_overwrite}


def parse_extensions(text: str) -> tuple[str, ...]:
    """``"sym, .TXT"`` -> ``("sym", "txt")``: the ``compress_extensions`` option."""
    return tuple(part.strip().lower().lstrip(".") for part in str(text).split(",") if part.strip())
