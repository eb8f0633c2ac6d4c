"""Typo queries against the real Elasticsearch, over the whole corpus."""

import uuid

import pytest

from search.client import make_es_client
from search.engine import BadQuery, Searcher, SearchUnavailable
from tests.fixtures.search_corpus import code_id, debug_id
from tests.fixtures.search_data import corpus_index, es  # noqa: F401 - the fixture


@pytest.fixture(scope="module")
def searcher(corpus_index):  # noqa: F811
    return Searcher(es(), corpus_index[0])


def top(searcher, query, n=5):
    return [hit.debug_file for hit in searcher.search(query, n).hits]


@pytest.mark.parametrize(
    "typo, target",
    [
        ("xlu.pdb", "xul.pdb"),  # transposed letters
        ("kernelbse.dll", "kernelbase.pdb"),  # one deletion (the dll is the code file)
        ("ntdl.pdb", "ntdll.pdb"),
        ("libgtk-4.so.0", "libgtk-3.so.0"),  # one substitution
        ("libxull.so", "libxul.so"),  # one insertion
        ("mozglu.pdb", "mozglue.pdb"),
    ],
)
def test_one_edit_typos_find_the_symbol_first(searcher, typo, target):
    assert top(searcher, typo)[0] == target


@pytest.mark.parametrize(
    "typo, target",
    [
        ("krenelbse.pdb", "kernelbase.pdb"),  # a transposition and a deletion
        ("libgdk_pixbf-2.0.so.O", "libgdk_pixbuf-2.0.so.0"),
        ("CoreFoundaton", "CoreFoundation"),
        ("mozglue.pbd.", "mozglue.pdb"),
        ("freebl3pdv", "freebl3.pdb"),  # a separator lost and a letter wrong
    ],
)
def test_two_edit_typos_find_the_symbol_in_the_top_five(searcher, typo, target):
    assert target in top(searcher, typo)


@pytest.mark.parametrize(
    "query, target",
    [
        ("libxul.so.dbg", "libxul.so.dbg"),
        ("libxul", "libxul.so"),
        ("ntdll", "ntdll.pdb"),
        ("libgstaudio-1.0", "libgstaudio-1.0.so.0"),
        ("XUL", "xul.pdb"),
    ],
)
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
    assert searcher.search(debug_id("nss3.pdb")[:-1] + "F", 3).hits == []


def test_a_debug_id_prefix_of_8_or_more_hex_digits_finds_the_matching_ids(searcher):
    full = debug_id("nss3.pdb")
    for prefix in (full[:8], full[:8].lower(), full[:20], full[:-1], code_id("nss3.pdb")[:8]):
        hits = searcher.search(prefix, 3).hits
        assert [h.debug_file for h in hits] == ["nss3.pdb"], prefix
        assert hits[0].matched == prefix + "*"
    assert searcher.search(full[:7], 3).hits == []  # 7 digits: not an id, and no name


def test_an_exact_id_ranks_above_a_prefix_match(es_index):
    """``6B42A54E`` is b.pdb's whole code id and the start of a.pdb's debug id."""
    from search.documents import SymbolRow
    from search.indexer import rebuild

    rows = [
        SymbolRow("a.pdb", "6B42A54E1" + "0" * 24, "a.sym", "a.dll", None, 1, None, None),
        SymbolRow("b.pdb", "F" * 33, "b.sym", "b.dll", "6b42a54e", 1, None, None),
    ]
    rebuild(es(), es_index, rows, 2)
    hits = Searcher(es(), es_index).search("6B42A54E", 5).hits
    assert [(h.debug_file, h.matched) for h in hits] == [
        ("b.pdb", "6B42A54E"),
        ("a.pdb", "6B42A54E*"),
    ]
    assert hits[0].score > hits[1].score


NON_ASCII = [
    "xül.pdb",
    "libxül.so",
    "ñandú.pdb",
    "日本語.dll",
    "xul.pdb",
    "libxul.so",
    "nandu.pdb",
    "x-l.pdb",
]


@pytest.fixture(scope="module")
def non_ascii():
    from search.indexer import rebuild
    from tests.fixtures.search_data import symbol_rows

    alias = f"test-{uuid.uuid4().hex[:12]}"
    rows = symbol_rows(NON_ASCII)
    rebuild(es(), alias, rows, len(rows))
    yield Searcher(es(), alias)
    es().indices.delete(index=f"{alias}*", ignore_unavailable=True, allow_no_indices=True)


@pytest.mark.parametrize(
    "query, target",
    [
        ("xül", "xül.pdb"),
        ("XÜL.PDB", "xül.pdb"),
        ("xu\u0308l", "xül.pdb"),  # decomposed ü
        ("libxül.so", "libxül.so"),
        ("ñandú", "ñandú.pdb"),
        ("ñandu.pdb", "ñandú.pdb"),  # a typo
        ("日本語", "日本語.dll"),
        ("xul", "xul.pdb"),
        ("nandu", "nandu.pdb"),
    ],
)
def test_names_with_non_ascii_letters_are_found_as_words(non_ascii, query, target):
    result = non_ascii.search(query, 3)
    assert result.hits and result.hits[0].debug_file == target, (query, result)


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


def test_a_non_ascii_letter_is_not_a_separator(non_ascii):
    """``xül`` was searched as ``x l``: the words of ``x-l.pdb``."""
    result = non_ascii.search("xül", 10)
    assert result.terms[0] == (1.1, "xül")
    assert "x-l.pdb" not in [hit.debug_file for hit in result.hits]


def test_a_word_elasticsearch_finds_too_complex_is_a_bad_query_not_an_outage(searcher):
    """Past the length check (called here without it), Elasticsearch refuses a 510-character
    word's fuzzy automaton with a 500; that is the client's query, so BadQuery (400), not
    SearchUnavailable (503) (issue #24 item 9)."""
    from search.engine import _translated, name_parts

    text = "\ufb2c" * 170
    parts = name_parts(text)
    with pytest.raises(Exception) as refused:  # the fuzzy fallback of a search finding nothing
        searcher._second_chance(text, parts, searcher._alternatives(parts), 5)
    translated = _translated(refused.value, searcher.index)
    assert isinstance(translated, BadQuery), refused.value
    assert str(translated) == "a word of the query is too complex to search with typos (shorten it)"
