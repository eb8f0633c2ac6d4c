"""How every command writes a time and a message: one format each.

Used by the runner's tables and the job commands (exported by :mod:`crontabber`).
"""

from __future__ import annotations

import datetime as dt
import re


def utc_text(moment: dt.datetime | None) -> str:
    """``2026-11-23 12:00:00 UTC`` (``-`` for none): the one time format of the commands."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def one_line(text: str | None) -> str:
    """A message on one line: a traceback-like text keeps its words, not its breaks; the
    control characters left are escaped (:func:`printable`)."""
    return printable(" ".join((text or "").split()))


# C0, DEL, C1; the Unicode bidi embeddings, overrides, isolates and marks; the line and
# paragraph separators: what can move the cursor, recolour or reorder a terminal's text
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                     "\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str | None) -> str:
    """``text`` safe for a terminal: each control character (C0 including tab and newline,
    DEL, C1), bidi control and line/paragraph separator as ``\\xHH`` or ``\\uHHHH``; other
    characters unchanged. For every human output that shows data from uploaders or batch
    writers (file names, keys, error messages); JSON output escapes on its own."""
    return _UNSAFE.sub(_escape, text or "")
