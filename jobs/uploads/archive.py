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
# gzip member header: magic, deflate, no flags, mtime 0, no extra flags, OS unknown (as isal
# writes it with wbits 31)
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

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


def _chunks(path: Path, info: zipfile.ZipInfo, chunk: int) -> Iterator[tuple[bytes, bytes]]:
    """The member as pairs (compressed bytes newly read from the archive, uncompressed bytes),
    in order. The checks at the end (size, CRC, the deflate stream ending exactly where the
    member's data does) run before the iteration stops.

    Raises:
        Rejected: on a corrupt, truncated or mismatching member.
    """
    from isal import igzip_lib, isal_zlib

    with open(path, "rb") as handle:
        handle.seek(_data_offset(handle, info))
        remaining = info.compress_size
        # IgzipDecompressor, not isal_zlib.decompressobj: the latter does not report up to
        # 7 bytes after the stream's end in unused_data (python-isal 1.8)
        inflater = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_DEFLATE, hist_bits=15) \
            if info.compress_type == zipfile.ZIP_DEFLATED else None
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
    """Size and MD5 of a member, streamed (verifies CRC and size too)."""
    md5 = hashlib.md5()
    size = 0
    for data in iter_member(path, info):
        md5.update(data)
        size += len(data)
    return Digest(size, md5.hexdigest())


def spool(path: Path, info: zipfile.ZipInfo, level: int | None, target: BinaryIO,
          reuse: bool = True) -> Digest:
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
    if level is not None and reuse and info.compress_type == zipfile.ZIP_DEFLATED:
        target.write(GZIP_HEADER)
        for raw, data in _chunks(path, info, CHUNK):
            target.write(raw)
            md5.update(data)
            size += len(data)
        target.write(struct.pack("<II", info.CRC, size & 0xFFFFFFFF))
        return Digest(size, md5.hexdigest())
    from isal import isal_zlib

    compressor = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31) if level is not None \
        else None
    for data in iter_member(path, info):
        md5.update(data)
        size += len(data)
        target.write(compressor.compress(data) if compressor is not None else data)
    if compressor is not None:
        target.write(compressor.flush())
    return Digest(size, md5.hexdigest())


def gzipped(path: Path, info: zipfile.ZipInfo, level: int, reuse: bool = True) -> bytes:
    """The member gzipped as :func:`spool` does, in memory (for the benchmark; ``reuse``
    False: inflated and deflated with isal, the compute limit)."""
    buffer = io.BytesIO()
    spool(path, info, level, buffer, reuse)
    return buffer.getvalue()
