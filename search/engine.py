"""The search: the seed's suggester algorithm, improved where measured
(``bench/bench_search_quality.py``; ``docs/search.md`` has the numbers).

1. The query is split like the names (``Xul.PDB`` -> ``xul pdb``).
2. One round trip of term suggestions for every part on the name field;
   options with score >= 0.6 are kept. Unlike the seed, the suggester also
   corrects parts that exist in the index (``suggest_mode: always``) and typos
   in the first letter (``prefix_length: 0``), and corrections of several
   parts are combined (the seed replaced one word at a time, so a typo in two
   parts never matched). A query that looks like an id (8-64 hex digits)
   skips this and the fallbacks of step 4: no name has such a part.
3. The search terms: the original first (score 1.1, as in the seed), then the
   alternatives by score. One round trip of a boosted OR of ``match_phrase``
   per term, the name field boosted 2x over the code-file field, plus a
   ``term`` on the joined name (separators removed); when the query looks
   like one, an exact, case-insensitive debug-id/code-id match.
4. Only when that finds nothing (where the seed retried with ``match``):
   suggestions for the query without separators on the joined-name field (a
   typo on a separator: ``xul3pdb`` -> ``xulpdb``); the search terms again with
   those; and only if that finds nothing too (or there were none), the terms
   plus, below them, a fuzzy ``match`` of every part of the original (for what
   the suggester cannot propose) and the seed's ``match`` of any word.
   Suggestion requests ask for ``match_none``: suggestions do not depend on
   the query, and the implicit ``match_all`` cost more than the suggester.
"""

from __future__ import annotations

import heapq
import os
import unicodedata
from dataclasses import dataclass
from typing import Any

from .errors import BadQuery, SearchError, SearchUnavailable
from .names import looks_like_id, name_parts

__all__ = [
    "BadQuery",
    "Hit",
    "SearchError",
    "SearchResult",
    "SearchUnavailable",
    "Searcher",
    "search",
]

NAME_FIELD = "name_parts"
OTHER_FIELD = "code_parts"
JOINED_FIELD = "name_joined"
ORIGINAL_SCORE = 1.1  # the seed's arbitrary score of what the user typed
MIN_SCORE = 0.6
MAX_TERMS = 8  # search terms in the OR query, the original included
PER_PART = 3  # alternatives kept per query part
NAME_BOOST = 2.0  # name fields over the code-file field (the seed's title/text)
# The fallbacks rank below any search term: every part fuzzily, then any word.
FUZZY_BOOST = 0.2
MATCH_BOOST = 0.05
ID_BOOST = 100.0
ID_PREFIX_BOOST = 50.0
TOTAL_LIMIT = 10000  # "total" is exact up to this, then this (at least)
MAX_QUERY_LENGTH = 200
MAX_SIZE = 100
SOURCE_FIELDS = ["debug_file", "debug_id", "filename", "code_file", "code_id"]
# Responses carry only what is read (less JSON to encode and parse per request).
SEARCH_FILTER = "hits.total.value,hits.hits._score,hits.hits._source,hits.hits.matched_queries"
SUGGEST = {
    "suggest_mode": "always",
    "prefix_length": 0,
    "min_word_length": 3,
    "max_edits": 2,
    "size": 5,
}


@dataclass(frozen=True)
class Hit:
    """One symbol file found; ``matched`` is the search term that found it."""

    debug_file: str
    debug_id: str
    filename: str
    code_file: str | None
    code_id: str | None
    score: float
    matched: str


@dataclass(frozen=True)
class SearchResult:
    """The hits, best first, with the search terms ``[(score, term), ...]`` used;
    ``total`` is exact up to 10,000 (then 10,000: at least that many)."""

    query: str
    terms: list[tuple[float, str]]
    total: int
    hits: list[Hit]


