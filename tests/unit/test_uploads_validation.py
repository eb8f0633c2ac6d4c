"""Every rejection rule with a crafted archive, through the code that runs before any
write (central directory, then the verify pass), without services."""

from __future__ import annotations

import zipfile

import pytest

from jobs import symbolkey
from jobs.uploads import archive, symheader
from jobs.uploads.errors import Rejected
from jobs.uploads.records import Limits, UploadSettings
from jobs.uploads.validation import (
    RULE_DUPLICATE,
    RULE_EMPTY,
    RULE_ENCRYPTED,
    is_ignorable,
    read_plan,
    validate,
)
from tests.fixtures.uploads_archives import sym_text, symbol_members, write_zip
from tests.fixtures.uploads_cases import ACCEPTED, CASES, GOOD, ID_A


def _verify(path, settings=UploadSettings()):
    """The central directory's checks, then the verify pass's per member (its digest, and a
    .sym file's header against its key, as ``VerifyPass`` calls them)."""
    plan = read_plan(path, settings.limits)
    digests = [archive.digest(path, info) for info in plan.members]
    for info, key, digest in zip(plan.members, plan.keys, digests):
        symheader.check(info.filename, key, digest.head, digest.size <= len(digest.head))
    return plan, digests


@pytest.mark.parametrize("make, member, rule", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_rejects_its_crafted_archive_naming_member_and_rule(tmp_path, make, member, rule):
    with pytest.raises(Rejected) as caught:
        _verify(make(tmp_path / "bad.zip"))
    assert caught.value.rule == rule
    assert caught.value.member == member
    assert rule in str(caught.value) and (member is None or repr(member) in str(caught.value))


def test_a_good_archive_gives_a_plan_and_digests(tmp_path):
    members = GOOD + [("a-symbols.txt", b"x"), ("a.pdb/.DS_Store", b"y")]
    plan, digests = _verify(write_zip(tmp_path / "a.zip", members))
    assert [info.filename for info in plan.members] == [name for name, _ in GOOD]
    assert plan.ignored == ["a-symbols.txt", "a.pdb/.DS_Store"] and plan.total == 4
    import hashlib

    assert [(d.size, d.md5) for d in digests] == [
        (len(c), hashlib.md5(c).hexdigest()) for _, c in GOOD
    ]


def test_an_identical_duplicate_is_published_once(tmp_path):
    path = tmp_path / "dup.zip"
    import warnings

    with zipfile.ZipFile(path, "w") as zipped, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zipped.writestr(f"a.pdb/{ID_A}/a.sym", b"same")
        zipped.writestr(f"a.pdb/{ID_A}/a.sym", b"same")
    assert len(read_plan(path, UploadSettings().limits).members) == 1


def test_rules_apply_in_archive_order_first_offender_named():
    infos = [
        zipfile.ZipInfo(f"a.pdb/{ID_A}/a.sym"),
        zipfile.ZipInfo("../x"),
        zipfile.ZipInfo("/abs"),
    ]
    with pytest.raises(Rejected) as caught:
        validate(infos, Limits())
    assert caught.value.member == "../x"


def test_duplicate_with_different_size_is_found_from_the_central_directory():
    first, second = zipfile.ZipInfo(f"a.pdb/{ID_A}/a.sym"), zipfile.ZipInfo(f"a.pdb/{ID_A}/a.sym")
    first.file_size, second.file_size = 10, 11
    first.CRC = second.CRC = 0
    with pytest.raises(Rejected) as caught:
        validate([first, second], Limits())
    assert caught.value.rule == RULE_DUPLICATE


@pytest.mark.parametrize(
    "name, ok",
    [
        ("xul.pdb/ABCDEF0123456789ABCDEF0123456789A/xul.sym", True),
        ("libxul.so/0123abcd0123abcd0123abcd0123abcd0/libxul.so.sym", True),
        ("xul.pdb/ABCDEFG/xul.sym", False),
        (f"xul.pdb/{'A' * 33}/xul.sym/", False),
        ("xul.sym", False),
        (f"x#y.pdb/{'A' * 33}/x.sym", False),
        (f"x.pdb/{'A' * 33}/x|y.sym", False),
        (f"Google Chrome Framework/{'A' * 33}/Google Chrome Framework.sym", True),
        (f"libstdc++.so.6/{'A' * 33}/libstdc++.so.6.sym", True),
        (f"x.pdb/{'A' * 33}/x.sym\n", False),
        (f"x.pdb/{'A' * 40}/x.sym", True),
        (f"x.pdb/{'A' * 41}/x.sym", False),
        (f"{'x' * 255}/{'A' * 33}/{'y' * 255}", True),
        (f"{'x' * 256}/{'A' * 33}/y", False),
        (f"xul.pdb/{'A' * 33}/xul.sym:s", False),
        (f"aux.pdb/{'A' * 33}/x.sym", False),
        (f"auxiliary.pdb/{'A' * 33}/x.sym", True),
        (f"CONSOLE/{'A' * 33}/x.sym", True),
        (f".hidden/{'A' * 33}/x.sym", True),
        (f"xul.pdb/{'A' * 33}/x..sym", True),
    ],
)
def test_the_canonical_key_form(name, ok):
    try:
        symbolkey.parse(name)
    except symbolkey.BadKey:
        assert not ok
    else:
        assert ok


def test_a_lowercase_debug_id_is_normalised_and_one_key_with_the_uppercase():
    key = symbolkey.parse("xul.pdb/44e4ec8c2f41492b9369d6b9a059577c2/xul.sym")
    assert key.path == "xul.pdb/44E4EC8C2F41492B9369D6B9A059577C2/xul.sym"
    assert key.object_key("v1/") == "v1/" + key.path
    upper, lower = zipfile.ZipInfo(key.path), zipfile.ZipInfo(key.path.replace("44E4", "44e4"))
    for at, info in enumerate((upper, lower)):
        info.file_size, info.CRC, info.header_offset = 10, 1, 1000 * at
    plan = validate([upper, lower], Limits())
    assert [k.path for k in plan.keys] == [key.path]  # the same file, published once
    lower.CRC = 2
    with pytest.raises(Rejected) as caught:
        validate([upper, lower], Limits())
    assert caught.value.rule == RULE_DUPLICATE and caught.value.member == lower.filename


def test_the_key_length_counts_the_prefix():
    name = f"{'x' * 255}/{'A' * 40}/{'y' * 255}"
    assert symbolkey.parse(name, "v1").path == name
    with pytest.raises(symbolkey.BadKey) as caught:
        symbolkey.parse(name, "p" * 480)
    assert caught.value.rule == symbolkey.RULE_KEY_LENGTH
    with pytest.raises(Rejected) as rejected:
        validate([zipfile.ZipInfo(name)], Limits(), prefix="p" * 480)
    assert rejected.value.rule == symbolkey.RULE_KEY_LENGTH and rejected.value.member == name


def test_a_safe_part_is_always_a_canonical_name():
    for text in ("x:y", "CON", "nul.txt", "...", " a. ", "é" * 300, ""):
        part = symbolkey.safe_part(text)
        symbolkey.check_characters(part)
        symbolkey.check_name("part", part)


def test_a_dot_component_is_not_a_symbol_key():
    with pytest.raises(Rejected) as caught:
        validate([zipfile.ZipInfo(f"./{'A' * 33}/x.sym")], Limits())
    assert caught.value.rule == symbolkey.RULE_TRAILING_DOT


def test_ignorable_names():
    assert is_ignorable("firefox-1.0-symbols.txt") and is_ignorable(".DS_Store")
    assert is_ignorable(f"a.pdb/{ID_A}/.DS_Store")
    assert not is_ignorable("a/firefox-symbols.txt")


def test_a_large_member_streams_in_chunks_with_bounded_chunk_size(tmp_path):
    content = sym_text("big.pdb", "AB" * 16 + "1", 3_000_000)
    path = write_zip(tmp_path / "big.zip", [(f"big.pdb/{'AB' * 16}1/big.sym", content)])
    with zipfile.ZipFile(path) as zipped:
        info = zipped.infolist()[0]
    chunks = list(archive.iter_member(path, info, chunk=64 * 1024))
    assert b"".join(chunks) == content and max(map(len, chunks)) <= 64 * 1024
    import gzip

    assert gzip.decompress(archive.gzipped(path, info, 1)) == content
    assert archive.gzipped(path, info, 1) == archive.gzipped(path, info, 1)  # deterministic


def test_settings_compression():
    settings = UploadSettings(symbols_prefix="try/v1/", compress_extensions=("sym",))
    assert settings.compresses("a.pdb/AB/a.SYM") and not settings.compresses("a.pdb/AB/a.exe")
    assert symbolkey.join("try/v1/", "a/B/c") == "try/v1/a/B/c" and symbolkey.join("", "a") == "a"


def test_symbol_members_are_realistic():
    ((name, content),) = symbol_members(1, 5000)
    assert content.startswith(b"MODULE windows x86_64 ") and b"\nFUNC " in content
    assert b"\nFILE 0 " in content and name.endswith(".sym")


def test_an_unsafe_directory_entry_is_rejected_too():
    with pytest.raises(Rejected) as caught:
        validate([zipfile.ZipInfo("../up/"), zipfile.ZipInfo(f"a.pdb/{ID_A}/a.sym")], Limits())
    assert caught.value.member == "../up/"


@pytest.mark.parametrize("make, members", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_the_specification_allows_is_read_right(tmp_path, make, members):
    path = make(tmp_path / "ok.zip")
    plan, digests = _verify(path)
    assert [info.filename for info in plan.members] == list(members)
    import hashlib

    assert [(d.size, d.md5) for d in digests] == [
        (len(c), hashlib.md5(c).hexdigest()) for c in members.values()
    ]
    for info in plan.members:  # the reused deflate stream makes the same bytes too
        import gzip

        assert gzip.decompress(archive.gzipped(path, info, 1)) == members[info.filename]


def test_an_archive_of_ignorable_names_only_is_valid_with_nothing_to_publish(tmp_path):
    path = write_zip(tmp_path / "a.zip", [("a-symbols.txt", b"x"), ("a.pdb/.DS_Store", b"y")])
    plan = read_plan(path, UploadSettings().limits)
    assert plan.members == [] and plan.ignored == ["a-symbols.txt", "a.pdb/.DS_Store"]


def test_an_archive_level_rejection_names_no_member():
    assert str(Rejected(RULE_EMPTY)) == "rejected: archive has no files"
    assert (
        str(Rejected(RULE_ENCRYPTED, f"a.pdb/{ID_A}/a.sym"))
        == f"rejected: member 'a.pdb/{ID_A}/a.sym': encrypted (flag bit 0)"
    )


def test_the_whole_archive_ratio_is_checked_from_the_archive_size():
    from jobs.uploads.validation import RULE_RATIO, check_archive_ratio

    info = zipfile.ZipInfo(f"a.pdb/{ID_A}/a.sym")
    info.file_size, info.compress_size = 10_000, 10
    check_archive_ratio([info], 100, Limits(max_ratio=100))
    with pytest.raises(Rejected) as caught:
        check_archive_ratio([info, info], 100, Limits(max_ratio=100))
    assert caught.value.rule == RULE_RATIO and caught.value.member is None
    assert "whole archive: 200:1" in str(caught.value)


def test_a_member_inflating_past_its_declared_size_is_refused_while_streaming(tmp_path):
    import zlib

    from tests.fixtures.raw_zip import Entry, deflate, raw_zip

    content = b"\0" * 100_000
    data = deflate(content)
    lie = {"usize": 1000, "crc": zlib.crc32(content[:1000])}
    path = raw_zip(
        tmp_path / "lie.zip",
        [Entry(f"a.pdb/{ID_A}/a.sym", content, data=data, local=lie, central=lie)],
    )
    plan = read_plan(path, Limits())
    with pytest.raises(Rejected) as caught:
        archive.digest(path, plan.members[0])
    assert "more data than declared" in str(caught.value)


@pytest.mark.parametrize(
    "raw, safe",
    [
        ("symbols.zip", "symbols.zip"),
        ("a\u202egnp.zip ", "a_gnp.zip"),
        ("ｆ∕x?&=;.zip", "__x____.zip"),
        ("", "_"),
        ("Google Chrome.zip", "Google Chrome.zip"),
        ("a:b.zip", "a_b.zip"),
        ("con.zip", "_con.zip"),
        ("x.zip.", "x.zip"),
    ],
)
def test_safe_part_keeps_only_the_key_set(raw, safe):
    assert symbolkey.safe_part(raw) == safe


def test_the_header_gives_the_code_id_and_file_and_reads_no_cut_line():
    text = (
        b"MODULE windows x86_64 44e4ec8c2f41492b9369d6b9a059577c2 xul.pdb\r\n"
        b"INFO CODE_ID 5A4CD0E9F1C64000 xul.dll\nINFO GENERATOR mozilla/dump_syms 2.3.3\n"
        b"FILE 0 a.cpp\n"
    )
    header = symheader.parse(text, whole=True)
    assert header == symheader.Header(
        "44E4EC8C2F41492B9369D6B9A059577C2", "xul.pdb", "5A4CD0E9F1C64000", "xul.dll"
    )
    cut = text.split(b"INFO GENERATOR")[0] + b"INFO CODE_ID 5A4C"  # the head ends mid-line
    assert symheader.parse(
        b"MODULE Linux x86_64 " + b"0" * 33 + b" libxul.so\n" + cut[-17:]
    ) == symheader.Header("0" * 33, "libxul.so")
    spaced = symheader.parse(
        b"MODULE mac x86_64 " + b"A" * 33 + b" Google Chrome Framework\nINFO CODE_ID ABCDEF\n",
        whole=True,
    )
    assert spaced == symheader.Header("A" * 33, "Google Chrome Framework", "ABCDEF", None)
    key = symbolkey.parse(f"Google Chrome Framework/{'a' * 33}/Google Chrome Framework.sym")
    assert (
        symheader.check(
            "m", key, b"MODULE mac x86_64 " + b"A" * 33 + b" Google Chrome Framework\n", True
        )
        is not None
    )
    assert symheader.check("m", symbolkey.parse(f"x.pdb/{'A' * 33}/x.dll"), b"MZ", True) is None
