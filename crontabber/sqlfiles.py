"""Named SQL blocks loaded from a package's ``sql/`` directory (the runner's:
:data:`SQL_DIR`; the jobs and the dashboard have their own, shipped in their packages).

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
# Package data (pyproject.toml), found beside this module as an installed package's files are;
# not importlib.resources, which costs an idle tick its imports (a zipped install is not supported).
SQL_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "sql")

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
