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

import datetime as dt
from dataclasses import dataclass
from typing import Any

from elasticsearch.dsl import Date, Document, Keyword, Long, MetaField, Text, normalizer

from .names import joined_name, split_name, symbol_filename

lowercase_id = normalizer("lowercase_id", filter=["lowercase"])


class SymbolDoc(Document):
    """A symbol file as the search sees it."""

    debug_file = Keyword()
    debug_id = Keyword(normalizer=lowercase_id)
    filename = Keyword()
    code_file = Keyword()
    code_id = Keyword(normalizer=lowercase_id)
    size = Long()
    last_uploaded = Date()
    missing_count = Long()
    name_parts = Text(analyzer="standard")
    code_parts = Text(analyzer="standard")
    name_joined = Text(analyzer="keyword", index_options="docs", norms=False)

    class Meta:
        dynamic = MetaField("strict")


def index_body(shards: int = 1, replicas: int = 0) -> dict[str, Any]:
    """Settings and mappings of a new, versioned index, for a bulk load
    (``refresh_interval`` -1; the rebuild restores it before the alias moves)."""
    from elasticsearch.dsl import Index

    index = Index("unused")
    index.document(SymbolDoc)
    index.settings(number_of_shards=shards, number_of_replicas=replicas, refresh_interval="-1")
    body = index.to_dict()
    return {"settings": body["settings"], "mappings": body["mappings"]}


@dataclass(frozen=True)
class SymbolRow:
    """One row of ``sql/search_index.sql``'s ``symbol_files`` query."""

    debug_file: str
    debug_id: str
    filename: str | None
    code_file: str | None
    code_id: str | None
    size: int | None
    last_uploaded: dt.datetime | None
    missing_count: int | None

    @classmethod
    def from_row(cls, row: tuple) -> "SymbolRow":
        return cls(*row)

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
            "last_uploaded": self.last_uploaded.isoformat() if self.last_uploaded else None,
            "missing_count": self.missing_count,
            "name_parts": [split_name(self.debug_file), split_name(filename)],
            "code_parts": split_name(self.code_file) if self.code_file else None,
            "name_joined": [joined_name(self.debug_file), joined_name(filename)],
        }
