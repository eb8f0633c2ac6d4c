"""Typo queries against the real Elasticsearch, over the whole corpus."""

import pytest

from search.engine import BadQuery, Searcher, SearchUnavailable
from search.client import make_es_client
from tests.fixtures.search_corpus import debug_id, code_id
from tests.fixtures.search_data import corpus_index, es  # noqa: F401 - the fixture


@pytest.fixture(scope="module")
def searcher(corpus_index):  # noqa: F811
    return Searcher(es(), corpus_index[0])


def top(searcher, query, n=5):
    return [hit.debug_file for hit in searcher.search(query, n).hits]


@pytest.mark.parametrize("typo, target", [
    ("xlu.pdb", "xul.pdb"),                  # transposed letters
    ("kernelbse.dll", "kernelbase.pdb"),     # one deletion (the dll is the code file)
    ("ntdl.pdb", "ntdll.pdb"),
    ("libgtk-4.so.0", "libgtk-3.so.0"),      # one substitution
    ("libxull.so", "libxul.so"),             # one insertion
    ("mozglu.pdb", "mozglue.pdb"),
])
def test_one_edit_typos_find_the_symbol_first(searcher, typo, target):
    assert top(searcher, typo)[0] == target


@pytest.mark.parametrize("typo, target", [
    ("krenelbse.pdb", "kernelbase.pdb"),     # a transposition and a deletion
    ("libgdk_pixbf-2.0.so.O", "libgdk_pixbuf-2.0.so.0"),
    ("CoreFoundaton", "CoreFoundation"),
    ("mozglue.pbd.", "mozglue.pdb"),
    ("freebl3pdv", "freebl3.pdb"),           # a separator lost and a letter wrong
])
def test_two_edit_typos_find_the_symbol_in_the_top_five(searcher, typo, target):
    assert target in top(searcher, typo)


@pytest.mark.parametrize("query, target", [
    ("libxul.so.dbg", "libxul.so.dbg"), ("libxul", "libxul.so"), ("ntdll", "ntdll.pdb"),
    ("libgstaudio-1.0", "libgstaudio-1.0.so.0"), ("XUL", "xul.pdb")])
def test_a_missing_extension_still_finds_the_symbol(searcher, query, target):
    assert target in top(searcher, query)


def test_the_seed_example_and_what_the_result_carries(searcher):
    result = searcher.search("Firefix", 3)
    assert result.query == "Firefix"
    assert result.terms[0] == (1.1, "firefix") and (0.8571, "firefox") in result.terms
    assert result.hits[0].debug_file in ("firefox.pdb", "firefox.dll")
    assert result.hits[0].matched == "firefox" and result.hits[0].score > 0
    assert result.total >= 2


def test_ids_match_exactly_and_case_insensitively(searcher):
    for query in (debug_id("nss3.pdb"), debug_id("nss3.pdb").lower(), code_id("nss3.pdb").upper()):
        hits = searcher.search(query, 3).hits
        assert [h.debug_file for h in hits] == ["nss3.pdb"]
        assert hits[0].matched == query
    assert searcher.search(debug_id("nss3.pdb")[:-1], 3).hits == []


def test_a_query_without_any_word_finds_nothing(searcher):
    result = searcher.search("--..", 5)
    assert (result.total, result.hits, result.terms) == (0, [], [])


def test_errors_bad_input_and_elasticsearch_down(searcher):
    with pytest.raises(BadQuery):
        searcher.search("", 5)
    with pytest.raises(SearchUnavailable, match="does not exist"):
        Searcher(searcher.es, "test-no-such-alias").search("xul", 5)
    down = Searcher(make_es_client("http://127.0.0.1:9", request_timeout=2), "symbols")
    with pytest.raises(SearchUnavailable, match="unreachable"):
        down.search("xul", 5)
