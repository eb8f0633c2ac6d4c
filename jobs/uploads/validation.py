"""Validate a symbol archive from its central directory, before anything is written.

:func:`read_plan` opens the archive's end records and central directory (the standard
library parses them; we check what it lets through: split archives, entry counts, newer
format versions); :func:`validate` is pure: takes the ``zipfile.ZipInfo`` list and the
limits, returns a :class:`Plan` or raises :class:`~jobs.uploads.errors.Rejected` naming the
first offending member and the rule. What only reading can find (the local header against
the central directory, CRC, truncation, data descriptors) is found by
:mod:`jobs.uploads.archive` in the verify pass, still before anything is written.

The zip features a symbol archive never needs are refused rather than half-supported
(APPNOTE.TXT 6.3.10): encryption of any kind (flag bits 0, 6, 13), patch data (bit 5),
compression methods other than stored and deflate, archives on more than one disk.
"""

from __future__ import annotations

import re
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from jobs import symbolkey
from jobs.symbolkey import SymbolKey

from .errors import Rejected
from .records import Limits

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SUPPORTED_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)

RULE_CONTROL = "control character in name"
RULE_BACKSLASH = "backslash in name"
RULE_ABSOLUTE = "absolute path"
RULE_TRAVERSAL = "path traversal ('..')"
RULE_SYMLINK = "symbolic link"
RULE_SPECIAL = "special file (not a regular file)"
RULE_ENCRYPTED = "encrypted (flag bit 0)"
RULE_STRONG = "strong encryption (flag bit 6)"
RULE_MASKED = "central directory encryption (masked local header, flag bit 13)"
RULE_PATCHED = "compressed patched data (flag bit 5)"
RULE_NOT_ZIP = "not a zip archive (or its central directory is corrupt or truncated)"
RULE_FEATURE = "a zip feature this reader does not support"
RULE_EMPTY = "archive has no files"
RULE_MULTI_DISK = "split or spanned archive (more than one disk)"
RULE_COUNT = "the end record's entry count differs from the central directory's"
RULE_OVERLAP = "overlaps the next record (overlapping members: a zip bomb?)"
RULE_METHOD = "unsupported compression method"
RULE_DUPLICATE = "duplicate name with different content"
RULE_TOO_MANY = "too many members"
RULE_MEMBER_SIZE = "member too large"
RULE_TOTAL_SIZE = "total uncompressed size over the limit"
RULE_RATIO = "suspicious compression ratio (zip bomb?)"
RULE_DIRECTORY_SIZE = "central directory too large"
# what the end records alone decide (read_plan checks them before parsing the directory)
END_RECORD_RULES = (RULE_MULTI_DISK, RULE_TOO_MANY, RULE_DIRECTORY_SIZE)
# bytes of central directory allowed per member of max_members (an entry is 46 bytes plus
# its name and extra field; symbol keys are well under 1 KiB): 20 MB with the defaults
DIRECTORY_BYTES_PER_MEMBER = 1024


# general-purpose flag bits (APPNOTE 4.4.4) that make a member unreadable as plain data
_REFUSED_FLAGS = (
    (0x2000, RULE_MASKED),
    (0x0040, RULE_STRONG),
    (0x0001, RULE_ENCRYPTED),
    (0x0020, RULE_PATCHED),
)
FLAG_DESCRIPTOR = 0x0008  # CRC and sizes follow the data (zero in the local header)
FLAG_UTF8 = 0x0800  # the name is UTF-8 (else code page 437)
LOCAL_HEADER_SIZE = 30  # the fixed part of a local file header (4.3.7)
_END = struct.Struct("<4s4H2LH")  # end of central directory record (4.3.16)
_END64 = struct.Struct("<4sQ2H2L4Q")  # ZIP64 end of central directory record (4.3.14)
_LOCATOR64 = struct.Struct("<4sLQL")  # ZIP64 end of central directory locator (4.3.15)


@dataclass
class Plan:
    """What to do with a valid archive: symbol members to publish (``keys[i]``: the canonical
    key of ``members[i]``), names to ignore."""

    members: list[zipfile.ZipInfo] = field(default_factory=list)
    keys: list[SymbolKey] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.members) + len(self.ignored)


