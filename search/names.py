"""Splitting symbol names into searchable parts, on the client.

This Elasticsearch has no pattern, ngram or word-delimiter tokenizer, and the
``standard`` tokenizer keeps ``xul.pdb`` as one token. So names are split here,
before indexing and before searching, into lower-case alphanumeric runs:
``libxul.so.dbg`` -> ``libxul so dbg``. The same function serves documents and
queries, so the two always agree.

Letters and digits of any script are word characters (``xül.pdb`` -> ``xül
pdb``), with the combining marks that belong to them; names are put in NFC
first, so a decomposed ``ü`` (u + U+0308) is the same word as a composed one.
Everything else (punctuation, spaces, symbols, ``_``) separates. The
``standard`` analyzer keeps such words whole (Unicode word boundaries), so
Elasticsearch sees the same words.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_ASCII_SEPARATORS = re.compile(r"[^0-9a-z]+")
_WORD_CATEGORIES = ("L", "N", "M")  # letters, numbers, combining marks
# A debug id is 33 hex digits (a GUID + age, or a build id + 0); a code id is
# 8 or more hex digits (a timestamp+size on Windows, a build id elsewhere).
_HEX_ID = re.compile(r"^[0-9a-fA-F]{8,64}$")


def name_parts(name: str) -> list[str]:
    """The lower-case alphanumeric runs of ``name``, in order.

    >>> name_parts("libxul.so.dbg")
    ['libxul', 'so', 'dbg']
    >>> name_parts("api-ms-win-core-synch-l1-2-0.dll")
    ['api', 'ms', 'win', 'core', 'synch', 'l1', '2', '0', 'dll']
    >>> name_parts("XÜL.pdb")
    ['xül', 'pdb']
    """
    if name.isascii():  # nearly every name: one regex split, as fast as before
        return [part for part in _ASCII_SEPARATORS.split(name.lower()) if part]
    return _unicode_parts(unicodedata.normalize("NFC", name).lower())


def _unicode_parts(text: str) -> list[str]:
    """The words of ``text`` (already lower case), by Unicode category: a
    character-class regex cannot say "any letter or mark" in the standard library."""
    parts: list[str] = []
    word: list[str] = []
    for char in text:
        if char.isascii():
            inside = char.isalnum()
        else:
            inside = unicodedata.category(char)[0] in _WORD_CATEGORIES
        if inside:
            word.append(char)
        elif word:
            parts.append("".join(word))
            word = []
    if word:
        parts.append("".join(word))
    return parts


@functools.lru_cache(maxsize=65536)  # a name recurs once per debug id in a rebuild
def split_name(name: str) -> str:
    """``name`` as space-separated parts (``xul.pdb`` -> ``xul pdb``); '' for no parts."""
    return " ".join(name_parts(name))


@functools.lru_cache(maxsize=65536)
def joined_name(name: str) -> str:
    """``name``'s parts joined into one word (``libxul.so`` -> ``libxulso``)."""
    return "".join(name_parts(name))


def looks_like_id(text: str) -> bool:
    """True when ``text`` could be a debug id or a code id (8-64 hex digits)."""
    return bool(_HEX_ID.match(text.strip()))


def symbol_filename(debug_file: str) -> str:
    """The ``.sym`` file name of a debug file, as the symbol server stores it:
    ``xul.pdb`` -> ``xul.sym``, ``libxul.so`` -> ``libxul.so.sym``."""
    stem = debug_file[:-4] if debug_file.lower().endswith(".pdb") else debug_file
    return f"{stem}.sym"
