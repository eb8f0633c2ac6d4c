"""How every command writes a time and a message: one format each.

Used by the runner's tables and the job commands (exported by :mod:`crontabber`).
"""

from __future__ import annotations

import datetime as dt


def utc_text(moment: dt.datetime | None) -> str:
    """``2026-11-23 12:00:00 UTC`` (``-`` for none): the one time format of the commands."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def one_line(text: str | None) -> str:
    """A message on one line: a traceback-like text keeps its words, not its breaks."""
    return " ".join((text or "").split())
