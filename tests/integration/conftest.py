"""The ``crontab`` fixture: a configured runner over a fresh database."""
from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import psycopg2.extras
import pytest

from crontabber import cli
from crontabber.state import JobState
from crontabber.store import DatabaseSettings, connect

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
JOBS = "tests.fixtures.sample_jobs"


class Crontab:
    """Write a crontabber.ini, run the CLI in-process, inspect the database."""

    def __init__(self, database: DatabaseSettings, tmp_path: Path, monkeypatch: Any) -> None:
        self.database = database
        self.ini = tmp_path / "crontabber.ini"
        for name, value in (("HOST", database.host), ("PORT", database.port),
                            ("DBNAME", database.dbname), ("USER", database.user),
                            ("PASSWORD", database.password)):
            monkeypatch.setenv(f"RESOURCE_POSTGRESQL_{name}", str(value))
        self.conn = connect(database)
        self.conn.autocommit = True
        self.sql((FIXTURES / "sample_jobs.sql").read_text())
        self.configure([])

    def configure(self, jobs: list[str], extra: str = "", error_retry_time: int = 300) -> None:
        lines = "\n".join(f"    {JOBS}.{job}" if "." not in job.split("|")[0] else f"    {job}"
                          for job in jobs)
        self.ini.write_text(
            f"[crontabber]\n    error_retry_time={error_retry_time}\n"
            f"    jobs='''\n{lines}\n    '''\n{extra}"
        )

    def run(self, *args: str) -> tuple[int, str]:
        out = io.StringIO()
        code = cli.main([f"--admin.conf={self.ini}", *args], stdout=out, stderr=out)
        return int(code), out.getvalue()

    def sql(self, query: str, params: Any = None) -> list[dict]:
        with self.conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

    def state(self, app_name: str) -> JobState | None:
        rows = self.sql("SELECT * FROM crontabber WHERE app_name = %s", (app_name,))
        return JobState.from_row(rows[0]) if rows else None

    def calls(self, app_name: str | None = None) -> list[dict]:
        if app_name is None:
            return self.sql("SELECT app_name, day FROM test_job_calls ORDER BY id")
        return self.sql("SELECT app_name, day FROM test_job_calls WHERE app_name = %s ORDER BY id",
                        (app_name,))

    def log(self, app_name: str) -> list[dict]:
        return self.sql("SELECT * FROM crontabber_log WHERE app_name = %s ORDER BY id", (app_name,))

    def wind(self, delta: dt.timedelta, app_name: str | None = None) -> None:
        """Move state timestamps into the past, as if ``delta`` had elapsed."""
        self.sql(
            "UPDATE crontabber SET next_run = next_run - %(d)s, first_run = first_run - %(d)s,"
            " last_run = last_run - %(d)s, last_success = last_success - %(d)s,"
            " ongoing = ongoing - %(d)s WHERE %(app)s::text IS NULL OR app_name = %(app)s",
            {"d": delta, "app": app_name},
        )

    def now(self) -> dt.datetime:
        return self.sql("SELECT clock_timestamp() AS now")[0]["now"]


@pytest.fixture
def crontab(database: DatabaseSettings, tmp_path: Path, monkeypatch: Any) -> Any:
    tab = Crontab(database, tmp_path, monkeypatch)
    yield tab
    tab.conn.close()
