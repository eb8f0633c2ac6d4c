"""Streaming decode of a batch and in-memory aggregation per (symbol, day).

Pure apart from msgpack: bytes in, counts out. Memory is bounded by the
distinct (symbol, day) keys of what is aggregated, never by the number of
events: ``msgpack.Unpacker`` is fed chunk by chunk and each event is folded
into a dict at once.

A batch is all or nothing: the first invalid event (or malformed byte) makes
:func:`aggregate_batch` raise :class:`BadBatch` and the caller drops that
batch's partial counts (see docs/jobs/missing_symbols.md, "Bad batches").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from crontabber.errors import CrontabberError

from .model import (MAX_EVENT_COUNT, EventError, check_count, day_of, parse_seen_at,
                    validate_symbol)

#: (debug_file, debug_id, code_file, code_id, day since epoch)
Key = tuple[str, str, str, str, int]
#: [count, first seen (epoch s), last seen (epoch s)]
Entry = list[Any]

#: Largest encoded event accepted; a bigger one makes the batch "oversized event".
MAX_EVENT_BYTES = 64 * 1024


class BadBatch(CrontabberError):
    """A batch that cannot be counted: ``kind`` (a short category, e.g.
    ``malformed msgpack``), ``detail``, and ``event`` (1-based index of the event
    at fault, 0 when it is the stream itself)."""

    def __init__(self, kind: str, detail: str, event: int = 0) -> None:
        self.kind = kind
        self.detail = detail
        self.event = event
        where = f"event {event}: " if event else ""
        super().__init__(f"{kind}: {where}{detail}")


@dataclass
class Aggregate:
    """Counts per (symbol, day) and the number of events folded in."""

    counts: dict[Key, Entry] = field(default_factory=dict)
    events: int = 0

    def merge(self, other: "Aggregate") -> None:
        """Add ``other``'s counts to this one (``other`` must not be used afterwards)."""
        self.events += other.events
        if not self.counts:
            self.counts = other.counts
            return
        get = self.counts.get
        for key, value in other.counts.items():
            entry = get(key)
            if entry is None:
                self.counts[key] = value
                continue
            entry[0] += value[0]
            if value[1] < entry[1]:
                entry[1] = value[1]
            if value[2] > entry[2]:
                entry[2] = value[2]

    @property
    def lookups(self) -> int:
        """The total of the events' ``count``s."""
        return sum(entry[0] for entry in self.counts.values())


def _slow_key(item: Any, day: int, validated: set[tuple[str, str, str, str]]) -> Key:
    """The key of an event whose symbol is not (yet) in ``validated``, checked.

    Raises:
        EventError: the event is invalid.
    """
    symbol = validate_symbol(item)
    validated.add(symbol)
    return (*symbol, day)


def aggregate_batch(chunks: Iterable[bytes], default_seen_at: float,
                    validated: set[tuple[str, str, str, str]] | None = None,
                    chunk_size: int = 1 << 20, into: Aggregate | None = None) -> Aggregate:
    """Decode a stream of msgpack maps and count them per (symbol, day).

    ``default_seen_at`` (epoch seconds, the object's time) stands in for a
    missing ``seen_at``. ``validated`` may carry already-checked symbols from
    batch to batch. Chunks must be at most ``chunk_size`` bytes. With ``into``,
    the counts are added to that aggregate, which is returned (and must be
    discarded if this raises).

    Raises:
        BadBatch: malformed msgpack, a truncated stream, an oversized event, or
            an event with a missing key, a wrong type or an invalid debug id.
    """
    import gc

    # Nothing built here is cyclic: the collector would only rescan growing dicts.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = into if into is not None else Aggregate()
        result.events += _aggregate(chunks, default_seen_at,
                                    set() if validated is None else validated, chunk_size,
                                    result.counts)
        return result
    finally:
        if was_enabled:
            gc.enable()


def _aggregate(chunks: Iterable[bytes], default_seen_at: float,
               validated: set[tuple[str, str, str, str]], chunk_size: int,
               counts: dict[Key, Entry]) -> int:
    """The loop of :func:`aggregate_batch`; returns the number of events."""
    import msgpack

    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=chunk_size + MAX_EVENT_BYTES)
    get = counts.get
    default_day = day_of(default_seen_at)
    index = fed = end = 0
    tell = unpacker.tell
    try:
        for chunk in chunks:
            fed += len(chunk)
            try:
                unpacker.feed(chunk)
            except msgpack.BufferFull:
                raise BadBatch("oversized event", f"an event is larger than {MAX_EVENT_BYTES} bytes",
                               index + 1) from None
            for item in unpacker:
                index += 1
                start, end = end, tell()
                if end - start > MAX_EVENT_BYTES:
                    raise BadBatch("oversized event", f"{end - start} bytes (at most "
                                   f"{MAX_EVENT_BYTES})", index)
                try:
                    seen = item.get("seen_at")
                    count = item.get("count", 1)
                    if seen is None:
                        seen, day = default_seen_at, default_day
                    else:
                        seen = parse_seen_at(seen)
                        day = day_of(seen)
                    if type(count) is not int or not 0 < count <= MAX_EVENT_COUNT:
                        check_count(count)
                    key = (item["debug_file"], item["debug_id"], item.get("code_file", ""),
                           item.get("code_id", ""), day)
                    entry = get(key)
                except (KeyError, TypeError, AttributeError):
                    key, entry = None, None
                if entry is None:
                    if key is None or key[:4] not in validated:
                        # key is None only for an invalid event, which _slow_key rejects
                        key = _slow_key(item, default_day if key is None else key[4], validated)
                    entry = get(key)
                    if entry is None:
                        entry = counts[key] = [0, seen, seen]
                entry[0] += count
                if seen < entry[1]:
                    entry[1] = seen
                if seen > entry[2]:
                    entry[2] = seen
    except EventError as exc:
        raise BadBatch(exc.kind, exc.detail, index) from None
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise BadBatch("malformed msgpack", f"{type(exc).__name__}: {exc}", index + 1) from None
    if end != fed:  # ``end``: where the last whole event ended
        raise BadBatch("malformed msgpack", f"truncated: {fed - end} bytes left over "
                       f"after {index} events", index + 1)
    return index


def staging_csv(aggregate: Aggregate) -> str:
    """The counts as CSV rows for the store's staging table: hash, the four fields,
    day (since the epoch), count, first and last seen (epoch seconds)."""
    import csv
    import hashlib
    import io

    md5 = hashlib.md5
    hashes: dict[tuple[str, ...], str] = {}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    rows = []
    for key, (count, first, last) in aggregate.counts.items():
        symbol = key[:4]
        digest = hashes.get(symbol)
        if digest is None:  # symbol_hash, inlined: this runs once per distinct symbol
            digest = hashes[symbol] = md5("\0".join(symbol).encode()).hexdigest()
        rows.append((digest, *key, count, first, last))
        if len(rows) >= 10000:
            writer.writerows(rows)
            rows.clear()
    writer.writerows(rows)
    return buffer.getvalue()
