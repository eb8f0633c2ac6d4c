"""Stream a member's bytes out of a zip file on disk (nothing is extracted).

Our own reader instead of ``ZipFile.open``: it inflates with isal (about twice
the standard library's speed on .sym text, see docs/jobs/uploads.md), checks that
the local header agrees with the central directory (a member smuggled under
another name is rejected), and checks size and CRC at the end (a corrupt or
truncated member raises :class:`Rejected`). Each call opens its own file handle,
so threads can read members concurrently.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
from pathlib import Path
from typing import BinaryIO, Iterator

from .errors import Rejected
from .records import Digest

CHUNK = 1024 * 1024
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")

RULE_CORRUPT = "corrupt or truncated data"
RULE_CRC = "CRC-32 mismatch (corrupt member)"
RULE_LOCAL_HEADER = "local header does not match the central directory"


def _data_offset(handle: object, info: zipfile.ZipInfo) -> int:
    handle.seek(info.header_offset)  # type: ignore[attr-defined]
    header = handle.read(_LOCAL_HEADER.size)  # type: ignore[attr-defined]
    if len(header) != _LOCAL_HEADER.size:
        raise Rejected(RULE_CORRUPT, info.filename, "local header beyond the end of the file")
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != b"PK\x03\x04":
        raise Rejected(RULE_LOCAL_HEADER, info.filename, "no local header signature")
    name_length, extra_length = fields[9], fields[10]
    raw_name = handle.read(name_length)  # type: ignore[attr-defined]
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    if raw_name.decode(encoding, "replace") != info.orig_filename:
        raise Rejected(RULE_LOCAL_HEADER, info.filename, "names differ")
    return info.header_offset + _LOCAL_HEADER.size + name_length + extra_length


def iter_member(path: Path, info: zipfile.ZipInfo, chunk: int = CHUNK) -> Iterator[bytes]:
    """The member's uncompressed bytes in chunks of at most ``chunk`` bytes.

    Raises:
        Rejected: on a corrupt, truncated or mismatching member (checked as it is read;
            the last chunk is only yielded after the CRC and size are checked).
    """
    from isal import isal_zlib

    with open(path, "rb") as handle:
        handle.seek(_data_offset(handle, info))
        remaining = info.compress_size
        inflater = isal_zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED \
            else None
        crc, size, pending = 0, 0, b""
        while remaining > 0 or (inflater is not None and inflater.unconsumed_tail):
            if inflater is not None and inflater.unconsumed_tail:
                raw = inflater.unconsumed_tail
            else:
                raw = handle.read(min(chunk, remaining))
                if not raw:
                    raise Rejected(RULE_CORRUPT, info.filename, "archive ends inside the member")
                remaining -= len(raw)
            try:
                data = inflater.decompress(raw, chunk) if inflater is not None else raw
            except Exception as exc:  # isal_zlib.error: a corrupt deflate stream
                raise Rejected(RULE_CORRUPT, info.filename, str(exc)) from None
            size += len(data)
            if size > info.file_size:
                raise Rejected(RULE_CORRUPT, info.filename, "more data than declared")
            crc = isal_zlib.crc32(data, crc)
            if pending:
                yield pending
            pending = data
        if inflater is not None and not inflater.eof:
            raise Rejected(RULE_CORRUPT, info.filename, "deflate stream does not end")
        if size != info.file_size:
            raise Rejected(RULE_CORRUPT, info.filename, f"{size} bytes, {info.file_size} declared")
        if crc != info.CRC:
            raise Rejected(RULE_CRC, info.filename)
        if pending:
            yield pending


def digest(path: Path, info: zipfile.ZipInfo) -> Digest:
    """Size and MD5 of a member, streamed (verifies CRC and size too)."""
    md5 = hashlib.md5()
    size = 0
    for data in iter_member(path, info):
        md5.update(data)
        size += len(data)
    return Digest(size, md5.hexdigest())


def spool(path: Path, info: zipfile.ZipInfo, level: int | None, target: BinaryIO) -> Digest:
    """Stream the member into ``target`` in one pass: gzipped with isal at ``level``
    (deterministic: no name, mtime 0), or as it is when ``level`` is None; return the
    size and MD5 of its uncompressed bytes (verifying CRC and size as :func:`iter_member`).
    Memory: one chunk in, one chunk out.

    Raises:
        Rejected: on a corrupt, truncated or mismatching member.
    """
    from isal import isal_zlib

    compressor = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31) if level is not None \
        else None
    md5 = hashlib.md5()
    size = 0
    for data in iter_member(path, info):
        md5.update(data)
        size += len(data)
        target.write(compressor.compress(data) if compressor is not None else data)
    if compressor is not None:
        target.write(compressor.flush())
    return Digest(size, md5.hexdigest())


def gzipped(path: Path, info: zipfile.ZipInfo, level: int) -> bytes:
    """The member gzip-compressed with isal, in memory (the benchmark's compute limit)."""
    buffer = io.BytesIO()
    spool(path, info, level, buffer)
    return buffer.getvalue()
