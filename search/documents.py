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

from typing import Any, NamedTuple

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


def index_body(shards: int = 1, replicas: int = 0, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Settings and mappings of a new, versioned index, for a bulk load;
    ``meta`` becomes the mapping's ``_meta`` (what the index was built from)."""
    from elasticsearch.dsl import Index

    index = Index("unused")
    index.document(SymbolDoc)
    # no refreshes and no fsync per bulk request while loading: a build that
    # dies is thrown away anyway; search.indexer restores both before the swap
    index.settings(number_of_shards=shards, number_of_replicas=replicas, refresh_interval="-1",
                   translog={"durability": "async"})
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
    def from_row(cls, row: tuple) -> "SymbolRow":
        return cls._make(row)

    @property
    def doc_id(self) -> str:
        return f"{self.debug_file}/{self.debug_id}/{self.filename or symbol_filename(self.debug_file)}"

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