def check_query(query: str, size: int) -> str:
    """The stripped query.

    Raises:
        BadQuery: empty, over 200 characters, or ``size`` outside 1..100.
    """
    text = query.strip()
    if not text:
        raise BadQuery("the query is empty")
    # The limit counts what Elasticsearch is sent: the name's words are NFC-normalised
    # (names.name_parts), and one character may become three (U+FB2C: 170 of them made a
    # 510-character word whose fuzzy automaton Elasticsearch refused, a 500 and 15 KB of log).
    if len(query) > MAX_QUERY_LENGTH or (
        not query.isascii() and len(unicodedata.normalize("NFC", query)) > MAX_QUERY_LENGTH
    ):
        raise BadQuery(
            f"the query is longer than {MAX_QUERY_LENGTH} characters (after Unicode normalisation)"
        )
    if not 1 <= size <= MAX_SIZE:
        raise BadQuery(f"size must be between 1 and {MAX_SIZE}")
    return text


def alternatives(suggest: dict[str, Any]) -> dict[str, list[tuple[float, str]]]:
    """Per suggested text, its corrections with score >= 0.6, best first
    (the suggestions of several fields merged)."""
    found: dict[str, dict[str, float]] = {}
    for entries in suggest.values():
        for entry in entries:
            options = found.setdefault(entry["text"], {})
            for option in entry["options"]:
                if option["score"] >= MIN_SCORE and option["text"] != entry["text"]:
                    options[option["text"]] = max(option["score"], options.get(option["text"], 0))
    return {
        text: sorted(((s, t) for t, s in opts.items()), reverse=True)[:PER_PART]
        for text, opts in found.items()
    }


def search_terms(
    parts: list[str],
    alts: dict[str, list[tuple[float, str]]],
    joined: tuple[tuple[float, str], ...] | list[tuple[float, str]] = (),
) -> list[tuple[float, str]]:
    """The original phrase first, then the best alternatives by score.

    Phrase alternatives combine the corrections of the parts; a combination's
    score is the product of its corrections' scores (an unchanged part counts
    1), so one correction outranks two. ``joined`` are corrections of the
    whole query without separators (``xul3pdb`` -> ``xulpdb``).
    """
    beam: list[tuple[float, list[str]]] = [(1.0, [])]
    for part in parts:
        choices = [(1.0, part), *alts.get(part, [])]
        beam = heapq.nlargest(
            MAX_TERMS,
            ((score * s, words + [word]) for score, words in beam for s, word in choices),
            key=lambda item: item[0],
        )
    original = " ".join(parts)
    # one term per joined form; a phrase reads better than its joined twin
    best: dict[str, tuple[float, str]] = {}
    for score, term in [(score, " ".join(words)) for score, words in beam] + list(joined):
        key = term.replace(" ", "")
        if key in best:
            score = max(score, best[key][0])
            term = term if " " in term else best[key][1]
        best[key] = (score, term)
    best.pop(original.replace(" ", ""), None)
    ranked = sorted(best.values(), key=lambda item: -item[0])[: MAX_TERMS - 1]
    return [(ORIGINAL_SCORE, original)] + [(round(score, 4), term) for score, term in ranked]


def build_query(text: str, terms: list[tuple[float, str]]) -> dict[str, Any]:
    """The boosted OR: per term, ``match_phrase`` on both fields (boosts fall
    with the term's rank and score); then the fallbacks and the id match."""
    should: list[dict[str, Any]] = []
    for rank, (score, term) in enumerate(terms):
        boost = (len(terms) - rank) * score
        should.append(
            {
                "match_phrase": {
                    NAME_FIELD: {
                        "query": term,
                        "boost": NAME_BOOST * boost,
                        "_name": f"term:{rank}:name",
                    }
                }
            }
        )
        should.append(
            {
                "match_phrase": {
                    OTHER_FIELD: {"query": term, "boost": boost, "_name": f"term:{rank}:code"}
                }
            }
        )
        should.append(
            {
                "term": {
                    JOINED_FIELD: {
                        "value": term.replace(" ", ""),
                        "boost": NAME_BOOST * boost,
                        "_name": f"term:{rank}:joined",
                    }
                }
            }
        )
    if looks_like_id(text):
        for field in ("debug_id", "code_id"):
            should.append({"term": {field: {"value": text, "boost": ID_BOOST, "_name": field}}})
            # a partial id (the start of one, as copied from a crash report); the
            # keyword's normalizer lower-cases the prefix too. Constant score,
            # below an exact match: 8 hex digits are rarely shared, so the
            # expansion is a handful of terms.
            should.append(
                {
                    "prefix": {
                        field: {"value": text, "boost": ID_PREFIX_BOOST, "_name": f"{field}_prefix"}
                    }
                }
            )
    return {"bool": {"should": should}}


