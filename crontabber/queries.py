"""Named SQL blocks loaded from the ``sql/`` directory.

A file holds blocks that each start with ``-- name: NAME``; the text up to the
next such line is the query. The runner's store and each job's store module
read their SQL through :func:`load`, so no Python module builds SQL strings.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"

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
        queries[name] = body.strip()
    return queries


@functools.cache
def load(filename: str) -> dict[str, str]:
    """The named queries of ``sql/<filename>``, read once per process."""
    return parse((SQL_DIR / filename).read_text())
