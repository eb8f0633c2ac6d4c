"""Streaming decode of batches and in-memory aggregation per (symbol, day).

Pure apart from msgpack: bytes in, counts out.

Missing-symbol lookups repeat (that is why they are counted), so events are
first counted by their encoded bytes, and each distinct encoded event is
decoded, validated and folded into the counts once, when the aggregate is
settled (at the end of a batch or a group of batches, or when the pending
events reach a bound). Counting bytes is about three times cheaper than
decoding every event (on repetitive traffic; a quarter cheaper when a fifth of
the events are distinct, measured in one process); events that never repeat (e.g. each with its own
``seen_at``) cost about 35% more than decoding each (0.88 vs 0.65 s for
200,000 events in one process). Memory is bounded by the distinct keys
aggregated plus ``PENDING_ENTRIES`` pending events, never by the number of
events: ``msgpack.Unpacker`` is fed chunk by chunk.

A batch is all or nothing: its first invalid event (or malformed byte) makes
:func:`aggregate_batch` or :meth:`Aggregate.settle` raise :class:`BadBatch`
naming the batch, and the caller drops that batch's counts (see
docs/jobs/missing_symbols.md, "Bad batches").
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable, Iterator

from crontabber.errors import CrontabberError

from .memory import SETTLING, OutOfMemory
from .model import MAX_EVENT_COUNT, EventError, check_count, day_of, parse_seen_at, validate_symbol

#: (debug_file, debug_id, code_file, code_id, day since epoch)
Key = tuple[str, str, str, str, int]
#: A settled count: ``[COUNT, FIRST, LAST]`` (lookups, first and last seen, epoch s).
Entry = list[Any]
#: An encoded event not settled yet: ``[COUNT, FIRST, LAST, BATCH, INDEX]`` (occurrences,
#: first and last default time, the batch and event index of its first occurrence).
Pending = list[Any]
# The slots of Entry and Pending. Lists, not objects: an attribute store costs more than
# an index on the per-event path, and the lists pickle smaller between processes.
COUNT, FIRST, LAST, BATCH, INDEX = range(5)

#: Largest encoded event accepted; a bigger one makes the batch "oversized event".
MAX_EVENT_BYTES = 64 * 1024
#: Distinct encoded events held before they are settled (bounds memory).
PENDING_ENTRIES = 200_000


class BadBatch(CrontabberError):
    """A batch that cannot be counted: ``kind`` (a short category, e.g.
    ``malformed msgpack``), ``detail``, ``event`` (1-based index of the event
    at fault, 0 when it is the stream itself) and ``batch`` (the label the
    caller gave the batch, None if it gave none)."""

    def __init__(
        self, kind: str, detail: str, event: int = 0, batch: Hashable | None = None
    ) -> None:
        self.kind = kind
        self.detail = detail
        self.event = event
        self.batch = batch
        where = f"event {event}: " if event else ""
        super().__init__(f"{kind}: {where}{detail}")


class BadBatches(CrontabberError):
    """Several batches found bad at once: ``faults``, the first fault of each."""

    def __init__(self, faults: list[BadBatch]) -> None:
        self.faults = faults
        super().__init__(
            f"{len(faults)} bad batches: "
            + "; ".join(f"{fault.batch}: {fault}" for fault in faults[:3])
        )


@dataclass
class Aggregate:
    """Counts per (symbol, day), the number of events added, and the events not
    yet settled into ``counts`` (read ``counts`` only after :meth:`settle`)."""

    counts: dict[Key, Entry] = field(default_factory=dict)
    events: int = 0
    #: default day -> encoded event -> Pending
    pending: dict[int, dict[bytes, Pending]] = field(default_factory=dict)
    pending_entries: int = 0
    #: the symbols of ``counts``, each checked once
    validated: set[tuple[str, str, str, str]] = field(default_factory=set)

    def settle(self, every_fault: bool = False) -> None:
        """Decode, validate and count every pending event, in order of first
        occurrence within each default day.

        Raises:
            BadBatch: an event is malformed or invalid; ``batch`` and ``event``
                name its first occurrence. The aggregate must then be discarded.
            BadBatches: with ``every_fault``, instead of the first BadBatch, after
                settling everything: the first fault of every batch found bad
                (so a caller reads its batches again once, not once per bad batch).
            OutOfMemory: memory ran out (the aggregate must then be discarded).
        """
        import msgpack

        faults: dict[Hashable, BadBatch] | None = {} if every_fault else None
        fold = _Folder(self.counts, self.validated)
        with collector_paused():
            try:
                self._settle(fold, msgpack, faults)
            except MemoryError:
                raise OutOfMemory(SETTLING) from None
        for held in self.pending.values():
            held.clear()  # in place: a batch being read goes on adding to its day's dict
        self.pending_entries = 0
        if faults:
            raise BadBatches(sorted(faults.values(), key=lambda fault: str(fault.batch)))

    def _settle(
        self, fold: "_Folder", msgpack: Any, faults: dict[Hashable, BadBatch] | None
    ) -> None:
        for day, held in self.pending.items():
            for data, (occurrences, first, last, batch, index) in held.items():  # Pending
                try:
                    try:
                        item = msgpack.unpackb(data, raw=False)
                    except (
                        ValueError,
                        msgpack.ExtraData,
                        msgpack.FormatError,
                        msgpack.StackError,
                    ) as exc:
                        raise BadBatch(
                            "malformed msgpack", f"{type(exc).__name__}: {exc}", index, batch
                        ) from None
                    try:
                        fold(item, occurrences, first, last, day)  # validates before counting
                    except EventError as exc:
                        raise BadBatch(exc.kind, exc.detail, index, batch) from None
                except BadBatch as fault:
                    if faults is None:
                        raise
                    earlier = faults.get(batch)
                    if earlier is None or fault.event < earlier.event:
                        faults[batch] = fault

    def merge(self, other: "Aggregate") -> None:
        """Add ``other``'s counts and pending events to this aggregate (``other``
        must not be used afterwards)."""
        self.events += other.events
        self._merge_counts(other.counts)
        self.validated |= other.validated
        for day, theirs in other.pending.items():
            mine = self.pending.get(day)
            if not mine:
                self.pending[day] = theirs
                continue
            # the first occurrence kept (BATCH, INDEX): either names the fault
            _merge_entries(mine, theirs)
        self.pending_entries = sum(len(held) for held in self.pending.values())

    def _merge_counts(self, counts: dict[Key, Entry]) -> None:
        if not self.counts:
            self.counts = counts
            return
        _merge_entries(self.counts, counts)

    def one_day_per_symbol(self) -> bool:
        """Whether no settled symbol has counts on two days. ``validated`` holds
        exactly the symbols of ``counts`` (a symbol is added when an event of it
        is first counted, and merged with the counts), so this is a comparison
        of sizes, not a pass over 100,000 keys (0.14 s)."""
        return len(self.validated) == len(self.counts)

    @property
    def lookups(self) -> int:
        """The total of the settled events' ``count``s."""
        return sum(entry[COUNT] for entry in self.counts.values())


