"""crontabber.sqlfiles: named blocks, whole-line comments dropped (psycopg2 fills
%(name)s in a comment too, and a value with a newline became SQL: the run ledger's
heartbeat, whose captured output has newlines, failed with a syntax error)."""

import pytest

from crontabber import sqlfiles


def test_blocks_are_split_and_comment_lines_dropped():
    parsed = sqlfiles.parse(
        "-- name: one\n-- uses %(x)s\nSELECT %(x)s;  -- kept\n\n-- name: two\n  -- indented "
        "comment\nSELECT 2;\n"
    )
    assert parsed == {"one": "SELECT %(x)s;  -- kept", "two": "SELECT 2;"}


def test_a_duplicate_name_is_refused():
    with pytest.raises(ValueError, match="duplicate query name 'one'"):
        sqlfiles.parse("-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n")


def test_no_loaded_query_keeps_a_comment_line():
    import os

    from dashboard.store import SQL_DIR as DASHBOARD_SQL
    from jobs import SQL_DIR as JOBS_SQL

    for directory in (sqlfiles.SQL_DIR, JOBS_SQL, DASHBOARD_SQL):
        for filename in sorted(os.listdir(directory)):
            if not filename.endswith(".sql") or filename == "schema.sql":
                continue
            for name, text in sqlfiles.load(filename, directory).items():
                assert not any(line.lstrip().startswith("--") for line in text.splitlines()), name
