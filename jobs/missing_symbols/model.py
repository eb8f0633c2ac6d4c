"""What a missing-symbol event is: its fields, their validation, and the symbol hash.

Pure functions, no I/O. An event is a msgpack map with ``debug_file`` and
``debug_id`` (required strings), ``code_file`` and ``code_id`` (optional
strings; absent, nil and ``""`` all mean unknown), ``count`` (optional
positive int, default 1) and ``seen_at`` (optional epoch seconds or ISO-8601
string; default: the batch object's time). Unknown keys are ignored.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any, NoReturn

from jobs.symbolkey import BadKey, canonical_debug_id, is_debug_id

#: Longest accepted string field (Tecken's column width; longer values are junk).
MAX_FIELD_LENGTH = 150
#: Largest ``count`` a single event may carry.
MAX_EVENT_COUNT = 1_000_000_000
SECONDS_PER_DAY = 86400

FIELDS = ("debug_file", "debug_id", "code_file", "code_id")


class EventError(ValueError):
    """One event is invalid; ``kind`` is a short category, the message says why."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


@dataclass(frozen=True)
class Symbol:
    """The four identifying fields of a missing symbol."""

    debug_file: str
    debug_id: str
    code_file: str = ""
    code_id: str = ""

    @property
    def hash(self) -> str:
        return symbol_hash(self.debug_file, self.debug_id, self.code_file, self.code_id)


def symbol_hash(debug_file: str, debug_id: str, code_file: str, code_id: str) -> str:
    """MD5 (hex) of the four fields joined by NUL, which no valid field contains."""
    joined = "\0".join((debug_file, debug_id, code_file, code_id))
    return hashlib.md5(joined.encode("utf-8")).hexdigest()


def _check_string(name: str, value: Any, required: bool) -> None:
    if type(value) is not str:
        raise EventError("wrong type", f"{name} is {type(value).__name__}, not a string")
    if len(value) > MAX_FIELD_LENGTH:
        raise EventError(
            "oversized string", f"{name} has {len(value)} characters (at most {MAX_FIELD_LENGTH})"
        )
    if not value.isprintable():  # no control characters (PostgreSQL text cannot hold NUL)
        raise EventError("wrong type", f"{name} contains a control or unprintable character")
    if required and not value:
        raise EventError("missing key", f"{name} is empty")


def validate_symbol(item: Any) -> tuple[str, str, str, str]:
    """The identifying fields of a decoded event, checked, the debug id in its canonical
    form (uppercase: :mod:`jobs.symbolkey`, the rule symbol files are stored by).

    Raises:
        EventError: the item is not a map, lacks ``debug_file``/``debug_id``, or a
            field has the wrong type, is too long, or the debug id is not hex.
    """
    if type(item) is dict:  # the common, valid case in a few operations
        debug_file, debug_id = item.get("debug_file"), item.get("debug_id")
        code_file, code_id = item.get("code_file"), item.get("code_id")
        code_file = "" if code_file is None else code_file  # 0 or [] must stay wrong
        code_id = "" if code_id is None else code_id
        if (
            type(debug_file) is str
            and type(debug_id) is str
            and type(code_file) is str
            and type(code_id) is str
            and 0 < len(debug_file) <= MAX_FIELD_LENGTH
            and len(code_file) <= MAX_FIELD_LENGTH
            and len(code_id) <= MAX_FIELD_LENGTH
            and is_debug_id(debug_id)
            and (debug_file + code_file + code_id).isprintable()
        ):
            return debug_file, debug_id.upper(), code_file, code_id
    _explain(item)


def _explain(item: Any) -> NoReturn:
    """Raise the EventError that says what is wrong with ``item``."""
    if type(item) is not dict:
        raise EventError("wrong type", f"event is {type(item).__name__}, not a map")
    try:
        debug_file, debug_id = item["debug_file"], item["debug_id"]
    except KeyError as exc:
        raise EventError("missing key", f"no {exc.args[0]}") from None
    for name, value, required in (
        ("debug_file", debug_file, True),
        ("debug_id", debug_id, True),
        ("code_file", item.get("code_file", ""), False),
        ("code_id", item.get("code_id", ""), False),
    ):
        _check_string(name, "" if value is None else value, required)
    try:
        canonical_debug_id(debug_id)
    except BadKey:
        raise EventError(
            "invalid debug id", f"debug_id {debug_id!r} is not 33-40 hex digits"
        ) from None
    raise AssertionError(f"validate_symbol refused a valid event: {item!r}")


def check_count(value: Any) -> int:
    """A valid ``count``. Raises EventError otherwise."""
    if type(value) is not int:
        raise EventError("wrong type", f"count is {type(value).__name__}, not an integer")
    if not 1 <= value <= MAX_EVENT_COUNT:
        raise EventError("wrong type", f"count {value} is not between 1 and {MAX_EVENT_COUNT}")
    return value


def parse_seen_at(value: Any) -> float:
    """``seen_at`` as epoch seconds: a number, or an ISO-8601 string (UTC when no offset).

    Raises:
        EventError: any other type, an unparseable string, or a time before 2000 or
            after 2100 (a sign of milliseconds or garbage).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise EventError("wrong type", f"seen_at is {type(value).__name__}")
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise EventError("wrong type", f"seen_at {value[:40]!r} is not ISO-8601") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        seconds = when.timestamp()
    else:
        seconds = float(value)
    if not 946684800 <= seconds < 4102444800:
        raise EventError("wrong type", f"seen_at {value!r} is not between 2000 and 2100")
    return seconds


def day_of(seconds: float) -> int:
    """Days since the epoch (UTC) of an epoch time."""
    return int(seconds // SECONDS_PER_DAY)
