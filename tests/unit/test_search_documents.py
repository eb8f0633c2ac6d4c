"""The bulk lines of a document are the document ``SymbolRow`` describes, byte for byte."""

import json

import pytest

from search import documents
from search.documents import SymbolRow, bulk_lines

ROWS = [
    SymbolRow(
        "xul.pdb",
        "44E4EC8C2F41492B9369D6B9A059577C2",
        "xul.sym",
        "xul.dll",
        "5F3A1B2C9000",
        1234,
        "2026-01-01T10:00:00.000000Z",
        7,
    ),
    SymbolRow(
        "libxul.so", "0F" * 16 + "0", "", None, None, None, None, None
    ),  # file name from the debug file
    SymbolRow("libxul.so.dbg", "A" * 33, None, "", "", 0, None, 0),
    SymbolRow(
        "XÜL.pdb",
        "B" * 33,
        "xu\u0308l.sym",
        'naïve "quoted"\\path.dll',
        "c0de",
        2**40,
        "2026-11-22T05:00:00.000001Z",
        1,
    ),
    SymbolRow("tab\there.pdb", "c" * 33, "new\nline.sym", "\u2028.dll", None, 5, "x", None),
    SymbolRow(
        "odd.pdb", "D" * 33, "odd.sym", None, None, "not a number", None, 3.5
    ),  # rejected by ES
    SymbolRow("bool.pdb", "E" * 33, "bool.sym", None, None, True, None, False),
]


def expected(row):
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    return (
        encoder.encode({"index": {"_id": row.doc_id}})
        + "\n"
        + encoder.encode(row.to_source())
        + "\n"
    )


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.debug_file)
def test_a_rows_bulk_lines_are_its_id_and_source_as_json(row):
    assert list(bulk_lines([row])) == [expected(row)]


def test_plain_tuples_and_repeated_names_give_the_same_lines(monkeypatch):
    monkeypatch.setattr(documents, "NAMES_CACHED", 3)  # the cache is emptied on the way
    rows = ROWS * 3
    assert list(bulk_lines(tuple(row) for row in rows)) == [expected(row) for row in rows]