def is_ignorable(name: str) -> bool:
    """A top-level ``*-symbols.txt`` or any ``.DS_Store`` (Tecken ignores both)."""
    return ("/" not in name and name.endswith("-symbols.txt")) or name.rsplit("/", 1)[
        -1
    ] == ".DS_Store"


def check_name(name: str, prefix: str = "") -> SymbolKey | None:
    """The canonical key of member ``name`` (:mod:`jobs.symbolkey`; ``prefix``: the one it
    is stored under), or None for an ignorable name.

    Raises:
        Rejected: ``name`` is unsafe, or not a canonical symbol key (naming the rule).
    """
    check_safe(name)
    if is_ignorable(name):
        return None
    try:
        return symbolkey.parse(name, prefix)
    except symbolkey.BadKey as exc:
        raise Rejected(exc.rule, name, exc.detail) from None


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


def raw_name(info: zipfile.ZipInfo) -> bytes:
    """The name's bytes as the central directory holds them (``orig_filename`` keeps what
    ``filename`` cuts at a NUL; code page 437 and UTF-8 both decode and encode back exactly)."""
    return info.orig_filename.encode("utf-8" if info.flag_bits & FLAG_UTF8 else "cp437", "replace")


def check_flags(name: str, flags: int) -> None:
    """Raise :class:`Rejected` when ``flags`` (either header's) ask for a feature we refuse."""
    for bit, rule in _REFUSED_FLAGS:
        if flags & bit:
            raise Rejected(rule, name)


