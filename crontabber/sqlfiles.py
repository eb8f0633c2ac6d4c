"""Named SQL blocks, loaded from the project's one ``sql/`` directory: ``sql/crontabber/``
(the runner's: :data:`SQL_DIR`), ``sql/jobs/``, ``sql/dashboard/``, ``sql/faults/``, each
named by :func:`directory`.

A file holds blocks that each start with ``-- name: NAME``; the text up to the
next such line is the query, without its whole-line comments: psycopg2 fills
``%(name)s`` in comments too, and a value with a newline would end the comment
and become SQL. The runner's store and each job's store module
read their SQL through :func:`load`, so no Python module builds SQL strings.
"""

from __future__ import annotations

import functools
import os
import re

# os.path, not pathlib: every cron tick imports this module, and pathlib (with
# urllib.parse and ipaddress) costs ~5 ms of an idle tick's import time.
# The top-level sql/ beside the packages: in a checkout, and in an installed wheel, which ships it
# as the data of the namespace `sql` beside `crontabber` (pyproject.toml). Not importlib.resources,
# which costs an idle tick its imports (a zipped install is not supported).
SQL_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "sql")


def directory(part: str) -> str:
    """``sql/<part>``: the SQL of one part of the project (``crontabber``, ``jobs``,
    ``dashboard``, ``faults``): its named queries and, for a schema, ``schema.sql`` and
    ``migrations/``."""
    return os.path.join(SQL_ROOT, part)


#: The runner's SQL and schema.
SQL_DIR = directory("crontabber")

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split ``text`` into ``{name: query}``.

    Raises:
        ValueError: on a duplicated block name.
    """
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in queries:
            raise ValueError(f"duplicate query name {name!r}")
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip()
    return queries


@functools.cache
def load(filename: str, directory: str = SQL_DIR) -> dict[str, str]:
    """The named queries of ``<directory>/<filename>`` (the runner's ``sql/`` by default),
    read once per process."""
    with open(os.path.join(directory, filename), encoding="utf-8") as file:
        return parse(file.read())