def add_to(entry: Entry | Pending, count: int, first: float, last: float) -> None:
    """Add ``count`` lookups seen from ``first`` to ``last`` to ``entry``: the one way
    counts are merged (events into counts, aggregates into aggregates)."""
    entry[COUNT] += count
    if first < entry[FIRST]:
        entry[FIRST] = first
    if last > entry[LAST]:
        entry[LAST] = last


def _merge_entries(mine: dict[Any, Any], theirs: dict[Any, Any]) -> None:
    """Merge ``theirs`` into ``mine`` (entries of both by key; ``theirs`` is used up)."""
    get = mine.get
    for key, value in theirs.items():
        entry = get(key)
        if entry is None:
            mine[key] = value
        else:
            add_to(entry, value[COUNT], value[FIRST], value[LAST])


class _Folder:
    """Folds decoded events into ``counts``: validation, ``seen_at``, ``count``."""

    def __init__(self, counts: dict[Key, Entry], validated: set[tuple[str, str, str, str]]) -> None:
        self.counts = counts
        self.validated = validated

    def __call__(self, item: Any, occurrences: int, first: float, last: float, day: int) -> None:
        """Count ``occurrences`` of event ``item``; ``first``/``last``/``day``: the
        default times, for an event without ``seen_at``.

        Raises:
            EventError: the event is invalid.
        """
        if type(item) is not dict:
            validate_symbol(item)  # raises: not a map
        seen = item.get("seen_at")
        count = item.get("count", 1)
        if seen is not None:
            first = last = parse_seen_at(seen)
            day = day_of(first)
        if type(count) is not int or not 0 < count <= MAX_EVENT_COUNT:
            check_count(count)
        symbol = (
            item.get("debug_file"),
            item.get("debug_id"),
            item.get("code_file", ""),
            item.get("code_id", ""),
        )
        try:
            known = symbol in self.validated
        except TypeError:  # a field is a list or a map: validate_symbol says which
            known = False
        if not known:  # (a lowercase debug id is never known: validated holds the canonical)
            symbol = validate_symbol(item)
            self.validated.add(symbol)
        key = (*symbol, day)
        entry = self.counts.get(key)
        if entry is None:
            self.counts[key] = [count * occurrences, first, last]
        else:
            add_to(entry, count * occurrences, first, last)


