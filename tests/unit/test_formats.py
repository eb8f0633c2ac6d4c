"""crontabber.formats: the one format for times and for untrusted text on a terminal."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.formats import counted, one_line, printable, relative, short_span


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a\x1b[31mb", "a\\x1b[31mb"),  # C0 (ESC)
        ("bell\x07", "bell\\x07"),
        ("del\x7f", "del\\x7f"),
        ("csi\x9b2J", "csi\\x9b2J"),  # C1
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),  # bidi override
        ("iso\u2066late\u2069", "iso\\u2066late\\u2069"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("tab\tnl\n", "tab\\x09nl\\x0a"),
        ("plain é ∕ ｆ", "plain é ∕ ｆ"),  # printable characters are left alone
        (None, ""),
    ],
)
def test_printable_escapes_what_a_terminal_would_act_on(raw, shown):
    assert printable(raw) == shown


def test_one_line_joins_lines_then_escapes_what_is_left():
    assert one_line("a\n  b\x1b[2J\u2028c") == "a b\\x1b[2J c"


NOW = dt.datetime(2026, 11, 26, 14, 0, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (7020, "in 1h57m"),
        (-139, "2m19s ago"),
        (3600, "in 1h"),
        (-59.9, "59s ago"),
        (0.4, "now"),
        (-(2 * 86400 + 3 * 3600 + 59), "2d3h ago"),
        (-30 * 3600, "1d6h ago"),
    ],
)
def test_one_relative_time_two_units_at_most(seconds, shown):
    """The list's ``in 1h`` for 1h57m, nagios' ``(in 1 hour, 57 minutes)`` and the lease's
    ``139 s ago`` are one form now (trial #16)."""
    assert relative(NOW + dt.timedelta(seconds=seconds), NOW) == shown


def test_counts_have_proper_plurals():
    assert [counted(n, "time") for n in (1, 2)] == ["1 time", "2 times"]
    assert short_span(0) == "0s" and short_span(86400 + 59) == "1d"
