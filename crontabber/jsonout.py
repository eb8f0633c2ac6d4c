"""``--json`` output: one JSON document on stdout, the same shapes the
dashboard serves. Times are ISO 8601 in UTC (``2026-11-23T12:00:00Z``),
durations are seconds (float), absent values are ``null``."""

from __future__ import annotations

import datetime as dt
import enum
import json
from typing import Any, TextIO


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
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


def emit(value: Any, out: TextIO) -> None:
    """Print ``value`` as one JSON document."""
    out.write(dumps(value) + "\n")