def build_fallback(terms: list[tuple[float, str]]) -> dict[str, Any]:
    """The fallbacks, for when the search terms found nothing: every part of
    the original within AUTO fuzziness (Lucene's spell checker behind the term
    suggester needs the first letter right for a second edit; a fuzzy query
    does not), then the seed's ``match`` of any word. Not in the first search
    request: on a large index, fuzzy expansion and a disjunction over words
    like ``pdb`` or ``so`` cost more than all the rest of the search."""
    words = " ".join(dict.fromkeys(word for _, term in terms for word in term.split()))
    return {
        "bool": {
            "should": [
                {
                    "match": {
                        NAME_FIELD: {
                            "query": terms[0][1],
                            "fuzziness": "AUTO",
                            "operator": "and",
                            "boost": FUZZY_BOOST,
                            "_name": "fuzzy",
                        }
                    }
                },
                {"match": {NAME_FIELD: {"query": words, "boost": MATCH_BOOST, "_name": "match"}}},
            ]
        }
    }


def matched_term(names: list[str], text: str, terms: list[tuple[float, str]]) -> str:
    """The best-ranked search term among a hit's matched queries (names must
    be unique in a request: Elasticsearch keeps one query per name)."""
    ranks = sorted(int(name.split(":")[1]) for name in names if name.startswith("term:"))
    if ranks:
        return terms[ranks[0]][1]
    if "debug_id" in names or "code_id" in names:
        return text
    if "debug_id_prefix" in names or "code_id_prefix" in names:
        return f"{text}*"
    if "fuzzy" in names:
        return f"fuzzy: {terms[0][1]}"
    return f"any of: {terms[0][1]}"


