"""The layout of the local services that ``scripts/services.sh`` provisions, for Python code:
ports, addresses, directories and pid files. Tests, benchmarks, the fault runs and the
differential suite import it; nothing else in the repository repeats a port or a path.

``scripts/services.sh`` (bash, run as root) stays the provisioner: it starts the services and
writes ``$SYMBOLS_STATE_DIR/env`` (default ``<repo>/.services/env``), ``export NAME=value``
lines. Everything here is read from that file, overlaid by the process environment (a
variable set in the environment wins), with the script's defaults when neither says;
``tests/unit/test_devservices.py`` checks that the defaults are the script's. Not part of the
installed package (development only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent

#: scripts/services.sh's default ports (``SYMBOLS_PG_PORT``, ``SYMBOLS_ES_PORT``,
#: ``SYMBOLS_S3_PORT``, ``SYMBOLS_PGB_PORT``: PgBouncer in front of PostgreSQL).
DEFAULT_PORTS = {"pg": 54329, "es": 9201, "s3": 9444, "pgb": 54339}
#: scripts/services.sh's database, role and S3 credentials (local development only).
DEFAULT_DATABASE = {"user": "crontabber", "password": "crontabber", "dbname": "crontabber"}
DEFAULT_S3_KEYS = ("symbols", "symbols-secret")


def state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where services.sh keeps what root uses: the env file, s3proxy's data, caches, the
    fault runs' results (``SYMBOLS_STATE_DIR``, default ``<repo>/.services``)."""
    return Path(environ.get("SYMBOLS_STATE_DIR") or REPO / ".services")


def env_file(environ: Mapping[str, str] = os.environ) -> Path:
    return state_dir(environ) / "env"


def read_env_file(path: Path) -> dict[str, str]:
    """The ``export NAME=value`` lines of an env file (``{}`` when there is none)."""
    values: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip().removeprefix("export ")
            if "=" in line and not line.startswith("#"):
                name, _, value = line.partition("=")
                values[name.strip()] = value.strip().strip("'\"")
    return values


def environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The env file's values under the process environment's (which wins)."""
    return {**read_env_file(env_file(environ)), **environ}


@dataclass(frozen=True)
class Services:
    """The addresses and places of one set of local services."""

    env: Mapping[str, str]

    @classmethod
    def current(cls, environ: Mapping[str, str] = os.environ) -> "Services":
        """The services the env file and the environment point at."""
        return cls(environment(environ))

    # ------------------------------------------------------------- addresses
    @property
    def pg_host(self) -> str:
        return self.env.get("RESOURCE_POSTGRESQL_HOST", "127.0.0.1")

    @property
    def pg_port(self) -> int:
        return int(self.env.get("RESOURCE_POSTGRESQL_PORT", DEFAULT_PORTS["pg"]))

    @property
    def pgb_port(self) -> int:
        """PgBouncer's port (transaction pooling, in front of the same PostgreSQL)."""
        return int(self.env.get("SYMBOLS_PGB_PORT", DEFAULT_PORTS["pgb"]))

    def pgbouncer_stats(self) -> dict[str, dict[str, int]]:
        """PgBouncer's ``SHOW STATS``, by database name: the proof that traffic went through
        it (``total_xact_count``, ``total_query_count``, ...)."""
        import psycopg2

        conn = psycopg2.connect(
            host=self.pg_host,
            port=self.pgb_port,
            dbname="pgbouncer",
            user=self.database()["user"],
            password=self.database()["password"],
        )
        conn.autocommit = True  # the admin console takes no BEGIN
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW STATS")
                names = [column.name for column in cur.description or ()]
                return {row[0]: dict(zip(names[1:], row[1:])) for row in cur.fetchall()}
        finally:
            conn.close()

    @property
    def es_url(self) -> str:
        return self.env.get("ES_URL", f"http://127.0.0.1:{DEFAULT_PORTS['es']}")

    @property
    def es_port(self) -> int:
        return urlsplit(self.es_url).port or DEFAULT_PORTS["es"]

    @property
    def s3_endpoint(self) -> str:
        return self.env.get("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{DEFAULT_PORTS['s3']}")

    @property
    def s3_port(self) -> int:
        return urlsplit(self.s3_endpoint).port or DEFAULT_PORTS["s3"]

    def database(self, dbname: str | None = None) -> dict[str, Any]:
        """libpq keywords of database ``dbname`` (default: the env's) on the local PostgreSQL."""
        return {
            "host": self.pg_host,
            "port": self.pg_port,
            "user": self.env.get("RESOURCE_POSTGRESQL_USER", DEFAULT_DATABASE["user"]),
            "password": self.env.get("RESOURCE_POSTGRESQL_PASSWORD", DEFAULT_DATABASE["password"]),
            "dbname": dbname
            or self.env.get("RESOURCE_POSTGRESQL_DBNAME", DEFAULT_DATABASE["dbname"]),
        }

    def script_ports(self) -> dict[str, str]:
        """services.sh's port settings for these services (so a restart keeps their ports)."""
        return {
            "SYMBOLS_PG_PORT": str(self.pg_port),
            "SYMBOLS_ES_PORT": str(self.es_port),
            "SYMBOLS_S3_PORT": str(self.s3_port),
            "SYMBOLS_PGB_PORT": str(self.pgb_port),
        }

    # ----------------------------------------------------------------- places
    @property
    def state_dir(self) -> Path:
        return state_dir(self.env)

    @property
    def service_dir(self) -> Path:
        """PostgreSQL's and Elasticsearch's directories (outside the checkout: their OS users
        must reach them), as the env file names it (``SYMBOLS_SERVICE_DIR``).

        Raises:
            RuntimeError: the env file does not name it (services.sh has not run).
        """
        # From the state dir's own env file, never the process environment: a second
        # checkout's services (tests/cli/test_services_sh.py) run under the first one's.
        named = read_env_file(env_file(self.env)).get("SYMBOLS_SERVICE_DIR")
        if not named:
            raise RuntimeError(
                f"{env_file(self.env)} does not name SYMBOLS_SERVICE_DIR: run scripts/services.sh "
                "start"
            )
        return Path(named)

    @property
    def pg_data(self) -> Path:
        return self.service_dir / "pg" / "data"

    @property
    def s3_data(self) -> Path:
        """s3proxy's filesystem backend: one directory per bucket."""
        return self.state_dir / "s3" / "data"

    @property
    def s3proxy_pid_file(self) -> Path:
        return self.state_dir / "s3" / "run" / "s3proxy.pid"

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / "cache"


def current(environ: Mapping[str, str] = os.environ) -> Services:
    """:meth:`Services.current`."""
    return Services.current(environ)
