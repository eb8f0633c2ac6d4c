import pytest

from search.engine import (
    MAX_TERMS,
    ORIGINAL_SCORE,
    BadQuery,
    alternatives,
    build_query,
    check_query,
    matched_term,
    search_terms,
)


def test_check_query_rejects_empty_long_and_bad_sizes():
    assert check_query("  xul.pdb ", 10) == "xul.pdb"
    for query, size in (("", 10), ("   ", 10), ("x" * 201, 10), ("xul", 0), ("xul", 101)):
        with pytest.raises(BadQuery):
            check_query(query, size)
    assert check_query("x" * 200, 100)


def _entry(text, *options):
    return {"text": text, "options": [{"text": t, "score": s, "freq": 1} for t, s in options]}


def test_alternatives_keep_scores_from_0_6_best_first_merged_across_fields():
    suggest = {
        "name": [_entry("firefix", ("firefox", 0.857), ("fire", 0.5))],
        "code": [_entry("firefix", ("firefly", 0.714), ("firefox", 0.8))],
    }
    assert alternatives(suggest) == {"firefix": [(0.857, "firefox"), (0.714, "firefly")]}


def test_search_terms_put_the_original_first_and_combine_corrections():
    alts = {"libxol": [(0.8, "libxul")], "sx": [(0.6, "so")]}
    terms = search_terms(["libxol", "sx"], alts)
    assert terms[0] == (ORIGINAL_SCORE, "libxol sx")
    assert [t for _, t in terms[1:]] == ["libxul sx", "libxol so", "libxul so"]
    assert terms[3][0] == pytest.approx(0.48)


def test_search_terms_merge_joined_twins_and_cap_the_count():
    terms = search_terms(
        ["firefix", "pdb"],
        {"firefix": [(0.857, "firefox")]},
        [(0.9, "firefoxpdb"), (0.7, "firefixpdb")],
    )
    assert terms == [(ORIGINAL_SCORE, "firefix pdb"), (0.9, "firefox pdb")]
    many = {
        "a" * 5: [(0.9 - i / 100, f"b{i}") for i in range(3)],
        "c" * 5: [(0.9 - i / 100, f"d{i}") for i in range(3)],
    }
    assert len(search_terms(["a" * 5, "c" * 5], many)) == MAX_TERMS


def test_query_boosts_names_over_code_files_and_earlier_terms_over_later():
    query = build_query("xlu.pdb", [(1.1, "xlu pdb"), (0.9, "xul pdb")])
    phrases = [c["match_phrase"] for c in query["bool"]["should"] if "match_phrase" in c]
    boosts = [next(iter(p.values()))["boost"] for p in phrases]
    assert boosts == [2 * 2 * 1.1, 2 * 1.1, 2 * 0.9, 0.9]
    assert not any("term" in c and "debug_id" in c["term"] for c in query["bool"]["should"])


def test_query_matches_ids_exactly_when_the_query_looks_like_one():
    query = build_query(
        "44e4ec8c2f41492b9369d6b9a059577c2", [(1.1, "44e4ec8c2f41492b9369d6b9a059577c2")]
    )
    fields = {next(iter(c["term"])) for c in query["bool"]["should"] if "term" in c}
    assert {"debug_id", "code_id"} <= fields


def test_matched_term_is_the_best_ranked_term():
    terms = [(1.1, "xlu pdb"), (0.9, "xul pdb"), (0.6, "xsl pdb")]
    assert matched_term(["term:2:name", "term:1:code", "match"], "xlu.pdb", terms) == "xul pdb"
    assert matched_term(["debug_id"], "ABC12345", terms) == "ABC12345"
    assert matched_term(["fuzzy", "match"], "xlu.pdb", terms) == "fuzzy: xlu pdb"


def test_the_fallback_ranks_fuzzy_parts_above_any_word():
    from search.engine import build_fallback

    should = build_fallback([(1.1, "combaseoscdec pdb"), (0.7, "combase pdb")])["bool"]["should"]
    fuzzy, anyword = (c["match"]["name_parts"] for c in should)
    assert (fuzzy["query"], fuzzy["operator"], fuzzy["fuzziness"]) == (
        "combaseoscdec pdb",
        "and",
        "AUTO",
    )
    assert anyword["query"] == "combaseoscdec pdb combase" and anyword["boost"] < fuzzy["boost"]
