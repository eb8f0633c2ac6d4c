"""Reading crontabber.ini: paths, dotted sections, one-line syntax errors."""

import pytest

from crontabber.config.inifile import IniFile
from crontabber.config.settings import load_settings
from crontabber.errors import ConfigurationError


def write(tmp_path, text):
    path = tmp_path / "crontabber.ini"
    path.write_text(text)
    return str(path)


def test_values_keep_their_path_and_dotted_sections_are_paths(tmp_path):
    ini = IniFile(
        write(
            tmp_path,
            "top=1\n[resource.postgresql]\n    host=db\n"
            "[crontabber]\n    [[class-Foo]]\n        [[[database]]]\n            port=1\n",
        )
    )
    assert [v.dotted for v in ini.values] == [
        "top",
        "resource.postgresql.host",
        "crontabber.class-Foo.database.port",
    ]
    assert ini.sections == (
        "resource.postgresql",
        "crontabber",
        "crontabber.class-Foo",
        "crontabber.class-Foo.database",
    )
    assert ini.get(("RESOURCE", "postgresql"), "HOST") == "db"  # case is ignored, as everett did


def test_a_dotted_resource_section_feeds_the_database_settings(tmp_path):
    path = write(tmp_path, "[resource.postgresql]\n    host=db.example\n    port=6543\n")
    settings = load_settings(path, {}, {})
    assert (settings.database.host, settings.database.port) == ("db.example", 6543)


def test_percent_signs_are_text_not_interpolation(tmp_path):
    path = write(tmp_path, "[logging]\n    format=%(asctime)s %(message)s\n")
    assert load_settings(path, {}, {}).log_format == "%(asctime)s %(message)s"


@pytest.mark.parametrize(
    "text,where,problem",
    [
        ("[crontabber]\n    keep_days 90\n", "line 2", "Invalid line ('keep_days 90')"),
        ("[crontabber\n", "line 1", "Invalid line ('[crontabber')"),
        ("[crontabber]\n    a=1\n    a=2\n", "line 3", "Duplicate keyword name: 'a=2'"),
        ("[crontabber]\n    jobs='''\n    x\n", "line 2", "Parse error in multiline value"),
    ],
)
def test_a_syntax_error_is_one_line_with_its_line_number(tmp_path, text, where, problem):
    path = write(tmp_path, text)
    with pytest.raises(ConfigurationError) as info:
        IniFile(path)
    assert info.value.where == f"{path} {where}" and problem in info.value.problem
    assert "\n" not in str(info.value)


def test_no_file_found_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="no configuration file"):
        load_settings(None, {}, {})
    (tmp_path / "crontabber.ini").write_text("[crontabber]\n")
    assert load_settings(None, {}, {}).entries == ()
