"""Frozen records without :mod:`dataclasses`: the state rows, settings and configured jobs
that every cron tick builds.

``@dataclass(frozen=True)`` compiles each method of each class with ``exec`` (~0.3 ms a class)
and imports :mod:`inspect` (~4 ms with ``ast`` and ``dis``): the 23 classes on an idle tick's
path were ~9 ms of it (issue #36). A :class:`Frozen` subclass declares each field once, as an
annotation in the class body (``name: type`` or ``name: type = default``), as a dataclass
does: the class gets them as ``__slots__`` (in that order, after its bases') and an
``__init__`` taking them in that order, positionally or by name (a class whose ``__init__``
does more writes its own and sets each field with :func:`setfield`). The type checker reads
the same declarations (:func:`typing.dataclass_transform`), so a wrong name, a missing or an
extra argument is its error. This base gives a record what the dataclass gave: a repr
(``_hidden`` fields left out: secrets), equality and a hash by fields between records of the
same class (``_uncompared`` fields left out), no assignment after ``__init__``
(:class:`FrozenError`), pickling and copying, and :meth:`Frozen.replace`.
``ClassVar`` annotations are not fields. Classes that only operator commands or a running job
build stay dataclasses.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, TypeVar, dataclass_transform

    R = TypeVar("R", bound="Frozen")
else:  # the idle tick does not import typing: the decorator only speaks to the type checker

    def dataclass_transform(**_: object) -> object:
        return lambda target: target


__all__ = ["Frozen", "FrozenError", "setfield"]


#: Sets a field in ``__init__`` (``setfield(self, "name", name)``): ``self.name = ...`` raises.
setfield = object.__setattr__


class FrozenError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen record."""


class _Declared(type):
    """Makes a record class's ``__slots__`` from its annotations (those that are not
    ``ClassVar``), taking their defaults out of the class body (a slot and a class attribute
    of one name cannot both exist); a class that lists ``__slots__`` itself is left as is."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        if "__slots__" not in namespace:
            declared = namespace.get("__annotations__", {})
            fields = tuple(
                field for field, kind in declared.items() if not str(kind).startswith("ClassVar")
            )
            namespace["__slots__"] = fields
            namespace["_own_defaults"] = {
                field: namespace.pop(field) for field in fields if field in namespace
            }
        return super().__new__(mcs, name, bases, namespace)


@dataclass_transform(frozen_default=True)
class Frozen(metaclass=_Declared):
    """Base of a frozen record: fields declared once, as annotations (see the module)."""

    __slots__ = ()
    #: Every field, the base classes' first (from their ``__slots__``).
    _fields: ClassVar[tuple[str, ...]] = ()
    #: The fields' defaults, the base classes' included.
    _defaults: ClassVar[dict[str, Any]] = {}
    #: Fields the repr leaves out (secrets).
    _hidden: ClassVar[frozenset[str]] = frozenset()
    #: Fields equality and the hash ignore.
    _uncompared: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__slots__", ())
        cls._fields = cls._fields + ((own,) if isinstance(own, str) else tuple(own))
        cls._defaults = {**cls._defaults, **cls.__dict__.get("_own_defaults", {})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Each field from ``args`` (in the fields' order), else ``kwargs``, else its default.

        Raises:
            TypeError: too many arguments, a field given twice, or missing without a default,
                or a name that is not a field.
        """
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(
                f"{type(self).__name__}() takes {len(fields)} fields, {len(args)} given"
            )
        for name, value in zip(fields, args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got field {name!r} twice")
            setfield(self, name, value)
        for name in fields[len(args) :]:
            if name in kwargs:
                setfield(self, name, kwargs.pop(name))
            elif name in self._defaults:
                setfield(self, name, self._defaults[name])
            else:
                raise TypeError(f"{type(self).__name__}() is missing field {name!r}")
        if kwargs:
            raise TypeError(f"{type(self).__name__}() has no field {sorted(kwargs)[0]!r}")

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
