"""The index's explicit mapping (an elasticsearch-dsl ``Document``) and the
mapping of a source row to a document.

One document per distinct symbol file. ``name_parts`` holds the client-split
parts of the debug file and of the file name (two values: a phrase never spans
them); ``code_parts`` those of the code file. Both use the built-in
``standard`` analyzer, which leaves client-split parts as they are, so the
term suggester works per word on any Elasticsearch 8. ``name_joined`` holds
the parts joined (``xul.pdb`` -> ``xulpdb``) as one term (``keyword``
analyzer), so a typo on a separator (``xulpdb``, ``xul3pdb``) is one edit
away from a term the suggester knows. Ids are keywords with a
lower-case normalizer: exact, case-insensitive matches.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Iterable, Iterator, NamedTuple

from elasticsearch.dsl import Date, Document, Keyword, Long, MetaField, Text, normalizer

from .names import joined_name, split_name, symbol_filename

DERIVED_FIELDS = ["name_parts", "code_parts", "name_joined"]
lowercase_id = normalizer("lowercase_id", filter=["lowercase"])


class SymbolDoc(Document):
    """A symbol file as the search sees it.

    Nothing sorts or aggregates on the keywords, so they have no doc values;
    the derived search fields are indexed but not stored in ``_source``. Both
    make the bulk load cheaper (``bench/bench_search_rebuild.py``)."""

    debug_file = Keyword(doc_values=False)
    debug_id = Keyword(normalizer=lowercase_id, doc_values=False)
    filename = Keyword(doc_values=False)
    code_file = Keyword(doc_values=False)
    code_id = Keyword(normalizer=lowercase_id, doc_values=False)
    size = Long()
    last_uploaded = Date()
    missing_count = Long()
    name_parts = Text(analyzer="standard")
    code_parts = Text(analyzer="standard")
    name_joined = Text(analyzer="keyword", index_options="docs", norms=False)

    class Meta:
        dynamic = MetaField("strict")
        source = MetaField(excludes=DERIVED_FIELDS)


def index_body(
    shards: int = 1, replicas: int = 0, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Settings and mappings of a new, versioned index, for a bulk load;
    ``meta`` becomes the mapping's ``_meta`` (what the index was built from)."""
    from elasticsearch.dsl import Index

    index = Index("unused")
    index.document(SymbolDoc)
    # no refreshes and no fsync per bulk request while loading: a build that
    # dies is thrown away anyway; search.indexer restores both before the swap
    index.settings(
        number_of_shards=shards,
        number_of_replicas=replicas,
        refresh_interval="-1",
        translog={"durability": "async"},
    )
    body = index.to_dict()
    mappings = dict(body["mappings"], **({"_meta": meta} if meta else {}))
    return {"settings": body["settings"], "mappings": mappings}


class SymbolRow(NamedTuple):
    """One row of ``sql/jobs/search_index.sql``'s ``symbol_files`` query (a named
    tuple: a million of them are made per rebuild, and a tuple is the cheapest
    immutable record). ``last_uploaded`` is ISO 8601 text, formatted by the query."""

    debug_file: str
    debug_id: str
    filename: str | None
    code_file: str | None
    code_id: str | None
    size: int | None
    last_uploaded: str | None
    missing_count: int | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> "SymbolRow":
        return cls._make(row)

    @property
    def doc_id(self) -> str:
        return (
            f"{self.debug_file}/{self.debug_id}/{self.filename or symbol_filename(self.debug_file)}"
        )

    def to_source(self) -> dict[str, Any]:
        """The document body (a plain dict: building a DSL object per row costs
        more than the bulk load itself)."""
        filename = self.filename or symbol_filename(self.debug_file)
        return {
            "debug_file": self.debug_file,
            "debug_id": self.debug_id,
            "filename": filename,
            "code_file": self.code_file,
            "code_id": self.code_id,
            "size": self.size,
            "last_uploaded": self.last_uploaded,
            "missing_count": self.missing_count,
            "name_parts": [split_name(self.debug_file), split_name(filename)],
            "code_parts": split_name(self.code_file) if self.code_file else None,
            "name_joined": [joined_name(self.debug_file), joined_name(filename)],
        }


# The bulk lines of a document, as ``to_source()`` and ``json.dumps(...,
# ensure_ascii=False, separators=(",", ":"))`` would write them, field for field
# (tests/unit/test_search_documents.py checks they agree).
_LINES = (
    '{"index":{"_id":%s}}\n{"debug_file":%s,"debug_id":%s,"filename":%s,"code_file":%s,'
    '"code_id":%s,"size":%s,"last_uploaded":%s,"missing_count":%s,"name_parts":[%s,%s],'
    '"code_parts":%s,"name_joined":[%s,%s]}\n'
)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_quoted = json.encoder.encode_basestring  # a str as JSON (C)
NAMES_CACHED = 65536  # names per load whose JSON is kept (a name recurs once per debug id)


def _value(value: Any) -> str:
    """Any value as JSON (the text, numbers and nulls of a row); the loop below
    tests the common types inline, a call costing more than the test."""
    if value is None:
        return "null"
    return _quoted(value) if type(value) is str else _ENCODER.encode(value)


def bulk_lines(rows: Iterable[SymbolRow]) -> Iterator[str]:
    """Each row as its bulk ``index`` action line (the document id) and its document
    line, NDJSON text: the same bytes as ``doc_id`` and ``to_source()`` encoded
    compactly, without building either. A name's JSON (its text, parts and joined
    parts) is built once per load, not once per debug id; rows may be plain tuples in
    ``SymbolRow``'s order."""
    names: dict[str, tuple[str, str, str]] = {}

    def name(text: str) -> tuple[str, str, str]:
        if len(names) >= NAMES_CACHED:
            names.clear()
        found = names[text] = (_quoted(text), _quoted(split_name(text)), _quoted(joined_name(text)))
        return found

    for debug_file, debug_id, filename, code_file, code_id, size, last_uploaded, missing in rows:
        filename = filename or symbol_filename(debug_file)
        file_json, file_parts, file_joined = names.get(debug_file) or name(debug_file)
        sym_json, sym_parts, sym_joined = names.get(filename) or name(filename)
        yield _LINES % (
            _quoted(f"{debug_file}/{debug_id}/{filename}"),
            file_json,
            _quoted(debug_id) if type(debug_id) is str else _value(debug_id),
            sym_json,
            "null" if code_file is None else _value(code_file),
            "null" if code_id is None else _value(code_id),
            size if type(size) is int else _value(size),
            _quoted(last_uploaded) if type(last_uploaded) is str else _value(last_uploaded),
            "null" if missing is None else missing if type(missing) is int else _value(missing),
            file_parts,
            sym_parts,
            _quoted(split_name(code_file)) if code_file else "null",
            file_joined,
            sym_joined,
        )


def bulk_bodies(rows: Iterable[SymbolRow], chunk_size: int) -> Iterator[tuple[int, bytes]]:
    """``rows`` as bulk request bodies of up to ``chunk_size`` documents each (the
    index is the request's), with their document counts: each body is encoded once,
    as one string, and posted as it is."""
    lines = bulk_lines(rows)
    while chunk := list(itertools.islice(lines, chunk_size)):
        yield len(chunk), "".join(chunk).encode()
