"""Stream a member's bytes out of a zip file on disk (nothing is extracted).

Our own reader instead of ``ZipFile.open``: it inflates with isal (about twice
the standard library's speed on .sym text, see docs/jobs/uploads.md), checks that
the local header agrees with the central directory, and checks size and CRC at the
end (a corrupt or truncated member raises :class:`Rejected`). Each call opens its
own file handle, so threads can read members concurrently.

The central directory decides what a member is (validated by
:mod:`jobs.uploads.validation`); a local header that says otherwise would make
another reader (``unzip`` in streaming mode, Tecken's ``extractall``) see other bytes,
so it is rejected: another name, method, CRC or size (in the ZIP64 extra field when
the header's sizes are 0xFFFFFFFF), refused flags (encryption, patch data), a
different data-descriptor or UTF-8 bit. With a data descriptor (flag bit 3) the
local CRC and sizes may be zero; the descriptor after the data must then agree.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from .errors import Rejected
from .records import Digest
from .symheader import HEAD_BYTES
from .validation import FLAG_DESCRIPTOR, FLAG_UTF8, check_flags, raw_name

CHUNK = 1024 * 1024
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")
# gzip member header: magic, deflate, no flags, mtime 0, no extra flags, OS unknown (as isal
# writes it with wbits 31)
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

RULE_CORRUPT = "corrupt or truncated data"
RULE_CRC = "CRC-32 mismatch (corrupt member)"
RULE_LOCAL_HEADER = "local header does not match the central directory"
RULE_DESCRIPTOR = "data descriptor does not match the central directory"
_ZIP64_EXTRA = 0x0001  # ZIP64 extended information extra field (APPNOTE 4.5.3)
_UNKNOWN = 0xFFFFFFFF  # a local size field whose value is in the ZIP64 extra field


def _zip64_extra(extra: bytes) -> bytes | None:
    """The data of the ZIP64 extra field among a header's extra fields, if any."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == _ZIP64_EXTRA:
            return extra[at + 4 : at + 4 + length]
        at += 4 + length
    return None


def _data_offset(handle: BinaryIO, info: zipfile.ZipInfo) -> tuple[int, bool]:
    """Where the member's data starts, after checking its local header against the central
    directory; and whether the local header has a ZIP64 extra field (its data descriptor,
    if any, then has 8-byte sizes: 4.3.9.2)."""
    handle.seek(info.header_offset)
    header = handle.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        raise Rejected(RULE_CORRUPT, info.filename, "local header beyond the end of the file")
    signature, _, flags, method, _, _, crc, csize, usize, name_length, extra_length = (
        _LOCAL_HEADER.unpack(header)
    )
    if signature != b"PK\x03\x04":
        raise Rejected(RULE_LOCAL_HEADER, info.filename, "no local header signature")
    if handle.read(name_length) != raw_name(info):
        raise Rejected(RULE_LOCAL_HEADER, info.filename, "names differ")
    check_flags(info.filename, flags)  # what the central directory's flags were checked for
    if (flags ^ info.flag_bits) & (FLAG_DESCRIPTOR | FLAG_UTF8):
        raise Rejected(
            RULE_LOCAL_HEADER, info.filename, f"flags differ: {flags:#06x} vs {info.flag_bits:#06x}"
        )
    if method != info.compress_type:
        raise Rejected(
            RULE_LOCAL_HEADER,
            info.filename,
            f"compression methods differ: {method} vs {info.compress_type}",
        )
    zip64 = _zip64_extra(handle.read(extra_length))
    if _UNKNOWN in (csize, usize):
        if zip64 is None or len(zip64) < 16:  # both sizes, always, in a local header (4.5.3)
            raise Rejected(
                RULE_LOCAL_HEADER, info.filename, "sizes of 0xFFFFFFFF without a ZIP64 extra field"
            )
        usize, csize = struct.unpack_from("<QQ", zip64)
    local, central = (crc, csize, usize), (info.CRC, info.compress_size, info.file_size)
    # with a data descriptor the local values are zero (4.4.4); some writers fill them in
    if any(
        value != expected and not (flags & FLAG_DESCRIPTOR and value == 0)
        for value, expected in zip(local, central)
    ):
        raise Rejected(RULE_LOCAL_HEADER, info.filename, f"CRC-32 and sizes {local} vs {central}")
    return info.header_offset + _LOCAL_HEADER.size + name_length + extra_length, zip64 is not None


def _check_descriptor(handle: BinaryIO, info: zipfile.ZipInfo, zip64: bool) -> None:
    """The data descriptor right after the data (its signature is optional: 4.3.9.3) must
    repeat the central directory's CRC-32 and sizes."""
    layout = struct.Struct("<LQQ" if zip64 else "<LLL")
    raw = handle.read(4 + layout.size)  # (without a signature: 4 bytes of the next record)
    if raw[:4] == b"PK\x07\x08":
        raw = raw[4:]
    found = layout.unpack_from(raw) if len(raw) >= layout.size else None
    if found != (info.CRC, info.compress_size, info.file_size):
        raise Rejected(
            RULE_DESCRIPTOR,
            info.filename,
            f"{found} vs {(info.CRC, info.compress_size, info.file_size)}",
        )


