"""Typed records of the upload job: upload rows, limits, settings, per-member plans."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any, Mapping


class Status(str, enum.Enum):
    """``upload.status``."""

    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Upload:
    """One row of table ``upload`` (the columns the job uses)."""

    id: int
    inbox_key: str
    filename: str
    size: int
    uploaded_by: str | None
    status: Status
    attempts: int
    claimed_by: str | None
    error: str | None
    created_at: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Upload":
        return cls(row["id"], row["inbox_key"], row["filename"], row["size"], row["uploaded_by"],
                   Status(row["status"]), row["attempts"], row["claimed_by"], row["error"],
                   row.get("created_at"))


@dataclass(frozen=True)
class Limits:
    """What an archive may hold; safe defaults (options of the job)."""

    max_members: int = 20_000
    max_total_size: int = 8 * 1024**3
    max_member_size: int = 4 * 1024**3
    max_ratio: float = 200.0
    ratio_min_size: int = 1024**2


@dataclass(frozen=True)
class Settings:
    """Everything processing one upload needs to know (from the job's options)."""

    inbox_bucket: str = "symbols-inbox"
    symbols_bucket: str = "symbols"
    symbols_prefix: str = "v1"
    compress_extensions: tuple[str, ...] = ("sym",)
    gzip_level: int = 1
    concurrency: int = 8
    existence_check: str = "auto"  # auto | list | head
    limits: Limits = field(default_factory=Limits)
    multipart_threshold: int = 8 * 1024**2  # objects larger than this: multipart upload
    part_size: int = 8 * 1024**2  # S3's minimum is 5 MiB (except the last part)

    def object_key(self, member: str) -> str:
        return f"{self.symbols_prefix.strip('/')}/{member}" if self.symbols_prefix.strip("/") \
            else member

    def compresses(self, member: str) -> bool:
        return member.rsplit(".", 1)[-1].lower() in self.compress_extensions


@dataclass(frozen=True)
class Digest:
    """Size and MD5 of a member's uncompressed bytes, computed while streaming."""

    size: int
    md5: str


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
    """One object written: a future ``file_upload`` row."""

    key: str
    size: int
    original_size: int
    original_md5: str
    compressed: bool
    update: bool


@dataclass
class Counts:
    """What an upload's archive held."""

    total: int = 0
    ignored: int = 0
