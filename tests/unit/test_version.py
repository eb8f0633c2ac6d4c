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


@pytest.mark.parametrize("described", ["", "release-3-gabc1234", "v1.2.0-x-gabc1234", "v1.2.0-3-abc1234"])
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
        [sys.executable, "-m", "crontabber", "--version"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert said == version.from_describe(described) == version.version()
    commit = described.removesuffix("-dirty").rsplit("-", 1)[-1].removeprefix("g")
    assert f"g{commit}" in said or "-0-g" in described  # a tag's own commit says the tag alone


def test_outside_a_checkout_git_is_not_asked(tmp_path):
    assert version.from_git(str(tmp_path)) is None
