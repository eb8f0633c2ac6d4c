"""Spooling a member (pure file I/O): a deflated member's own deflate stream becomes the gzip
body; a stored one is deflated with isal; corruption is caught on the way either way."""

from __future__ import annotations

import gzip
import hashlib
import io
import struct
import zipfile
from pathlib import Path

import pytest

from jobs.uploads import archive
from jobs.uploads.errors import Rejected
from tests.fixtures.uploads_archives import sym_text, write_zip

TEXT = sym_text("a.pdb", "AB" * 16 + "1", 300_000, 3)


def _member(path: Path) -> tuple[zipfile.ZipInfo, bytes]:
    """The only member's info and its compressed bytes as stored in the archive."""
    with zipfile.ZipFile(path) as zipped:
        info = zipped.infolist()[0]
    data = path.read_bytes()
    name, extra = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name + extra
    return info, data[start : start + info.compress_size]


def test_a_deflated_member_is_gzipped_by_reusing_its_deflate_stream(tmp_path):
    path = write_zip(
        tmp_path / "a.zip", [("a.pdb/ABABABABABABABABABABABABABABABAB1/a.sym", TEXT)], level=9
    )
    info, raw = _member(path)
    out = io.BytesIO()
    digest = archive.spool(path, info, 1, out)
    body = out.getvalue()
    assert (digest.size, digest.md5) == (len(TEXT), hashlib.md5(TEXT).hexdigest())
    assert body[:10] == archive.GZIP_HEADER and body[10:-8] == raw  # not compressed again
    assert gzip.decompress(body) == TEXT  # a valid gzip member: CRC-32 and size trailer
    again = io.BytesIO()
    archive.spool(path, info, 1, again, reuse=False)  # the compute limit's way: isal deflate
    assert gzip.decompress(again.getvalue()) == TEXT and again.getvalue()[10:-8] != raw


def test_a_stored_member_is_deflated_with_isal(tmp_path):
    path = write_zip(
        tmp_path / "a.zip",
        [("a.pdb/ABABABABABABABABABABABABABABABAB1/a.sym", TEXT)],
        compression=zipfile.ZIP_STORED,
    )
    info, _ = _member(path)
    out = io.BytesIO()
    archive.spool(path, info, 1, out)
    assert gzip.decompress(out.getvalue()) == TEXT and len(out.getvalue()) < len(TEXT) / 2


@pytest.mark.parametrize("damage", ["flip", "trailing"])
def test_a_damaged_deflate_stream_is_rejected_while_spooling(tmp_path, damage):
    path = write_zip(tmp_path / "a.zip", [("a.pdb/ABABABABABABABABABABABABABABABAB1/a.sym", TEXT)])
    info, raw = _member(path)
    data = bytearray(path.read_bytes())
    start = data.find(raw)
    if damage == "flip":
        data[start + len(raw) // 2] ^= 0x55
    else:  # bytes after the deflate stream, inside the member's declared compressed size
        info.compress_size += 4
        data[start + len(raw) : start + len(raw)] = b"JUNK"
    path.write_bytes(bytes(data))
    with pytest.raises(Rejected) as rejected:
        archive.spool(path, info, 1, io.BytesIO())
    assert rejected.value.member == "a.pdb/ABABABABABABABABABABABABABABABAB1/a.sym"
