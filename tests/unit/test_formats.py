"""crontabber.formats: the one format for times and for untrusted text on a terminal."""

from __future__ import annotations

import pytest

from crontabber.formats import one_line, printable


@pytest.mark.parametrize("raw, shown", [
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
])
def test_printable_escapes_what_a_terminal_would_act_on(raw, shown):
    assert printable(raw) == shown


def test_one_line_joins_lines_then_escapes_what_is_left():
    assert one_line("a\n  b\x1b[2J\u2028c") == "a b\\x1b[2J c"
