"""Migrations are expand steps: none breaks the code one release back, which keeps running on
the hosts not yet upgraded during a rolling deploy (docs/deploy.md). A statement that removes
or changes what older code reads or writes (dropping or renaming a table or column, changing a
column's type, a new NOT NULL) is a contract step: allowed only in a migration that says, in a
``-- contract:`` line, which release's code stopped using what it removes (a release after
the one that stopped, so that no host still runs code that uses it)."""

import re

import pytest

from crontabber.schema import migrations
from crontabber.sqlfiles import SQL_DIR
from jobs import SQL_DIR as JOBS_SQL

CONTRACT = re.compile(
    r"""\b(DROP\s+TABLE|DROP\s+COLUMN|RENAME|ALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE|
                          SET\s+NOT\s+NULL|DROP\s+VIEW|DROP\s+FUNCTION)\b""",
    re.I | re.X,
)


def contract_statements(sql: str) -> list[str]:
    """The contract statements of a migration's text (comments left out)."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return [match.group(0) for match in CONTRACT.finditer(code)]


@pytest.mark.parametrize("migration", migrations(SQL_DIR, JOBS_SQL), ids=lambda m: m.name)
def test_a_migration_is_an_expand_step_or_says_it_contracts(migration):
    with open(migration.path, encoding="utf-8") as file:
        sql = file.read()
    found = contract_statements(sql)
    assert not found or re.search(r"^-- contract: .{20,}", sql, re.M), (
        f"{migration.name} removes or changes what older code uses ({', '.join(found)}): "
        "split it (expand now; contract in a later release, with a '-- contract:' line)"
    )


def test_the_check_finds_contract_statements():
    assert contract_statements("ALTER TABLE t DROP COLUMN c;") == ["DROP COLUMN"]
    assert contract_statements("ALTER TABLE t ALTER COLUMN c TYPE bigint;")
    assert contract_statements("ALTER TABLE t ALTER COLUMN c SET NOT NULL;") == ["SET NOT NULL"]
    assert contract_statements("ALTER TABLE t RENAME TO u;") == ["RENAME"]
    assert contract_statements("-- we never DROP TABLE here\nALTER TABLE t ADD COLUMN c int;") == []
