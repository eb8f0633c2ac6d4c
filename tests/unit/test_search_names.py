from search.names import joined_name, looks_like_id, name_parts, split_name, symbol_filename


def test_names_split_on_every_separator_and_lower_case():
    assert split_name("xul.pdb") == "xul pdb"
    assert split_name("libxul.so.dbg") == "libxul so dbg"
    assert name_parts("api-ms-win-core-synch-l1-2-0.dll") == [
        "api",
        "ms",
        "win",
        "core",
        "synch",
        "l1",
        "2",
        "0",
        "dll",
    ]
    assert split_name("libSystem.B.dylib") == "libsystem b dylib"
    assert split_name("vcruntime140_1.pdb") == "vcruntime140 1 pdb"
    assert split_name("...") == "" and name_parts("") == []


def test_joined_name_drops_separators():
    assert joined_name("libxul.so") == "libxulso"
    assert joined_name("Xul.PDB") == "xulpdb"


def test_ids_are_8_to_64_hex_digits():
    assert looks_like_id("44E4EC8C2F41492B9369D6B9A059577C2")
    assert looks_like_id(" 5a2b34c1e6000 ")
    assert not looks_like_id("xul.pdb") and not looks_like_id("abc") and not looks_like_id("")


def test_symbol_filename_replaces_pdb_only():
    assert symbol_filename("xul.pdb") == "xul.sym"
    assert symbol_filename("XUL.PDB") == "XUL.sym"
    assert symbol_filename("libxul.so") == "libxul.so.sym"


def test_non_ascii_letters_are_letters_not_separators():
    assert name_parts("xül.pdb") == ["xül", "pdb"]
    assert name_parts("XÜL.PDB") == ["xül", "pdb"]
    assert name_parts("xu\u0308l.pdb") == ["xül", "pdb"]  # decomposed: the same as composed
    assert name_parts("ñandú_2.dll") == ["ñandú", "2", "dll"]  # "_" still separates
    assert name_parts("日本語.dll") == ["日本語", "dll"]
    assert name_parts("İzmir.so") == ["i\u0307zmir", "so"]  # the combining dot stays in the word
    assert name_parts("a\u00a0b–c.so") == ["a", "b", "c", "so"]  # a no-break space, an en dash
    assert joined_name("libxül.so") == "libxülso"


def test_ascii_names_split_as_before():
    """The ASCII path is the old regex exactly (the quality benchmark's names are ASCII)."""
    import re

    from tests.fixtures.search_corpus import corpus

    old = re.compile(r"[^0-9a-z]+")
    for name in corpus() + ["a_b", "A--B..c", "x\ty", "~!@#$%^&*()"]:
        assert name_parts(name) == [part for part in old.split(name.lower()) if part], name