def _chunks(path: Path, info: zipfile.ZipInfo, chunk: int) -> Iterator[tuple[bytes, bytes]]:
    """The member as pairs (compressed bytes newly read from the archive, uncompressed bytes),
    in order. The checks at the end (size, CRC, the deflate stream ending exactly where the
    member's data does, the data descriptor) run before the iteration stops.

    Raises:
        Rejected: on a corrupt, truncated or mismatching member.
    """
    from isal import igzip_lib, isal_zlib

    with open(path, "rb") as handle:
        start, zip64 = _data_offset(handle, info)
        handle.seek(start)
        remaining = info.compress_size
        # IgzipDecompressor, not isal_zlib.decompressobj: the latter does not report up to
        # 7 bytes after the stream's end in unused_data (python-isal 1.8)
        inflater = (
            igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_DEFLATE, hist_bits=15)
            if info.compress_type == zipfile.ZIP_DEFLATED
            else None
        )
        crc, size = 0, 0
        while inflater is None or not inflater.eof:
            if inflater is None or inflater.needs_input:
                if remaining == 0:
                    break
                raw = handle.read(min(chunk, remaining))
                if not raw:
                    raise Rejected(RULE_CORRUPT, info.filename, "archive ends inside the member")
                remaining -= len(raw)
            else:
                raw = b""  # more output from input already given
            try:
                data = inflater.decompress(raw, chunk) if inflater is not None else raw
            except Exception as exc:  # isal's error: a corrupt deflate stream
                raise Rejected(RULE_CORRUPT, info.filename, str(exc)) from None
            size += len(data)
            if size > info.file_size:
                raise Rejected(RULE_CORRUPT, info.filename, "more data than declared")
            crc = isal_zlib.crc32(data, crc)
            yield raw, data
        _check_end(info, inflater, remaining, size, crc)
        if info.flag_bits & FLAG_DESCRIPTOR:
            _check_descriptor(handle, info, zip64)


def _check_end(info: zipfile.ZipInfo, inflater: Any, remaining: int, size: int, crc: int) -> None:
    """Check a member read to its end: its deflate stream (``inflater``, None when stored)
    ended, exactly where the member's data does (``remaining`` compressed bytes unread);
    ``size`` and ``crc`` of its data are the declared ones.

    Raises:
        Rejected: the first check that fails.
    """
    if inflater is not None and not inflater.eof:
        raise Rejected(RULE_CORRUPT, info.filename, "deflate stream does not end")
    if inflater is not None and (remaining or inflater.unused_data):
        # (those bytes would otherwise end up inside a reused gzip body, see spool())
        raise Rejected(RULE_CORRUPT, info.filename, "data after the end of the deflate stream")
    if size != info.file_size:
        raise Rejected(RULE_CORRUPT, info.filename, f"{size} bytes, {info.file_size} declared")
    if crc != info.CRC:
        raise Rejected(RULE_CRC, info.filename)


def iter_member(path: Path, info: zipfile.ZipInfo, chunk: int = CHUNK) -> Iterator[bytes]:
    """The member's uncompressed bytes in chunks of at most ``chunk`` bytes.

    Raises:
        Rejected: on a corrupt, truncated or mismatching member (checked as it is read;
            the last chunk is only yielded after the CRC and size are checked).
    """
    pending = b""
    for _, data in _chunks(path, info, chunk):
        if pending:
            yield pending
        pending = data
    if pending:
        yield pending


def digest(path: Path, info: zipfile.ZipInfo) -> Digest:
    """Size and MD5 of a member and its first bytes, streamed (verifies CRC and size too)."""
    md5 = hashlib.md5()
    size = 0
    head = b""
    for data in iter_member(path, info):
        md5.update(data)
        if size < HEAD_BYTES:
            head += data[: HEAD_BYTES - size]
        size += len(data)
    return Digest(size, md5.hexdigest(), head)


def spool(
    path: Path, info: zipfile.ZipInfo, level: int | None, target: BinaryIO, reuse: bool = True
) -> Digest:
    """Stream the member into ``target`` in one pass: gzipped (deterministic: no name, mtime
    0), or as it is when ``level`` is None; return the size and MD5 of its uncompressed
    bytes (verifying CRC and size as :func:`iter_member`). Memory: one chunk in, one out.

    A deflated member is not compressed again (``reuse``): its deflate stream, as read from
    the archive, becomes the gzip body between a gzip header and a trailer made of the CRC-32
    and size the pass has just verified (RFC 1952: the same raw deflate format), so it is
    only inflated, for the checks and the MD5. A stored member is deflated with isal at
    ``level``.

    Raises:
        Rejected: on a corrupt, truncated or mismatching member.
    """
    md5 = hashlib.md5()
    size = 0
    head = b""
    if level is not None and reuse and info.compress_type == zipfile.ZIP_DEFLATED:
        target.write(GZIP_HEADER)
        for raw, data in _chunks(path, info, CHUNK):
            target.write(raw)
            md5.update(data)
            if size < HEAD_BYTES:
                head += data[: HEAD_BYTES - size]
            size += len(data)
        target.write(struct.pack("<II", info.CRC, size & 0xFFFFFFFF))
        return Digest(size, md5.hexdigest(), head)
    from isal import isal_zlib

    compressor = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31) if level is not None else None
    for data in iter_member(path, info):
        md5.update(data)
        if size < HEAD_BYTES:
            head += data[: HEAD_BYTES - size]
        size += len(data)
        target.write(compressor.compress(data) if compressor is not None else data)
    if compressor is not None:
        target.write(compressor.flush())
    return Digest(size, md5.hexdigest(), head)


def gzipped(path: Path, info: zipfile.ZipInfo, level: int, reuse: bool = True) -> bytes:
    """The member gzipped as :func:`spool` does, in memory (for the benchmark; ``reuse``
    False: inflated and deflated with isal, the compute limit)."""
    buffer = io.BytesIO()
    spool(path, info, level, buffer, reuse)
    return buffer.getvalue()
