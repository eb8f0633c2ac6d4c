"""The configman converters crontabber apps pass as ``from_string_converter``."""

from __future__ import annotations

import importlib
from typing import Any

from everett.manager import parse_bool

__all__ = ["boolean_converter", "class_converter", "str_to_list", "to_str"]


def class_converter(value: Any) -> Any:
    """``'package.module.Name'`` -> the object it names (a class, usually)."""
    if not isinstance(value, str):
        return value
    module, _, name = value.rpartition(".")
    if not module:
        raise ValueError(f"{value!r} is not a dotted path")
    return getattr(importlib.import_module(module), name)


def str_to_list(value: Any, delimiter: str = ",") -> list[str]:
    """``'a, b ,c'`` -> ``['a', 'b', 'c']`` (empty items dropped)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    return [item.strip() for item in str(value).split(delimiter) if item.strip()]


def boolean_converter(value: Any) -> bool:
    return value if isinstance(value, bool) else parse_bool(str(value))


def to_str(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