def check_kind(info: zipfile.ZipInfo) -> None:
    """Only regular, unencrypted, stored or deflated files, on the archive's only disk."""
    if info.orig_filename != info.filename:  # zipfile cuts the name at a NUL: another reader
        raise Rejected(RULE_CONTROL, info.orig_filename)  # would not (nor would we publish it)
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no type recorded (Python's writestr)
    if info.create_system == 3 and kind:
        if kind == stat.S_IFLNK:
            raise Rejected(RULE_SYMLINK, info.filename)
        if kind != stat.S_IFREG:
            raise Rejected(RULE_SPECIAL, info.filename)
    check_flags(info.filename, info.flag_bits)
    if info.volume != 0:  # "disk number start" (0xFFFF: in a ZIP64 field; single-disk never)
        raise Rejected(RULE_MULTI_DISK, info.filename, f"on disk {info.volume}")
    if info.compress_type not in _SUPPORTED_METHODS:
        raise Rejected(RULE_METHOD, info.filename, f"method {info.compress_type}")


def check_size(info: zipfile.ZipInfo, total: int, limits: Limits) -> None:
    """Per-member size, running total and compression ratio (every member, any size).
    The sizes are the central directory's; :mod:`.archive` refuses a member whose data
    inflates to more than its declared size while streaming, so they bound what is written."""
    if info.file_size > limits.max_member_size:
        raise Rejected(
            RULE_MEMBER_SIZE, info.filename, f"{info.file_size} bytes > {limits.max_member_size}"
        )
    if total > limits.max_total_size:
        raise Rejected(RULE_TOTAL_SIZE, info.filename, f"{total} bytes > {limits.max_total_size}")
    # whatever the member's size or kind: many small members within a size floor were how
    # a 78 kB archive wrote 64 MiB (docs/security.md, "Upload archives")
    if info.file_size > limits.max_ratio * max(info.compress_size, 1):
        ratio = info.file_size / max(info.compress_size, 1)
        raise Rejected(RULE_RATIO, info.filename, f"{ratio:.0f}:1 > {limits.max_ratio:.0f}:1")


def check_layout(infos: list[zipfile.ZipInfo], directory: int | None) -> None:
    """Each entry's local header and data must end before the next entry's local header
    (by offset), the last one before the central directory (``directory``, its offset, if
    known). Overlapping entries are how the densest zip bombs reuse one compressed kernel
    for many members (each within the ratio limit); no writer produces them. The local
    header's extra field is not known here: its minimal size is used."""
    spans = sorted(infos, key=lambda info: info.header_offset)
    for info, following in zip(spans, spans[1:] + [None]):
        limit = following.header_offset if following is not None else directory
        end = info.header_offset + LOCAL_HEADER_SIZE + len(raw_name(info)) + info.compress_size
        if limit is not None and end > limit:
            raise Rejected(
                RULE_OVERLAP,
                info.filename,
                f"its data ends at {end} or later, the next record starts at {limit}",
            )


def validate(
    infos: list[zipfile.ZipInfo], limits: Limits, directory: int | None = None, prefix: str = ""
) -> Plan:
    """Check every member of the central directory, in order; then that no two overlap
    (``directory``: where the central directory starts, the bound of the last member;
    ``prefix``: the key prefix the members will be stored under).

    Directory entries are skipped; two members with the same canonical key (a debug id in
    either case: :mod:`jobs.symbolkey`) and the same CRC and size are published once, with
    other content they are refused. An archive whose members are all ignorable names
    (``*-symbols.txt``, ``.DS_Store``) is valid with nothing to publish (Tecken completes such
    an upload and lists them as ignored); one without any file (no member, or directories
    only) is not.

    Raises:
        Rejected: at the first member that breaks a rule; with no member named when the
            archive has no files.
    """
    plan = Plan()
    seen: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in _file_members(infos, limits):
        key = check_name(info.filename, prefix)
        check_kind(info)
        total += info.file_size
        check_size(info, total, limits)
        name = key.path if key is not None else info.filename
        first = seen.get(name)
        if first is not None:
            if (first.CRC, first.file_size) != (info.CRC, info.file_size):
                raise Rejected(
                    RULE_DUPLICATE,
                    info.filename,
                    f"same key as {first.filename!r}" if first.filename != info.filename else "",
                )
            continue
        seen[name] = info
        if key is None:
            plan.ignored.append(info.filename)
        else:
            plan.members.append(info)
            plan.keys.append(key)
    check_layout(infos, directory)
    return plan


def _file_members(infos: list[zipfile.ZipInfo], limits: Limits) -> list[zipfile.ZipInfo]:
    """The members of ``infos`` that are files, in order; directory entries are skipped, but
    only once each name is checked safe (:func:`check_safe`).

    Raises:
        Rejected: an unsafe directory name; no file at all; more than ``limits.max_members``.
    """
    for info in infos:
        if info.filename.endswith("/"):
            check_safe(info.filename)
    files = [info for info in infos if not info.filename.endswith("/")]
    if not files:
        raise Rejected(RULE_EMPTY)
    if len(files) > limits.max_members:
        raise Rejected(
            RULE_TOO_MANY,
            files[limits.max_members].filename,
            f"{len(files)} > {limits.max_members}",
        )
    return files


def read_plan(path: Path, limits: Limits, prefix: str = "") -> Plan:
    """The validated plan of the archive at ``path`` (its end records and central directory
    only: in the job, possibly a sparse file holding just the archive's tail; ``prefix``: the
    key prefix its members will be stored under).

    Raises:
        Rejected: not a zip, a split archive, a count or version the directory does not
            bear out, or a rule broken by a member.
    """
    try:
        with open(path, "rb") as handle:
            end = _end_record(handle)
    except OSError as exc:
        raise Rejected(RULE_NOT_ZIP, None, str(exc)) from None
    check_end(end)
    check_directory_bounds(end, limits)  # before zipfile parses (and holds) the directory
    try:
        with zipfile.ZipFile(path) as zipped:
            infos = zipped.infolist()
            directory = getattr(zipped, "start_dir", None)  # (CPython's, not in the stubs)
    except NotImplementedError as exc:  # zipfile: "zip file version 6.4" and the like
        raise Rejected(RULE_FEATURE, None, str(exc)) from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as exc:
        raise Rejected(RULE_NOT_ZIP, None, str(exc)) from None
    check_entry_count(end, len(infos))
    plan = validate(infos, limits, directory if isinstance(directory, int) else None, prefix)
    check_archive_ratio(infos, path.stat().st_size, limits)
    return plan


def check_archive_ratio(infos: list[zipfile.ZipInfo], archive_size: int, limits: Limits) -> None:
    """The whole archive's uncompressed:archive-size ratio must be within ``max_ratio`` too
    (no member named: the archive as a whole is refused)."""
    total = sum(info.file_size for info in infos)
    if total > limits.max_ratio * max(archive_size, 1):
        raise Rejected(
            RULE_RATIO,
            None,
            f"whole archive: {total / max(archive_size, 1):.0f}:1 "
            f"> {limits.max_ratio:.0f}:1 ({total} bytes from {archive_size})",
        )


def check_directory_bounds(record: EndRecord | None, limits: Limits) -> None:
    """Refuse from the end record alone, before the central directory is parsed, an
    archive declaring more entries than ``max_members`` (directory entries count here) or
    a central directory over ``max_members * DIRECTORY_BYTES_PER_MEMBER`` bytes: parsing a
    huge directory costs about 6 bytes of memory per byte of it. The count is checked
    against the parsed directory afterwards (:func:`check_entry_count`); zipfile reads the
    directory by its declared size, so this size bounds what it parses."""
    if record is None:
        return
    if record.entries > limits.max_members:
        raise Rejected(
            RULE_TOO_MANY,
            None,
            f"{record.entries} entries declared in the end record > {limits.max_members}",
        )
    bound = limits.max_members * DIRECTORY_BYTES_PER_MEMBER
    if record.directory_size > bound:
        raise Rejected(
            RULE_DIRECTORY_SIZE,
            None,
            f"{record.directory_size} bytes declared in the end record > {bound}",
        )


@dataclass(frozen=True)
class EndRecord:
    """What the end records say about disks and entries (ZIP64's when present)."""

    disk: int  # number of this disk
    directory_disk: int  # disk where the central directory starts
    entries_here: int  # entries on this disk
    entries: int  # entries in all
    disks: int = 1  # total number of disks (the ZIP64 locator's; 1 without one)
    directory_size: int = 0  # bytes of central directory


def _end_record(handle: BinaryIO) -> EndRecord | None:
    """The end records found where zipfile finds them (``_EndRecData``): at the very end
    when there is no comment, else the last signature in the last 64 KiB; the ZIP64 records
    right before. None when there is none (zipfile then says it is not a zip)."""
    size = handle.seek(0, 2)
    window = min(size, _END.size + (1 << 16))
    handle.seek(size - window)
    tail = handle.read(window)
    at = len(tail) - _END.size
    if not (at >= 0 and tail[at : at + 4] == b"PK\x05\x06" and tail[-2:] == b"\0\0"):
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + _END.size > len(tail):
            return None
    _, disk, directory_disk, here, total, size = _END.unpack_from(tail, at)[:6]
    record = EndRecord(disk, directory_disk, here, total, 1, size)
    locator = at - _LOCATOR64.size
    if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        disks = _LOCATOR64.unpack_from(tail, locator)[3]
        at64 = locator - _END64.size
        if at64 >= 0 and tail[at64 : at64 + 4] == b"PK\x06\x06":
            _, _, _, _, disk, directory_disk, here, total, size = _END64.unpack_from(tail, at64)[:9]
        record = EndRecord(disk, directory_disk, here, total, disks, size)
    return record


def check_end(record: EndRecord | None) -> None:
    """A single-disk archive: disk 0, its directory on disk 0, all entries on it. zipfile
    refuses a ZIP64 archive on several disks but reads the last part of a split archive
    without ZIP64 as if whole (its offsets then point into the missing parts)."""
    if record is None:
        return
    if (
        record.disk
        or record.directory_disk
        or record.disks > 1
        or record.entries_here != record.entries
    ):
        raise Rejected(
            RULE_MULTI_DISK,
            None,
            f"disk {record.disk}, directory on disk {record.directory_disk}, "
            f"{record.disks} disk(s), {record.entries_here} of {record.entries} "
            "entries here",
        )


def check_entry_count(record: EndRecord | None, found: int) -> None:
    """zipfile reads the central directory by its size and ignores the end record's count;
    a reader trusting the count would see other members."""
    if record is not None and record.entries != found:
        raise Rejected(RULE_COUNT, None, f"{record.entries} declared, {found} in the directory")
