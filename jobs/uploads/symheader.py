"""A Breakpad ``.sym`` file's header, and whether it matches the file's key.

A ``.sym`` file starts ``MODULE <os> <arch> <DEBUG_ID> <debug_file>`` (the debug file may
hold spaces: ``Google Chrome Framework``), then ``INFO`` records, among them
``INFO CODE_ID <code_id> [<code_file>]`` (Windows: the image's timestamp and size and its
``.dll``/``.exe`` name; ELF: the build id). A stackwalker trusts the key, so a file whose
header names another module or id is refused: published, it would symbolicate the wrong
module's frames. Only the first lines are read (the verify pass keeps the first
:data:`HEAD_BYTES` of each member as it streams it; nothing more is loaded).

Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.symbolkey import HEX_DIGITS, SymbolKey

from .errors import Rejected

#: Bytes of a member kept by the verify pass for its header: a MODULE line (debug file up to
#: 255 bytes) and the INFO records after it fit many times over.
HEAD_BYTES = 8192
RULE_NO_MODULE = "not a Breakpad symbol file (its first line is not a MODULE record)"
RULE_MISMATCH = "the MODULE record does not match the file's path"


@dataclass(frozen=True)
class Header:
    """What a ``.sym`` file's first lines say: its MODULE record's debug id (uppercase) and
    debug file, and its ``INFO CODE_ID`` record's code id and code file (None when absent)."""

    debug_id: str
    debug_file: str
    code_id: str | None = None
    code_file: str | None = None


def is_symbol_file(file_name: str) -> bool:
    """Whether a key's file name is a Breakpad text symbol file (``.sym``, any case)."""
    return file_name.lower().endswith(".sym")


def parse(head: bytes, whole: bool = False) -> Header | None:
    """The header of a ``.sym`` file starting with ``head`` (``whole``: ``head`` is the whole
    file, so its last line is complete), or None when its first line is not a well-formed
    MODULE record (five fields, the id hexadecimal)."""
    lines = head.split(b"\n")
    first = lines[0].rstrip(b"\r").decode("utf-8", "replace")
    fields = first.split(" ", 4)
    if (
        len(fields) != 5
        or fields[0] != "MODULE"
        or not fields[4]
        or not fields[3]
        or fields[3].strip(HEX_DIGITS)
    ):
        return None
    code_id = code_file = None
    for line in lines[1:] if whole else lines[1:-1]:  # (a cut last piece is never read)
        text = line.rstrip(b"\r").decode("utf-8", "replace")
        if not text.startswith("INFO "):
            break  # the INFO records come right after MODULE
        parts = text.split(" ", 3)
        if len(parts) >= 3 and parts[1] == "CODE_ID":
            code_id = parts[2] or None
            code_file = parts[3] if len(parts) == 4 and parts[3] else None
    return Header(fields[3].upper(), fields[4], code_id, code_file)


def check(member: str, key: SymbolKey, head: bytes, whole: bool) -> Header | None:
    """The header of member ``member`` (canonical key ``key``, first bytes ``head``;
    ``whole``: they are all of it) when it is a ``.sym`` file, checked against its key; None
    for any other file.

    Raises:
        Rejected: a ``.sym`` file without a MODULE record, or whose debug id or debug file
            differ from the key's (naming the header's values and the path's).
    """
    if not is_symbol_file(key.file_name):
        return None
    header = parse(head, whole)
    if header is None:
        first = head.split(b"\n", 1)[0][:80].decode("utf-8", "replace")
        raise Rejected(RULE_NO_MODULE, member, f"first line {first!r}")
    if (header.debug_id, header.debug_file) != (key.debug_id, key.debug_file):
        raise Rejected(
            RULE_MISMATCH,
            member,
            f"header: debug file {header.debug_file!r}, debug id {header.debug_id}; "
            f"path: debug file {key.debug_file!r}, debug id {key.debug_id}",
        )
    return header
