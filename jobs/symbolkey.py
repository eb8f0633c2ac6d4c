"""The canonical form of a symbol file's key: the one rule the upload job, the missing-symbols
report, search and prune share.

A symbol file lives at ``<prefix>/<debug_file>/<DEBUG_ID>/<file_name>`` (Breakpad's layout,
Tecken's ``v1/xul.pdb/44E4EC8C2F41492B9369D6B9A059577C2/xul.sym``). Its consumers are
stackwalkers (Breakpad, rust-minidump) asking over HTTP, Windows symbol caches writing the
key's parts as directory and file names, the missing-symbols report and search matching ids.
So a key is canonical when:

- **the debug id** is 33 to 40 hexadecimal digits, uppercase: 32 digits of GUID or build id
  then the age (1 to 8 digits), as ``dump_syms`` writes it. Lowercase digits are *normalised*
  (uppercased), not refused: Tecken uppercases an id when it looks a file up, so a lowercase
  upload names the same file, and storing it under its own key would make two files of one
  (``44e4…`` beside ``44E4…``). Any other length or character is refused.
- **the debug file and the file name** are each 1 to :data:`MAX_PART_BYTES` bytes (the file
  name limit of ext4, XFS, APFS and NTFS), of ASCII letters, digits and the punctuation in
  :data:`KEY_PUNCTUATION` only; an inner space is allowed, a leading or trailing one is not
  (S3 consoles and most tools would show two keys as one); no trailing dot (Windows drops it:
  ``xul.pdb.`` is ``xul.pdb`` there), so no name of dots only; no ``:`` (an NTFS stream:
  ``xul.sym:stream`` writes to ``xul.sym``); no reserved device name (``CON``, ``PRN``,
  ``AUX``, ``NUL``, ``COM0``-``COM9``, ``LPT0``-``LPT9``, in any case, with any extension:
  ``NUL.sym`` opens the null device on Windows). Names keep their case: S3 and Tecken are
  case-sensitive, and ``XUL.pdb`` is a module name of its own.
- **the whole key**, prefix included, is at most :data:`MAX_KEY_BYTES` bytes (S3's limit).

Pure functions, no I/O; :class:`BadKey` names the rule broken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Punctuation allowed in a key part besides ASCII letters and digits: what debug file names
#: use, without S3's "characters to avoid" (``\\^`<>{}[]#%"'|``), the URL query characters
#: ``?&=;`` (a key is a download URL's path) and ``:`` (an NTFS stream). A space only inside.
KEY_PUNCTUATION = "!$()*+,-.@_~ "
#: Longest debug file or file name, in bytes (a part is ASCII: bytes are characters).
MAX_PART_BYTES = 255
#: Longest object key, prefix included (S3's limit).
MAX_KEY_BYTES = 1024
#: A debug id's length: 32 hex digits of GUID or build id, then the age (1-8 hex digits).
DEBUG_ID_LENGTHS = range(33, 41)
HEX_DIGITS = "0123456789ABCDEFabcdef"
#: Windows' reserved device names (with or without an extension, in any case).
RESERVED_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
    + [f"{port}{n}" for port in ("COM", "LPT") for n in range(10)]
)

RULE_LAYOUT = "name is not <debug_file>/<DEBUG_ID>/<file> nor an ignorable name"
RULE_CHARACTER = "character not allowed in a symbol key"
RULE_SPACE = "leading or trailing space in a symbol key part"
RULE_DEBUG_ID = "debug id is not 33-40 hexadecimal digits"
RULE_PART_LENGTH = f"symbol key part longer than {MAX_PART_BYTES} bytes"
RULE_KEY_LENGTH = f"symbol key longer than {MAX_KEY_BYTES} bytes"
RULE_TRAILING_DOT = "symbol key part ends with a dot (Windows drops it)"
RULE_RESERVED = "reserved Windows device name (CON, PRN, AUX, NUL, CONIN$, CONOUT$, COM0-9, LPT0-9)"

_CHAR = re.compile(rf"[A-Za-z0-9{re.escape(KEY_PUNCTUATION)}]")


class BadKey(ValueError):
    """A name is not a canonical symbol key: ``rule`` (one of the ``RULE_*`` texts) and
    ``detail`` (which part, which character) say why."""

    def __init__(self, rule: str, detail: str = "") -> None:
        self.rule = rule
        self.detail = detail
        super().__init__(rule + (f" ({detail})" if detail else ""))


@dataclass(frozen=True)
class SymbolKey:
    """A canonical key's three parts (the debug id uppercase)."""

    debug_file: str
    debug_id: str
    file_name: str

    @property
    def path(self) -> str:
        """``<debug_file>/<DEBUG_ID>/<file_name>``: the key without its prefix."""
        return f"{self.debug_file}/{self.debug_id}/{self.file_name}"

    def object_key(self, prefix: str) -> str:
        """The object's key under ``prefix`` (``v1``; slashes around it ignored)."""
        return join(prefix, self.path)