def aggregate_batch(
    chunks: Iterable[bytes],
    default_seen_at: float,
    chunk_size: int = 1 << 20,
    into: Aggregate | None = None,
    batch: Hashable | None = None,
) -> Aggregate:
    """Decode a stream of msgpack maps and count them per (symbol, day).

    ``default_seen_at`` (epoch seconds, the object's time) stands in for a
    missing ``seen_at``. Chunks must be at most ``chunk_size`` bytes. Without
    ``into``, a new aggregate is returned settled. With ``into``, the events
    are added to that aggregate as pending (the caller settles it, e.g. after
    several batches), labelled ``batch``.

    Raises:
        BadBatch: malformed msgpack, a truncated stream, an oversized event, or
            (without ``into``) an event with a missing key, a wrong type or an
            invalid debug id: the batch's first fault. With ``into``, only faults
            of the stream itself, and ``into`` then holds part of the batch's
            events (its caller must read again without the batch; an invalid
            event earlier in the batch is found when it settles).
        BadBatches: with ``into``, the pending bound forced a settle that found
            faults (in any batch added so far; each batch's first).
    """
    with collector_paused():
        result = into if into is not None else Aggregate()
        try:
            result.events += _read(chunks, default_seen_at, chunk_size, result, batch)
        except BadBatch as fault:
            if into is not None:
                raise
            _raise_earlier(result, fault)  # alone: an invalid event before it comes first
            raise
        except BadBatches as found:
            if into is not None:
                raise
            raise found.faults[0] from None
        if into is None:
            result.settle()
        return result


def _raise_earlier(aggregate: Aggregate, fault: BadBatch) -> None:
    """Raise the aggregate's first settling fault if it comes before ``fault``."""
    try:
        aggregate.settle(every_fault=True)
    except BadBatches as found:
        earlier = [other for other in found.faults if other.event < fault.event]
        if earlier:
            raise earlier[0] from None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector off for the block (and every thread), back on after
    if it was on. Nothing built while aggregating is cyclic: the collector would
    only rescan the growing dicts, again and again (it tripled the cost of
    settling)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read(
    chunks: Iterable[bytes],
    default_seen_at: float,
    chunk_size: int,
    result: Aggregate,
    batch: Hashable | None,
) -> int:
    """Count a batch's events by their bytes into ``result.pending``; return how many.

    Before an error about the stream itself is raised, the events read before it are
    counted, so that settling them finds an invalid event before the fault.
    """
    when, day = default_seen_at, day_of(default_seen_at)
    # settle() empties this dict in place, so it stays the day's through the batch
    held = result.pending.setdefault(day, {})
    get = held.get
    index = 0
    for events in _encoded_events(chunks, chunk_size, batch):
        for data in events:
            index += 1
            entry = get(data)
            if entry is None:
                held[data] = [1, when, when, batch, index]
                result.pending_entries += 1
                if result.pending_entries >= PENDING_ENTRIES:
                    result.settle(every_fault=True)
            elif when == entry[LAST]:  # the usual repeat: in the batch that first held it
                entry[COUNT] += 1
            else:
                add_to(entry, 1, when, when)
    return index


