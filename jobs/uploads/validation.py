"""Validate a symbol archive from its central directory, before anything is written.

Pure: takes the ``zipfile.ZipInfo`` list and the limits, returns a :class:`Plan` or
raises :class:`~jobs.uploads.errors.Rejected` naming the first offending member and the
rule. Content errors that only reading can find (CRC, truncation) are found by
:mod:`jobs.uploads.archive` in the verify pass, still before anything is written.
"""

from __future__ import annotations

import re
import stat
import zipfile
from dataclasses import dataclass, field

from .errors import Rejected
from .records import Limits

# Tecken's key rules: <debug_file>/<hex DEBUG_ID>/<file>; the outer parts avoid control
# characters, bytes 0x80-0xFF, the S3 "characters to avoid" and '/'.
_OUTER = r"[^\x00-\x1f\x7f-\xff\\^`<>{}\[\]#%\"'|/]+"
KEY_PATTERN = re.compile(rf"^{_OUTER}/[0-9A-Fa-f]+/{_OUTER}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SUPPORTED_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)

RULE_CONTROL = "control character in name"
RULE_BACKSLASH = "backslash in name"
RULE_ABSOLUTE = "absolute path"
RULE_TRAVERSAL = "path traversal ('..')"
RULE_PATTERN = "name is not <debug_file>/<hex DEBUG_ID>/<file> nor an ignorable name"
RULE_SYMLINK = "symbolic link"
RULE_SPECIAL = "special file (not a regular file)"
RULE_ENCRYPTED = "encrypted member"
RULE_METHOD = "unsupported compression method"
RULE_DUPLICATE = "duplicate name with different content"
RULE_TOO_MANY = "too many members"
RULE_MEMBER_SIZE = "member too large"
RULE_TOTAL_SIZE = "total uncompressed size over the limit"
RULE_RATIO = "suspicious compression ratio (zip bomb?)"


@dataclass
class Plan:
    """What to do with a valid archive: symbol members to publish, names to ignore."""

    members: list[zipfile.ZipInfo] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.members) + len(self.ignored)


def is_ignorable(name: str) -> bool:
    """A top-level ``*-symbols.txt`` or any ``.DS_Store`` (Tecken ignores both)."""
    return ("/" not in name and name.endswith("-symbols.txt")) or \
        name.rsplit("/", 1)[-1] == ".DS_Store"


def check_name(name: str) -> None:
    """Raise :class:`Rejected` when ``name`` is unsafe or not a symbol key."""
    check_safe(name)
    if "." in name.split("/") or (not is_ignorable(name) and not KEY_PATTERN.match(name)):
        raise Rejected(RULE_PATTERN, name)


def check_safe(name: str) -> None:
    """Raise :class:`Rejected` when ``name`` could escape a directory or fool a reader."""
    if _CONTROL.search(name):
        raise Rejected(RULE_CONTROL, name)
    if "\\" in name:
        raise Rejected(RULE_BACKSLASH, name)
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Rejected(RULE_ABSOLUTE, name)
    if ".." in name.split("/"):
        raise Rejected(RULE_TRAVERSAL, name)


def check_kind(info: zipfile.ZipInfo) -> None:
    """Only regular, unencrypted, stored or deflated files."""
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no type recorded (Python's writestr)
    if info.create_system == 3 and kind:
        if kind == stat.S_IFLNK:
            raise Rejected(RULE_SYMLINK, info.filename)
        if kind != stat.S_IFREG:
            raise Rejected(RULE_SPECIAL, info.filename)
    if info.flag_bits & 0x1:
        raise Rejected(RULE_ENCRYPTED, info.filename)
    if info.compress_type not in _SUPPORTED_METHODS:
        raise Rejected(RULE_METHOD, info.filename, f"method {info.compress_type}")


def check_size(info: zipfile.ZipInfo, total: int, limits: Limits) -> None:
    """Per-member size, running total and compression ratio."""
    if info.file_size > limits.max_member_size:
        raise Rejected(RULE_MEMBER_SIZE, info.filename,
                       f"{info.file_size} bytes > {limits.max_member_size}")
    if total > limits.max_total_size:
        raise Rejected(RULE_TOTAL_SIZE, info.filename,
                       f"{total} bytes > {limits.max_total_size}")
    if info.file_size >= limits.ratio_min_size and \
            info.file_size > limits.max_ratio * max(info.compress_size, 1):
        ratio = info.file_size / max(info.compress_size, 1)
        raise Rejected(RULE_RATIO, info.filename, f"{ratio:.0f}:1 > {limits.max_ratio:.0f}:1")


def validate(infos: list[zipfile.ZipInfo], limits: Limits) -> Plan:
    """Check every member of the central directory, in order.

    Directory entries are skipped; a duplicate name with the same CRC and size is
    published once.

    Raises:
        Rejected: at the first member that breaks a rule.
    """
    plan = Plan()
    seen: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        if info.filename.endswith("/"):
            check_safe(info.filename)  # directory entries are skipped, but not if unsafe
    files = [info for info in infos if not info.filename.endswith("/")]
    if len(files) > limits.max_members:
        raise Rejected(RULE_TOO_MANY, files[limits.max_members].filename,
                       f"{len(files)} > {limits.max_members}")
    for info in files:
        check_name(info.filename)
        check_kind(info)
        total += info.file_size
        check_size(info, total, limits)
        first = seen.get(info.filename)
        if first is not None:
            if (first.CRC, first.file_size) != (info.CRC, info.file_size):
                raise Rejected(RULE_DUPLICATE, info.filename)
            continue
        seen[info.filename] = info
        (plan.ignored.append(info.filename) if is_ignorable(info.filename)
         else plan.members.append(info))
    return plan
