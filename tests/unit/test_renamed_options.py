"""A renamed option (docs/conventions.md, "Deprecation policy"): ``crontabber.default_timeout``
became ``crontabber.default_timeout_seconds``. The old name still sets the value from the INI
file, the environment or the command line, with a ``DeprecationWarning``; ``--configtest``
lists it; the new name wins when both are set. The command line's stderr line:
tests/cli/test_leases.py."""

from __future__ import annotations

import warnings

import pytest

from crontabber.config.catalog import configuration_notes, load_jobs
from crontabber.config.settings import load_settings, runner_options

SAID = (
    "crontabber.default_timeout is deprecated: it is renamed crontabber.default_timeout_seconds; "
    "the old name is read until the next major release"
)


def ini(tmp_path, lines: str = "") -> str:
    path = tmp_path / "crontabber.ini"
    path.write_text(
        f"[crontabber]\n    jobs='''\n    tests.fixtures.sample_jobs.FooJob|1d\n    '''\n{lines}"
    )
    return str(path)


@pytest.mark.parametrize(
    ("lines", "cli", "environ"),
    [
        ("    default_timeout=7\n", {}, {}),
        ("", {"crontabber.default_timeout": "7"}, {}),
        ("", {}, {"CRONTABBER_DEFAULT_TIMEOUT": "7"}),
    ],
    ids=["ini", "command line", "environment"],
)
def test_the_old_name_still_sets_the_option_and_warns(tmp_path, lines, cli, environ):
    with pytest.warns(DeprecationWarning) as caught:
        settings = load_settings(ini(tmp_path, lines), cli, environ)
    assert [str(w.message) for w in caught] == [SAID]  # once, however often it is read
    assert settings.default_timeout_seconds == 7.0
    assert settings.sources.renamed == {
        "crontabber.default_timeout": "crontabber.default_timeout_seconds"
    }
    jobs = load_jobs(settings)  # the strict check of names knows the old one
    assert SAID in configuration_notes(settings.sources, jobs)


def test_the_new_name_wins_and_the_old_one_still_warns(tmp_path):
    with pytest.warns(DeprecationWarning, match="crontabber.default_timeout is deprecated"):
        settings = load_settings(
            ini(tmp_path, "    default_timeout=7\n    default_timeout_seconds=9\n"), {}, {}
        )
    assert settings.default_timeout_seconds == 9.0


def test_the_new_name_alone_warns_nothing(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = load_settings(ini(tmp_path, "    default_timeout_seconds=9\n"), {}, {})
    assert settings.default_timeout_seconds == 9.0 and settings.sources.renamed == {}


def test_configtest_says_where_the_value_came_from(tmp_path):
    path = ini(tmp_path, "    default_timeout=7\n")
    with pytest.warns(DeprecationWarning):
        settings = load_settings(path, {}, {})
    (option,) = [o for p, o in runner_options().walk() if o.name == "default_timeout_seconds"]
    assert option.formerly == "default_timeout"
    origin = settings.sources.origin(("crontabber",), option)
    assert origin == f"INI file {settings.sources.conf_path} (as crontabber.default_timeout)"
