"""``--json`` output: one JSON document on stdout, the same shapes the
dashboard serves. Times are ISO 8601 in UTC (``2026-11-23T12:00:00Z``),
durations are seconds (float), absent values are ``null``, and so is the end of a pause
that has none (PostgreSQL's ``infinity``: ``on_breach = pause``)."""

from __future__ import annotations

import datetime as dt
import enum
import json
from typing import Any, TextIO


def _default(value: Any) -> Any:
    """``value`` in a JSON type (the conventions above).

    Raises:
        TypeError: a value of no such convention.
    """
    if isinstance(value, dt.datetime):
        if value.replace(tzinfo=None) == dt.datetime.max:  # infinity: a pause until resumed
            return None
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="seconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def dumps(value: Any) -> str:
    """``value`` as JSON text (see the module docstring for the conventions)."""
    return json.dumps(value, default=_default, indent=1)


def stored(value: Any) -> str:
    """``value`` as compact JSON for a database column (an alert's ``detail``), with the same
    conventions; a value of another type is written as its text, never refused (what is
    stored must not stop a tick)."""

    def default(item: Any) -> Any:
        try:
            return _default(item)
        except TypeError:
            return str(item)

    return json.dumps(value, default=default)


def time_text(moment: dt.datetime) -> str:
    """A time as ``--json`` writes it: ``2026-11-23T12:00:00Z``."""
    return str(_default(moment))


def emit(value: Any, out: TextIO) -> None:
    """Print ``value`` as one JSON document."""
    out.write(dumps(value) + "\n")
