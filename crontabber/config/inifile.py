"""Reading ``crontabber.ini``: configobj's format, errors in one line.

crontabber 0.18 read its INI file through configman and configobj: nested
sections are ``[[...]]``, multi-line values use ``'''``, and a section name may
be a dotted path (``[resource.postgresql]`` means ``[resource]``/``[[postgresql]]``).
This module parses the file once and keeps every value with its option path,
so the same parse serves value look-ups (:class:`IniSource`, an everett
source) and the strict check of names (:mod:`crontabber.config.names`). The parse
is kept between ticks while the file is unchanged (:mod:`crontabber.config.inicache`):
a tick that finds it imports no configobj.
"""

from __future__ import annotations

import os
import re

from ..errors import ConfigurationError
from ..frozen import Frozen
from . import inicache
from .options import NO_VALUE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

    from configobj import Section

_AT_LINE = re.compile(r"\s*at line \d+\.?$")
_QUOTED_LINE = re.compile(r"\('\s+")


class IniValue(Frozen):
    """One ``key=value`` of the file: its option path, as spelled in the file."""

    path: tuple[str, ...]
    name: str
    value: str

    @property
    def dotted(self) -> str:
        return ".".join([*self.path, self.name])


class IniFile:
    """A parsed INI file: every value with its path.

    Raises:
        ConfigurationError: ``in FILE line N: ...`` for a syntax error, or
            naming the file when it cannot be read.
    """

    def __init__(self, path: str, cached: bool = True) -> None:
        """``cached``: a parse kept by :mod:`.inicache` may stand for the file (False: the
        file is parsed, and nothing is kept: ``--configtest``)."""
        self.path = path
        where, directory = os.path.abspath(path), inicache.cache_dir() if cached else None
        try:
            key: tuple[int, ...] | None = inicache.file_key(path)
            if not inicache.usable_for(path):  # another user's file: never from a cache
                key = None
        except OSError:
            key = None  # _parse says why
        kept = inicache.load(directory, where, key) if key is not None else None
        if kept is None:
            root = _parse(path)
            self.values = tuple(_flatten(root, ()))
            self.sections = tuple(".".join(p) for p in _section_paths(root, ()))
            if key is not None:
                values = tuple((v.path, v.name, v.value) for v in self.values)
                inicache.save(directory, where, key, (values, self.sections))
        else:
            self.values = tuple(IniValue(*value) for value in kept[0])
            self.sections = kept[1]
        # Look-ups ignore case, as everett's INI source did before this one.
        self._by_key = {_key(v.path, v.name): v.value for v in self.values}

    def get(self, path: tuple[str, ...], name: str) -> Any:
        """The value set for ``path.name``, or ``NO_VALUE``."""
        return self._by_key.get(_key(path, name), NO_VALUE)


def _key(path: tuple[str, ...], name: str) -> tuple[str, ...]:
    return tuple(part.lower() for part in (*path, name))


def _parse(path: str) -> Section:
    from configobj import ConfigObj, ConfigObjError

    try:
        # No interpolation: ``%(asctime)s`` in a log format is text, not a reference.
        return ConfigObj(path, list_values=False, interpolation=False, file_error=True)
    except ConfigObjError as exc:
        # Several errors: configobj lists them; the first one is the one to fix.
        first = exc.errors[0] if getattr(exc, "errors", None) else exc
        line = getattr(first, "line_number", None)
        message = _QUOTED_LINE.sub("('", _AT_LINE.sub("", str(getattr(first, "msg", first))))
        text = str(getattr(first, "line", "") or "").strip()
        if text and text not in message:
            message = f"{message}: {text!r}"
        where = f"{path} line {line}" if line else path
        raise ConfigurationError(where, message) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(path, f"cannot read it: {exc}") from None


def _flatten(section: Section, prefix: tuple[str, ...]) -> Iterator[IniValue]:
    """Every value under ``section``; a dotted section name is a path."""
    for key in section.scalars:
        yield IniValue(prefix, key, section[key])
    for key in section.sections:
        yield from _flatten(section[key], prefix + tuple(key.split(".")))


def _section_paths(section: Section, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for key in section.sections:
        path = prefix + tuple(key.split("."))
        yield path
        yield from _section_paths(section[key], path)


class IniSource:
    """everett source over an :class:`IniFile` (or none: every key missing)."""

    def __init__(self, ini: IniFile | None) -> None:
        self._ini = ini

    def get(self, key: str, namespace: list[str] | None = None) -> Any:
        if self._ini is None:
            return NO_VALUE
        return self._ini.get(tuple(namespace or ()), key)
