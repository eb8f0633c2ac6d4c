"""Frozen records without :mod:`dataclasses`: the state rows, settings and configured jobs
that every cron tick builds.

``@dataclass(frozen=True)`` compiles each method of each class with ``exec`` (~0.3 ms a class)
and imports :mod:`inspect` (~4 ms with ``ast`` and ``dis``): the 23 classes on an idle tick's
path were ~9 ms of it (issue #36). A :class:`Frozen` subclass lists its fields in
``__slots__`` (in order) and writes its ``__init__``, setting each field with
:func:`setfield` and taking them in that order; this base gives it what the dataclass gave:
a repr (``_hidden`` fields left out: secrets), equality and a hash by fields between records
of the same class (``_uncompared`` fields left out), no assignment after ``__init__``
(:class:`FrozenError`), pickling and copying, and :meth:`Frozen.replace`.
Classes that only operator commands or a running job build stay dataclasses.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, TypeVar

    R = TypeVar("R", bound="Frozen")

__all__ = ["Frozen", "FrozenError", "setfield"]


#: Sets a field in ``__init__`` (``setfield(self, "name", name)``): ``self.name = ...`` raises.
setfield = object.__setattr__


class FrozenError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen record."""


class Frozen:
    """Base of a frozen record: fields in ``__slots__``, a hand-written ``__init__``."""

    __slots__ = ()
    #: Every field, the base classes' first (from their ``__slots__``).
    _fields: ClassVar[tuple[str, ...]] = ()
    #: Fields the repr leaves out (secrets).
    _hidden: ClassVar[frozenset[str]] = frozenset()
    #: Fields equality and the hash ignore.
    _uncompared: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        cls._fields = cls._fields + ((own,) if isinstance(own, str) else tuple(own))

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields if name not in self._uncompared)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self._fields if name not in self._hidden
        )
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frozen) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled and copied by its fields, rebuilt without ``__init__`` (as a dataclass)."""
        return _rebuild, (type(self), tuple(getattr(self, name) for name in self._fields))

    def replace(self: R, **changes: Any) -> R:
        """A copy with ``changes``, built by ``__init__`` (its checks apply), as
        :func:`dataclasses.replace`.

        Raises:
            TypeError: a name that is not a field.
        """
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)


def _rebuild(cls: type[R], values: tuple[Any, ...]) -> R:
    record = cls.__new__(cls)
    for name, value in zip(cls._fields, values):
        setfield(record, name, value)
    return record