def _encoded_events(
    chunks: Iterable[bytes], chunk_size: int, batch: Hashable | None
) -> Iterator[list[bytes]]:
    """A batch's stream cut into its encoded events, none decoded: a list per chunk fed
    (the whole events that chunk ends; a list, not an event at a time, because a
    generator step per event cost 30% of counting repetitive batches).

    Raises (after yielding the events before it):
        BadBatch: malformed msgpack, a truncated stream or an oversized event.
    """
    import msgpack

    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=chunk_size + MAX_EVENT_BYTES)
    window = _Window(unpacker)
    count = 0  # events yielded
    for chunk in chunks:
        try:
            unpacker.feed(chunk)
        except msgpack.BufferFull:
            raise BadBatch(
                "oversized event",
                f"an event is larger than {MAX_EVENT_BYTES} bytes",
                count + 1,
                batch,
            ) from None
        events, fault = window.cut(chunk)
        count += len(events)
        yield events
        if fault is not None:
            kind, detail = fault
            raise BadBatch(kind, detail, count + 1, batch)
    if window.left:
        raise BadBatch(
            "malformed msgpack",
            f"truncated: {window.left} bytes left over after {count} events",
            count + 1,
            batch,
        )


class _Window:
    """The stream's bytes not yet cut into events, from the end of the last whole event to
    the end of what was fed, and the cutting: msgpack's ``Unpacker.skip`` finds where each
    whole event ends (``tell``, a position in the whole stream), which this turns into a
    slice of the bytes kept."""

    __slots__ = ("_unpacker", "_data", "_start", "_end", "_fed")

    def __init__(self, unpacker: Any) -> None:
        self._unpacker = unpacker  # fed the same chunks, before :meth:`cut`
        self._data = b""  # the stream's bytes from _start to _fed
        self._start = 0  # stream position of _data[0]
        self._end = 0  # stream position where the last whole event ended
        self._fed = 0

    def cut(self, chunk: bytes) -> tuple[list[bytes], tuple[str, str] | None]:
        """Add ``chunk`` (dropping the bytes of events already cut); return the whole
        events it ends, and the fault (kind, detail) met after them, if any."""
        import msgpack

        data = self._data = self._data[self._end - self._start :] + chunk
        base = self._start = self._end
        self._fed += len(chunk)
        events: list[bytes] = []
        append, tell, skip = events.append, self._unpacker.tell, self._unpacker.skip
        start = base
        fault = None
        try:
            while True:
                skip()
                end = tell()
                if end - start > MAX_EVENT_BYTES:
                    fault = ("oversized event", f"{end - start} bytes (at most {MAX_EVENT_BYTES})")
                    break
                append(data[start - base : end - base])
                start = end
        except msgpack.OutOfData:
            pass
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            fault = ("malformed msgpack", f"{type(exc).__name__}: {exc}")
        self._end = start
        return events, fault

    @property
    def left(self) -> int:
        """Bytes fed after the last whole event (not 0 at the end: a truncated stream)."""
        return self._fed - self._end


def staging_chunks(aggregate: Aggregate, lines: int = 2000) -> Iterator[str]:
    """The counts as rows for the store's staging table, in COPY's text format,
    ``lines`` rows a chunk (so COPY can load a chunk while the next is made):
    hash, the four fields, day (since the epoch), count, first and last seen
    (epoch seconds), tab-separated; one row per (symbol, day).

    Valid fields hold no tab, newline or other control character
    (:func:`model.validate_symbol`), so only a backslash needs escaping. Half
    the cost of the ``csv`` module's quoting.
    """
    import hashlib

    md5 = hashlib.md5
    chunk: list[str] = []
    append = chunk.append
    for (debug_file, debug_id, code_file, code_id, day), (
        count,
        first,
        last,
    ) in aggregate.counts.items():
        symbol = f"{debug_file}\0{debug_id}\0{code_file}\0{code_id}"
        # symbol_hash, inlined: this runs once per (symbol, day)
        line = (
            f"{md5(symbol.encode()).hexdigest()}\t{debug_file}\t{debug_id}\t"
            f"{code_file}\t{code_id}\t{day}\t{count}\t{first!r}\t{last!r}\n"
        )
        if "\\" in symbol:
            line = line.replace("\\", "\\\\")
        append(line)
        if len(chunk) >= lines:
            yield "".join(chunk)
            chunk.clear()
    if chunk:
        yield "".join(chunk)
