"""devservices: the one Python owner of the local services' layout agrees with the
provisioner (scripts/services.sh) and reads what it writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import devservices

SCRIPT = (
    Path(devservices.__file__).resolve().parent.parent / "scripts" / "services.sh"
).read_text()


def script_default(name: str) -> str:
    """``NAME=${SYMBOLS_...:-DEFAULT}`` or ``NAME=DEFAULT`` in services.sh."""
    match = re.search(rf"^{name}=(?:\$\{{\w+:-([^}}]*)\}}|(\S+))$", SCRIPT, re.M)
    assert match, name
    return match.group(1) or match.group(2)


def test_the_defaults_are_the_scripts():
    assert {
        "pg": int(script_default("PG_PORT")),
        "es": int(script_default("ES_PORT")),
        "s3": int(script_default("S3_PORT")),
        "pgb": int(script_default("PGB_PORT")),
    } == devservices.DEFAULT_PORTS
    assert {
        "user": script_default("DB_USER"),
        "password": script_default("DB_PASSWORD"),
        "dbname": script_default("DB_NAME"),
    } == devservices.DEFAULT_DATABASE
    assert (
        script_default("S3_ACCESS_KEY"),
        script_default("S3_SECRET_KEY"),
    ) == devservices.DEFAULT_S3_KEYS


def test_the_env_file_is_read_and_the_environment_wins(tmp_path):
    (tmp_path / "env").write_text(
        "# Written by scripts/services.sh\n"
        "export SYMBOLS_SERVICE_DIR=/var/lib/symbols-services/x-123\n"
        "export RESOURCE_POSTGRESQL_PORT=6000\n"
        "export ES_URL=http://127.0.0.1:9999\n"
        "export AWS_ENDPOINT_URL_S3='http://127.0.0.1:9555'\n"
    )
    services = devservices.current(
        {"SYMBOLS_STATE_DIR": str(tmp_path), "RESOURCE_POSTGRESQL_PORT": "7000"}
    )
    assert services.pg_port == 7000  # the environment's
    assert (services.es_port, services.s3_port) == (9999, 9555)
    assert services.database("other")["dbname"] == "other"
    assert services.script_ports() == {
        "SYMBOLS_PG_PORT": "7000",
        "SYMBOLS_ES_PORT": "9999",
        "SYMBOLS_S3_PORT": "9555",
        "SYMBOLS_PGB_PORT": "54339",
    }
    assert services.pgb_port == 54339
    assert services.pg_data == Path("/var/lib/symbols-services/x-123/pg/data")
    assert services.s3_data == tmp_path / "s3" / "data"


def test_the_service_dir_comes_from_the_state_dirs_own_file(tmp_path):
    """A second checkout's services run under the first one's environment: its data
    directory is its own env file's, never the exported variable."""
    (tmp_path / "env").write_text("export SYMBOLS_SERVICE_DIR=/srv/mine\n")
    services = devservices.current(
        {"SYMBOLS_STATE_DIR": str(tmp_path), "SYMBOLS_SERVICE_DIR": "/srv/someone-elses"}
    )
    assert services.service_dir == Path("/srv/mine")


def test_no_env_file_says_how_to_make_one(tmp_path):
    services = devservices.current({"SYMBOLS_STATE_DIR": str(tmp_path)})
    assert services.pg_port == devservices.DEFAULT_PORTS["pg"]
    with pytest.raises(RuntimeError, match="scripts/services.sh start"):
        print(services.service_dir)
