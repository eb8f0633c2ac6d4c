"""Search quality: recall@5 and precision on typos of a realistic corpus.

Corpus: ``tests.fixtures.search_corpus.corpus()`` (3,400 names: Windows
DLL/PDB, Linux .so, macOS dylibs and frameworks, Mozilla's libraries), one
document each, loaded by the real rebuild (``search.indexer``). Each round
draws a fresh typo set (another seed): 1,000 one-edit and 1,000 two-edit typos
(substitution, insertion, deletion, adjacent swap), ambiguous ones dropped
(``tests.fixtures.search_typos``), and 300 unambiguous names without their
last extension. recall@5: the target is among the first 5 hits. precision: of the
queries that returned anything, the share whose first hit is the target.

Ours (``search.engine``) against two baselines, side by side on the same
index and queries: the seed's algorithm as written (``SeedSearcher``: default
term suggester options, score >= 0.6, one word replaced at a time, boosted OR
of match_phrase, ``match`` if a multi-word phrase finds nothing; given the
client-split query, and, more generous than the seed's code, whose second
``suggest('sugg', ...)`` call overwrites the first, suggestions from both
fields), and a plain ``multi_match`` with ``fuzziness: AUTO``.
"""

from __future__ import annotations

import random
import statistics
from typing import Any, Callable

from .harness import Comparison, Sample

ROUNDS = 3
ALIAS = "bench-search-quality"
TYPOS_PER_SET = 1000


class SeedSearcher:
    """The seed's search ("A decent Elasticsearch search engine implementation"),
    with title -> ``name_parts`` and text -> ``code_parts``. Two round trips
    (three when the phrase finds nothing). ``search(q)`` returns debug files."""

    def __init__(self, es: Any, index: str) -> None:
        self.es = es
        self.index = index

    def terms(self, q: str) -> list[tuple[float, str]]:
        search_terms = [(1.1, q)]
        seen = {q}
        suggest: dict[str, Any] = {"text": q}
        for key in ("name_parts", "code_parts"):
            suggest[f"sugg_{key}"] = {"term": {"field": key}}
        response = self.es.search(index=self.index, size=0, suggest=suggest)
        for entries in response["suggest"].values():
            for each in entries:
                for option in each["options"]:
                    if option["score"] >= 0.6:
                        better = q.replace(each["text"], option["text"])
                        if better not in seen:
                            search_terms.append((option["score"], better))
                            seen.add(better)
        return sorted(search_terms, reverse=True)

    def query(self, search_terms: list[tuple[float, str]], strategy: str) -> dict[str, Any]:
        should = []
        for i, (score, word) in enumerate(search_terms):
            boost = 1 * (len(search_terms) - i) * score
            should.append({strategy: {"name_parts": {"query": word, "boost": 2 * boost}}})
            should.append({strategy: {"code_parts": {"query": word, "boost": boost}}})
        return {"bool": {"should": should}}

    def hits(self, text: str, size: int = 10) -> list[dict[str, Any]]:
        from search.names import split_name

        q = split_name(text)
        search_terms = self.terms(q)
        response = self.es.search(
            index=self.index, query=self.query(search_terms, "match_phrase"), size=size
        )
        if not response["hits"]["hits"] and " " in q:
            response = self.es.search(
                index=self.index, query=self.query(search_terms, "match"), size=size
            )
        return list(response["hits"]["hits"])

    def search(self, text: str, size: int = 10) -> list[str]:
        return [hit["_source"]["debug_file"] for hit in self.hits(text, size)]


class FuzzySearcher:
    """A plain ``multi_match`` with ``fuzziness: AUTO`` over the split query."""

    def __init__(self, es: Any, index: str) -> None:
        self.es = es
        self.index = index

    def search(self, text: str, size: int = 10) -> list[str]:
        from search.names import split_name

        response = self.es.search(
            index=self.index,
            size=size,
            query={
                "multi_match": {
                    "query": split_name(text),
                    "fields": ["name_parts^2", "code_parts"],
                    "fuzziness": "AUTO",
                }
            },
        )
        return [hit["_source"]["debug_file"] for hit in response["hits"]["hits"]]


def ours(es: Any, index: str) -> Callable[[str, int], list[str]]:
    from search.engine import Searcher

    searcher = Searcher(es, index)

    def search(text: str, size: int = 10) -> list[str]:
        return [hit.debug_file for hit in searcher.search(text, size).hits]

    return search


def build_index(es: Any, names: list[str]) -> str:
    from search.indexer import rebuild
    from tests.fixtures.search_data import symbol_rows

    rows = symbol_rows(names)
    return rebuild(es, ALIAS, rows, len(rows), keep=1).index


def score(search: Callable[..., list[str]], typos: list[Any]) -> tuple[float, float]:
    """(recall@5, precision) of ``search`` over ``typos``."""
    found = answered = first = 0
    for typo in typos:
        hits = search(typo.typo, 5)
        found += typo.target in hits
        answered += bool(hits)
        first += bool(hits) and hits[0] == typo.target
    return found / len(typos), first / max(answered, 1)


def typo_sets(names: list[str], seed: int) -> dict[str, list[Any]]:
    from tests.fixtures.search_typos import missing_extension, typos

    return {
        "one edit": typos(names, 1, TYPOS_PER_SET, seed),
        "two edits": typos(names, 2, TYPOS_PER_SET, seed),
        "missing extension": random.Random(seed).sample(missing_extension(names), 300),
    }


def run(rounds: int) -> list[Comparison]:
    from search.client import make_es_client
    from tests.fixtures.search_corpus import corpus

    es = make_es_client()
    names = corpus()
    index = build_index(es, names)
    engines: dict[str, Callable[[str, int], list[str]]] = {
        "ours": ours(es, index),
        "seed as written": SeedSearcher(es, index).search,
        "multi_match fuzziness AUTO": FuzzySearcher(es, index).search,
    }
    values: dict[tuple[str, str, str], list[float]] = {}
    sizes: dict[str, list[int]] = {}
    for round_ in range(rounds):
        for set_name, typos in typo_sets(names, seed=round_ + 1).items():
            sizes.setdefault(set_name, []).append(len(typos))
            for engine, search in engines.items():
                recall, precision = score(search, typos)
                values.setdefault((set_name, engine, "recall@5"), []).append(recall)
                values.setdefault((set_name, engine, "precision"), []).append(precision)
    return _comparisons(values, sizes, len(names))


GOALS = {("one edit", "recall@5"): "ours >= 0.99", ("two edits", "recall@5"): "ours >= 0.95"}


def _comparisons(
    values: dict[tuple[str, str, str], list[float]], sizes: dict[str, list[int]], corpus_size: int
) -> list[Comparison]:
    comparisons = []
    for set_name, counts in sizes.items():
        for metric in ("recall@5", "precision"):
            for baseline in ("seed as written", "multi_match fuzziness AUTO"):
                note = (
                    f"{corpus_size} names, one document each; typo sets of "
                    f"{statistics.median(counts):.0f} queries (median over rounds), "
                    "a new random set each round"
                )
                comparisons.append(
                    Comparison(
                        f"{set_name} vs {baseline}",
                        metric,
                        "fraction",
                        Sample("ours", values[(set_name, "ours", metric)]),
                        Sample(baseline, values[(set_name, baseline, metric)]),
                        higher_is_better=True,
                        goal=GOALS.get((set_name, metric), ""),
                        notes=[note],
                    )
                )
    return comparisons
