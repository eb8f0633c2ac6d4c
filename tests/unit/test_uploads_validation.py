"""Every rejection rule with a crafted archive, through the code that runs before any
write (central directory, then the verify pass), without services."""

from __future__ import annotations

import zipfile

import pytest

from jobs.uploads import archive
from jobs.uploads.errors import Rejected
from jobs.uploads.records import Limits, UploadSettings
from jobs.uploads.validation import (
    KEY_PATTERN,
    RULE_DUPLICATE,
    RULE_EMPTY,
    RULE_ENCRYPTED,
    RULE_PATTERN,
    is_ignorable,
    read_plan,
    validate,
)
from tests.fixtures.uploads_archives import sym_text, symbol_members, write_zip
from tests.fixtures.uploads_cases import ACCEPTED, CASES, GOOD


def _verify(path, settings=UploadSettings()):
    plan = read_plan(path, settings.limits)
    return plan, [archive.digest(path, info) for info in plan.members]


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
    assert [(d.size, d.md5) for d in digests] == [(len(c), hashlib.md5(c).hexdigest()) for _, c in GOOD]


def test_an_identical_duplicate_is_published_once(tmp_path):
    path = tmp_path / "dup.zip"
    import warnings
    with zipfile.ZipFile(path, "w") as zipped, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zipped.writestr("a.pdb/AB/a.sym", b"same")
        zipped.writestr("a.pdb/AB/a.sym", b"same")
    assert len(read_plan(path, UploadSettings().limits).members) == 1


def test_rules_apply_in_archive_order_first_offender_named():
    infos = [zipfile.ZipInfo("a.pdb/AB/a.sym"), zipfile.ZipInfo("../x"), zipfile.ZipInfo("/abs")]
    with pytest.raises(Rejected) as caught:
        validate(infos, Limits())
    assert caught.value.member == "../x"


def test_duplicate_with_different_size_is_found_from_the_central_directory():
    first, second = zipfile.ZipInfo("a.pdb/AB/a.sym"), zipfile.ZipInfo("a.pdb/AB/a.sym")
    first.file_size, second.file_size = 10, 11
    first.CRC = second.CRC = 0
    with pytest.raises(Rejected) as caught:
        validate([first, second], Limits())
    assert caught.value.rule == RULE_DUPLICATE


@pytest.mark.parametrize("name, ok", [
    ("xul.pdb/ABCDEF0123456789ABCDEF0123456789A/xul.sym", True),
    ("libxul.so/0123abcd/libxul.so.sym", True),
    ("xul.pdb/ABCDEFG/xul.sym", False), ("xul.pdb/AB/xul.sym/", False), ("xul.sym", False),
    ("x#y.pdb/AB/x.sym", False), ("x.pdb/AB/x|y.sym", False),
    ("Google Chrome Framework/AB/Google Chrome Framework.sym", True),
    ("libstdc++.so.6/AB/libstdc++.so.6.sym", True), ("x.pdb/AB/x.sym\n", False),
])
def test_tecken_key_pattern(name, ok):
    assert bool(KEY_PATTERN.fullmatch(name)) is ok


def test_a_dot_component_is_not_a_symbol_key():
    with pytest.raises(Rejected) as caught:
        validate([zipfile.ZipInfo("./AB/x.sym")], Limits())
    assert caught.value.rule == RULE_PATTERN


def test_ignorable_names():
    assert is_ignorable("firefox-1.0-symbols.txt") and is_ignorable(".DS_Store")
    assert is_ignorable("a.pdb/AB/.DS_Store")
    assert not is_ignorable("a/firefox-symbols.txt")


def test_a_large_member_streams_in_chunks_with_bounded_chunk_size(tmp_path):
    content = sym_text("big.pdb", "AB", 3_000_000)
    path = write_zip(tmp_path / "big.zip", [("big.pdb/AB/big.sym", content)])
    with zipfile.ZipFile(path) as zipped:
        info = zipped.infolist()[0]
    chunks = list(archive.iter_member(path, info, chunk=64 * 1024))
    assert b"".join(chunks) == content and max(map(len, chunks)) <= 64 * 1024
    import gzip
    assert gzip.decompress(archive.gzipped(path, info, 1)) == content
    assert archive.gzipped(path, info, 1) == archive.gzipped(path, info, 1)  # deterministic


def test_settings_keys_and_compression():
    settings = UploadSettings(symbols_prefix="try/v1/", compress_extensions=("sym",))
    assert settings.object_key("a.pdb/AB/a.sym") == "try/v1/a.pdb/AB/a.sym"
    assert settings.compresses("a.pdb/AB/a.SYM") and not settings.compresses("a.pdb/AB/a.exe")
    assert UploadSettings(symbols_prefix="").object_key("a/B/c") == "a/B/c"


def test_symbol_members_are_realistic():
    (name, content), = symbol_members(1, 5000)
    assert content.startswith(b"MODULE windows x86_64 ") and b"\nFUNC " in content
    assert b"\nFILE 0 " in content and name.endswith(".sym")


def test_an_unsafe_directory_entry_is_rejected_too():
    with pytest.raises(Rejected) as caught:
        validate([zipfile.ZipInfo("../up/"), zipfile.ZipInfo("a.pdb/AB/a.sym")], Limits())
    assert caught.value.member == "../up/"


@pytest.mark.parametrize("make, members", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_the_specification_allows_is_read_right(tmp_path, make, members):
    path = make(tmp_path / "ok.zip")
    plan, digests = _verify(path)
    assert [info.filename for info in plan.members] == list(members)
    import hashlib
    assert [(d.size, d.md5) for d in digests] == \
        [(len(c), hashlib.md5(c).hexdigest()) for c in members.values()]
    for info in plan.members:  # the reused deflate stream makes the same bytes too
        import gzip
        assert gzip.decompress(archive.gzipped(path, info, 1)) == members[info.filename]


def test_an_archive_of_ignorable_names_only_is_valid_with_nothing_to_publish(tmp_path):
    path = write_zip(tmp_path / "a.zip", [("a-symbols.txt", b"x"), ("a.pdb/.DS_Store", b"y")])
    plan = read_plan(path, UploadSettings().limits)
    assert plan.members == [] and plan.ignored == ["a-symbols.txt", "a.pdb/.DS_Store"]


def test_an_archive_level_rejection_names_no_member():
    assert str(Rejected(RULE_EMPTY)) == "rejected: archive has no files"
    assert str(Rejected(RULE_ENCRYPTED, "a.pdb/AB/a.sym")) == \
        "rejected: member 'a.pdb/AB/a.sym': encrypted (flag bit 0)"


def test_the_whole_archive_ratio_is_checked_from_the_archive_size():
    from jobs.uploads.validation import RULE_RATIO, check_archive_ratio
    info = zipfile.ZipInfo("a.pdb/AB/a.sym")
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
    path = raw_zip(tmp_path / "lie.zip", [Entry("a.pdb/AB/a.sym", content, data=data,
                                                local=lie, central=lie)])
    plan = read_plan(path, Limits())
    with pytest.raises(Rejected) as caught:
        archive.digest(path, plan.members[0])
    assert "more data than declared" in str(caught.value)


@pytest.mark.parametrize("raw, safe", [
    ("symbols.zip", "symbols.zip"), ("a\u202egnp.zip ", "a_gnp.zip"), ("ｆ∕x?&=;.zip", "__x____.zip"),
    ("", "_"), ("Google Chrome.zip", "Google Chrome.zip"),
])
def test_key_safe_keeps_only_the_key_set(raw, safe):
    from jobs.uploads.validation import key_safe
    assert key_safe(raw) == safe