class Searcher:
    """Searches one index or alias with one Elasticsearch client (thread-safe)."""

    def __init__(self, es: Any = None, index: str | None = None) -> None:
        from .client import make_es_client

        self.es = es if es is not None else make_es_client(request_timeout=10)
        self.index = index or os.environ.get("SEARCH_ALIAS", "symbols")

    def search(self, query: str, size: int = 10) -> SearchResult:
        """Search for ``query``; at most ``size`` hits.

        Raises:
            BadQuery: see :func:`check_query`.
            SearchUnavailable: Elasticsearch unreachable, or the index missing.
        """
        text = check_query(query, size)
        parts = name_parts(text)
        if not parts:
            return SearchResult(text, [], 0, [])
        try:
            alts = {} if looks_like_id(text) else self._alternatives(parts)
            terms = search_terms(parts, alts)
            response = self._search(build_query(text, terms), size)
            if not response["hits"].get("hits") and not looks_like_id(text):
                terms, response = self._second_chance(text, parts, alts, size)
        except Exception as exc:  # noqa: BLE001 - only transport errors are translated
            raise _translated(exc, self.index) from None
        return self._result(text, terms, response)

    def _alternatives(self, parts: list[str]) -> dict[str, list[tuple[float, str]]]:
        """The corrections of ``parts`` (one round trip). Not asked for a query
        that looks like an id: 8-64 hex digits are no word of a name, and the
        suggester's automata for a 33-character part cost more than the rest
        of the search (4-5 ms of Elasticsearch time on 1M documents)."""
        return alternatives(
            self._suggest(
                {"name": {"text": " ".join(parts), "term": {"field": NAME_FIELD, **SUGGEST}}}
            )
        )

    def _second_chance(
        self, text: str, parts: list[str], alts: dict[str, list[tuple[float, str]]], size: int
    ) -> tuple[list[tuple[float, str]], Any]:
        """When the terms found nothing: corrections of the whole query without
        separators, searched alone, then (if still nothing) with the fallbacks;
        two or three more round trips."""
        joined = "".join(parts)
        found = alternatives(
            self._suggest({"joined": {"text": joined, "term": {"field": JOINED_FIELD, **SUGGEST}}})
        ).get(joined, [])
        terms = search_terms(parts, alts, found)
        query = build_query(text, terms)
        if found:
            # Most of these queries are found by a joined correction; the fuzzy
            # fallback costs 10-20 ms of Elasticsearch time, so it waits until
            # the corrections alone have found nothing.
            response = self._search(query, size)
            if response["hits"].get("hits"):
                return terms, response
        query["bool"]["should"] += build_fallback(terms)["bool"]["should"]
        return terms, self._search(query, size)

    def _search(self, query: dict[str, Any], size: int) -> Any:
        # totals are exact up to TOTAL_LIMIT: counting every document holding
        # ``so`` or ``pdb`` (the any-word fallback) costs more than the search
        return self.es.search(
            index=self.index,
            query=query,
            size=size,
            source_includes=SOURCE_FIELDS,
            track_total_hits=TOTAL_LIMIT,
            filter_path=SEARCH_FILTER,
        )

    def _suggest(self, suggest: dict[str, Any]) -> dict[str, Any]:
        # match_none: term suggestions do not depend on the query, and without one
        # Elasticsearch ran match_all over every document first (no hits asked for):
        # 2.8-4.0 ms of its CPU per request instead of 1.2-1.5 ms on 1M documents
        # (10 segments). As a size-0 request it is served from Elasticsearch's shard
        # request cache when the same text comes again before the next refresh
        # (checked 2026-11-23 with _stats/request_cache): the first asker pays that.
        return dict(
            self.es.search(
                index=self.index,
                size=0,
                suggest=suggest,
                query={"match_none": {}},
                track_total_hits=False,
                filter_path="suggest",
            )["suggest"]
        )

    @staticmethod
    def _result(text: str, terms: list[tuple[float, str]], response: Any) -> SearchResult:
        hits = []
        for hit in response["hits"].get("hits", []):
            source = hit["_source"]
            hits.append(
                Hit(
                    debug_file=source["debug_file"],
                    debug_id=source["debug_id"],
                    filename=source["filename"],
                    code_file=source.get("code_file"),
                    code_id=source.get("code_id"),
                    score=float(hit["_score"]),
                    matched=matched_term(hit.get("matched_queries", []), text, terms),
                )
            )
        return SearchResult(text, terms, int(response["hits"]["total"]["value"]), hits)


def _translated(exc: Exception, index: str) -> Exception:
    """Transport errors and a missing index become :class:`SearchUnavailable`."""
    from elasticsearch import ApiError, NotFoundError, TransportError

    if isinstance(exc, NotFoundError):
        return SearchUnavailable(index, "the index does not exist (not built yet?)")
    if isinstance(exc, ApiError) and _refused_as_too_complex(exc):
        return BadQuery("a word of the query is too complex to search with typos (shorten it)")
    if isinstance(exc, TransportError):
        return SearchUnavailable(index, f"Elasticsearch unreachable: {type(exc).__name__}")
    if isinstance(exc, ApiError) and exc.meta.status >= 500:
        return SearchUnavailable(index, f"Elasticsearch error {exc.meta.status}")
    return exc


#: Elasticsearch's errors for a query it cannot take (not for Elasticsearch being unwell).
TOO_COMPLEX = ("too_complex_to_determinize_exception", "fuzzy_terms_exception")


def _refused_as_too_complex(exc: Any) -> bool:
    """Whether Elasticsearch refused the query itself: a word whose fuzzy automaton is too
    big. Elasticsearch answers 500 for it, which is no outage: the client asked too much."""
    text = str(getattr(exc, "body", "") or "")
    return any(kind in text for kind in TOO_COMPLEX)


_default: Searcher | None = None


def search(query: str, size: int = 10) -> SearchResult:
    """Search the default alias (``$SEARCH_ALIAS``, else ``symbols``) at ``$ES_URL``.

    Raises:
        BadQuery, SearchUnavailable: see :meth:`Searcher.search`.
    """
    global _default
    if _default is None:
        _default = Searcher()
    return _default.search(query, size)
