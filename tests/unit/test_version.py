"""The version from git tags (crontabber/version.py): ``git describe`` output to PEP 440, and
what a source tree says (a tick: the build's or ``0+unbuilt``; ``--version``: git's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crontabber import version

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize(
    ("described", "expected"),
    [
        ("v1.2.0-0-gabc1234", "1.2.0"),
        ("v1.2.0-0-gabc1234-dirty", "1.2.0+dirty"),
        ("v1.2.0-3-gabc1234", "1.2.0.post3+gabc1234"),
        ("v1.2.0-3-gabc1234-dirty", "1.2.0.post3+gabc1234.dirty"),
        ("v2.0.0rc1-12-g0123abcd", "2.0.0rc1.post12+g0123abcd"),
        ("abc1234", "0+gabc1234"),
        ("abc1234-dirty", "0+gabc1234.dirty"),
    ],
)
def test_git_describe_gives_a_pep_440_version(described, expected):
    assert version.from_describe(described) == expected


@pytest.mark.parametrize(
    "described", ["", "release-3-gabc1234", "v1.2.0-x-gabc1234", "v1.2.0-3-abc1234"]
)
def test_anything_else_is_refused(described):
    with pytest.raises(ValueError):
        version.from_describe(described)


def test_a_source_tree_has_no_built_version():
    assert version.built() == version.UNBUILT


def test_a_checkout_says_what_git_describe_says():
    described = subprocess.run(
        ["git", *version.DESCRIBE], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    said = subprocess.run(
        [sys.executable, "-m", "crontabber", "--version"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert said == version.from_describe(described) == version.version()
    commit = described.removesuffix("-dirty").rsplit("-", 1)[-1].removeprefix("g")
    assert f"g{commit}" in said or "-0-g" in described  # a tag's own commit says the tag alone


def test_outside_a_checkout_git_is_not_asked(tmp_path):
    assert version.from_git(str(tmp_path)) is None


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_tick_in_this_checkout_records_its_commit_without_git():
    head = _git(REPO, "rev-parse", "HEAD")
    assert version.checkout_commit(str(REPO)) == head
    assert version.recorded() == f"0+unbuilt.g{head[:7]}"


def test_the_commit_is_read_from_a_branch_packed_refs_a_detached_head_and_a_worktree(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "one",
    )
    first = _git(repo, "rev-parse", "HEAD")
    assert version.checkout_commit(str(repo)) == first  # refs/heads/main
    _git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "two",
    )
    second = _git(repo, "rev-parse", "HEAD")
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git/refs/heads/main").exists()
    assert version.checkout_commit(str(repo)) == second  # packed-refs
    _git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"), first)
    assert version.checkout_commit(str(tmp_path / "side")) == first  # .git file, commondir
    _git(repo, "checkout", "-q", "--detach", first)
    assert version.checkout_commit(str(repo)) == first  # a detached HEAD
    assert version.checkout_commit(str(tmp_path)) is None  # no checkout
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    assert version.checkout_commit(str(empty)) is None  # an unborn branch