def join(prefix: str, path: str) -> str:
    """``path`` under ``prefix`` (``"v1/"`` and ``"v1"`` alike; an empty prefix: none)."""
    prefix = prefix.strip("/")
    return f"{prefix}/{path}" if prefix else path


def parse(name: str, prefix: str = "") -> SymbolKey:
    """The canonical key of ``name`` (``<debug_file>/<debug id>/<file_name>``, as an archive
    member or a key without its prefix), the debug id uppercased; ``prefix``: the one it will
    be stored under, counted in the key's length.

    Raises:
        BadKey: the name breaks a rule of this module's docstring (the first one found, in
            the order: characters, spaces, layout, debug id, lengths, dots, device names).
    """
    check_characters(name)
    parts = name.split("/")
    if len(parts) != 3 or not all(parts):
        raise BadKey(RULE_LAYOUT, f"{len(parts)} parts" if len(parts) != 3 else "an empty part")
    debug_file, debug_id, file_name = parts
    key = SymbolKey(debug_file, canonical_debug_id(debug_id), file_name)
    for label, part in (("debug file", debug_file), ("file name", file_name)):
        check_name(label, part)
    if len(join(prefix, key.path)) > MAX_KEY_BYTES:
        raise BadKey(RULE_KEY_LENGTH, f"{len(join(prefix, key.path))} bytes with the prefix")
    return key


def canonical_debug_id(text: str) -> str:
    """``text`` as a canonical debug id (uppercase).

    Raises:
        BadKey: it is not 33-40 hexadecimal digits.
    """
    if len(text) not in DEBUG_ID_LENGTHS or text.strip(HEX_DIGITS):
        shown = text if len(text) <= 48 else f"{text[:40]}… ({len(text)} characters)"
        raise BadKey(RULE_DEBUG_ID, repr(shown))
    return text.upper()


def is_debug_id(text: str) -> bool:
    """Whether ``text`` is a debug id in either case (:func:`canonical_debug_id` accepts it)."""
    return len(text) in DEBUG_ID_LENGTHS and not text.strip(HEX_DIGITS)


def check_name(label: str, part: str) -> None:
    """A debug file or file name (``label`` names which in the error): length, trailing dot,
    device name (its characters are checked by :func:`check_characters`).

    Raises:
        BadKey: it breaks one of them.
    """
    if len(part) > MAX_PART_BYTES:
        raise BadKey(RULE_PART_LENGTH, f"{label}: {len(part)} bytes")
    if part.endswith("."):
        raise BadKey(RULE_TRAILING_DOT, f"{label} {part!r}")
    if part.split(".", 1)[0].rstrip(" ").upper() in RESERVED_NAMES:
        raise BadKey(RULE_RESERVED, f"{label} {part!r}")


def check_characters(name: str) -> None:
    """Every character of ``name`` is ``/`` or in the key set (ASCII letters, digits,
    :data:`KEY_PUNCTUATION`), and no part starts or ends with a space.

    Raises:
        BadKey: naming the first character outside the set (code point and position), or
            the space rule.
    """
    for at, char in enumerate(name):
        if char != "/" and not _CHAR.fullmatch(char):
            raise BadKey(RULE_CHARACTER, f"U+{ord(char):04X} at {at}")
    if any(part != part.strip(" ") for part in name.split("/")):
        raise BadKey(RULE_SPACE)


def safe_part(text: str) -> str:
    """``text`` with each character outside the key set replaced by ``_``, no leading or
    trailing space or trailing dot, and at most :data:`MAX_PART_BYTES` bytes: a part that
    is always allowed (``_`` for an empty one; a device name gets a ``_`` in front)."""
    part = "".join(char if _CHAR.fullmatch(char) else "_" for char in text)
    part = part[:MAX_PART_BYTES].strip(" ").rstrip(".").strip(" ") or "_"
    try:
        check_name("part", part)
    except BadKey:
        part = f"_{part}"[:MAX_PART_BYTES]
    return part
