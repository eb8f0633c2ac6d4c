"""Typed records of the upload job: upload rows, limits, settings, per-member plans."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, TypedDict

from .options import DEFAULTS, parse_extensions, parse_overwrite


class UploadStatus(str, enum.Enum):
    """``upload.status``."""

    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"


class Overwrite(str, enum.Enum):
    """The ``overwrite`` option: what an upload does with a key already holding other bytes
    (the same bytes are never written again). docs/security.md states each rule."""

    REPLACE = "replace"  # write over it (Tecken's rule); the row keeps the old MD5, size, upload
    KEEP_FIRST = "keep-first"  # refuse the upload, naming the upload that wrote the key
    VERSIONED = "versioned"  # write over it; S3 versioning (checked at start) keeps the old


@dataclass(frozen=True)
class Upload:
    """One row of table ``upload`` (the columns the job uses)."""

    id: int
    inbox_key: str
    filename: str
    size: int
    uploaded_by: str | None
    status: UploadStatus
    attempts: int
    claimed_by: str | None
    error: str | None
    created_at: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Upload":
        return cls(
            row["id"],
            row["inbox_key"],
            row["filename"],
            row["size"],
            row["uploaded_by"],
            UploadStatus(row["status"]),
            row["attempts"],
            row["claimed_by"],
            row["error"],
            row.get("created_at"),
        )


@dataclass(frozen=True)
class Limits:
    """What an archive may hold (options of the job; defaults in :mod:`.options`)."""

    max_members: int = DEFAULTS["max_members"]
    max_total_size: int = DEFAULTS["max_total_size"]
    max_member_size: int = DEFAULTS["max_member_size"]
    max_ratio: float = DEFAULTS["max_ratio"]
    ratio_min_size: int = DEFAULTS["ratio_min_size"]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Limits:
        """The limits held by the job's options."""
        return cls(
            int(config["max_members"]),
            int(config["max_total_size"]),
            int(config["max_member_size"]),
            float(config["max_ratio"]),
            int(config["ratio_min_size"]),
        )


@dataclass(frozen=True)
class UploadSettings:
    """Everything processing one upload needs to know (the job's options; their meaning
    and defaults in :mod:`.options`)."""

    inbox_bucket: str = DEFAULTS["inbox_bucket"]
    symbols_bucket: str = DEFAULTS["symbols_bucket"]
    symbols_prefix: str = DEFAULTS["symbols_prefix"]
    compress_extensions: tuple[str, ...] = parse_extensions(DEFAULTS["compress_extensions"])
    gzip_level: int = DEFAULTS["gzip_level"]
    concurrency: int = DEFAULTS["concurrency"]
    existence_check: str = DEFAULTS["existence_check"]  # auto | list | head
    overwrite: Overwrite = Overwrite(DEFAULTS["overwrite"])
    limits: Limits = field(default_factory=Limits)
    multipart_threshold: int = DEFAULTS["multipart_threshold"]
    part_size: int = DEFAULTS["part_size"]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> UploadSettings:
        """The processing settings held by the job's options."""
        return cls(
            config["inbox_bucket"],
            config["symbols_bucket"],
            config["symbols_prefix"],
            parse_extensions(config["compress_extensions"]),
            int(config["gzip_level"]),
            int(config["concurrency"]),
            config["existence_check"],
            Overwrite(parse_overwrite(config["overwrite"])),
            Limits.from_config(config),
            int(config["multipart_threshold"]),
            int(config["part_size"]),
        )

    def compresses(self, member: str) -> bool:
        return member.rsplit(".", 1)[-1].lower() in self.compress_extensions


@dataclass(frozen=True)
class Digest:
    """Size and MD5 of a member's uncompressed bytes, computed while streaming, and its first
    bytes (``head``: up to :data:`~.symheader.HEAD_BYTES`, for a ``.sym`` file's header)."""

    size: int
    md5: str
    head: bytes = field(default=b"", compare=False, repr=False)


@dataclass(frozen=True)
class Existing:
    """An object already in the symbols bucket, with Tecken's metadata."""

    size: int
    original_size: int | None
    original_md5: str | None
    upload_id: int | None
    replaced: bool

    def same(self, digest: Digest) -> bool:
        return self.original_size == digest.size and self.original_md5 == digest.md5


@dataclass(frozen=True)
class Written:
    """One object written: a future ``file_upload`` row. ``update``: it replaced another
    object, whose Tecken metadata ``previous`` holds (its MD5, size and upload, when known);
    ``code_id`` and ``code_file``: a ``.sym`` file's ``INFO CODE_ID`` record."""

    key: str
    size: int
    original_size: int
    original_md5: str
    compressed: bool
    update: bool
    previous: Existing | None = None
    code_id: str | None = None
    code_file: str | None = None


class Part(TypedDict):
    """One written part of a multipart upload, as ``CompleteMultipartUpload`` takes it."""

    PartNumber: int
    ETag: str


@dataclass(frozen=True)
class Staged:
    """A large object's multipart upload with all its parts, not completed (invisible)."""

    written: Written
    upload: str  # the multipart upload's id
    parts: list[Part]


@dataclass
class Counts:
    """What an upload's archive held."""

    total: int = 0
    ignored: int = 0


class Recorder(Protocol):
    """The database side of processing one upload (implemented by the store's
    ``ClaimRecorder``): rows of the objects written, in batches, and the claim's lease."""

    def written_keys(self) -> set[str]: ...

    def record(self, written: Written) -> None: ...

    def heartbeat(self) -> None: ...

    def tick(self) -> None: ...

    def flush(self) -> None: ...


class Progress(Protocol):
    """Watches work being done (a progress bar): told the total once, then each unit as it
    is done, so each is counted once. Units: the members of one upload being published
    (published, or found already there), or ``drain``'s uploads."""

    def start(self, total: int) -> None:
        """``total`` units are to be done (called once, before any :meth:`advance`)."""

    def advance(self, count: int) -> None:
        """``count`` more units are done."""


class QuietProgress:
    """A :class:`Progress` that shows nothing (the cron job, ``drain``)."""

    def start(self, total: int) -> None:
        return None

    def advance(self, count: int) -> None:
        return None
