"""Where the database is: libpq's multi-host form, target_session_attrs, a whole DSN; each
bad value a configuration error naming its option, and no password in any message."""

import pytest

from crontabber.config.database import DatabaseSettings, parse_ports
from crontabber.config.settings import load_settings
from crontabber.errors import ConfigurationError
from tests.helpers import write_ini


def test_a_primary_and_its_standby_in_libpqs_multi_host_form(tmp_path):
    ini = write_ini(
        tmp_path,
        [],
        "[resource]\n    [[postgresql]]\n        host=db1,db2\n"
        "        port=5432,5433\n        target_session_attrs=read-write\n",
    )
    db = load_settings(ini, {}, {"RESOURCE_POSTGRESQL_PASSWORD": "s3cret"}).database
    assert db.libpq() == {
        "host": "db1,db2",
        "port": "5432,5433",
        "dbname": "crontabber",
        "user": None,
        "password": "s3cret",
        "target_session_attrs": "read-write",
    }
    assert db.target == "@db1,db2:5432,5433/crontabber"
    one_port = load_settings(ini, {"crontabber.port": "6432"}, {}).database
    assert one_port.port == 6432  # one port for every host, as libpq takes it


@pytest.mark.parametrize(
    "port, problem",
    [
        ("5432,x", "not a port number: 'x'"),
        ("70000", "not a port number: '70000'"),
        ("1,2,3", "3 ports for 2 hosts"),
    ],
)
def test_a_bad_port_list_names_the_option(tmp_path, port, problem):
    ini = write_ini(tmp_path, [], "[resource]\n    [[postgresql]]\n        host=db1,db2\n")
    with pytest.raises(ConfigurationError, match=f"crontabber.port.*{problem}"):
        load_settings(ini, {"crontabber.port": port}, {})


def test_target_session_attrs_is_one_of_libpqs(tmp_path):
    ini = write_ini(tmp_path, [])
    with pytest.raises(ConfigurationError, match="crontabber.target_session_attrs.*'primary-ish'"):
        load_settings(ini, {"crontabber.target_session_attrs": "primary-ish"}, {})


def test_a_dsn_is_the_whole_address_and_its_password_never_shows(tmp_path):
    dsn = "postgresql://app:hunter2@db1:5432,db2:5433/symbols?target_session_attrs=read-write"
    ini = write_ini(tmp_path, [])
    db = load_settings(ini, {}, {"CRONTABBER_DSN": dsn}).database
    assert db.libpq() == {"dsn": dsn}
    assert db.target == "app@db1,db2:5432,5433/symbols"
    assert "hunter2" not in db.target and "hunter2" not in repr(db)
    with_password = DatabaseSettings(
        dsn="host=db1 dbname=x", password="p", target_session_attrs="any"
    )
    assert with_password.libpq() == {
        "dsn": "host=db1 dbname=x",
        "password": "p",
        "target_session_attrs": "any",
    }


def test_a_dsn_libpq_cannot_parse_is_refused_without_repeating_it(tmp_path):
    ini = write_ini(tmp_path, [])
    with pytest.raises(ConfigurationError, match="crontabber.dsn: not a libpq") as refused:
        load_settings(ini, {}, {"CRONTABBER_DSN": "host=db1 password='hunter2"})
    assert "hunter2" not in str(refused.value)


def test_ports():
    assert parse_ports("5432") == 5432
    assert parse_ports(" 5432, 5433 ") == "5432,5433"
