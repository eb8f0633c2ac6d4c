"""Declaring options: a configman-compatible ``Namespace`` and the ``DotDict``
a job sees as ``self.config``.

crontabber apps declare their options with configman::

    required_config = Namespace()
    required_config.add_option('bugsy_url', default='bugz.mozilla.org', doc='...')

This module provides the same calls (``add_option``, ``namespace``, attribute
access to sub-namespaces) without configman, which does not run on Python 3.10+.
Values are read by :mod:`crontabber.config` from the command line, the
environment and ``crontabber.ini``, in that order.
"""

from __future__ import annotations

from ..frozen import Frozen
from ..redaction import SECRET_WORDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator


class _NoValue:
    """The type of :data:`NO_VALUE`: false, one instance."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NO_VALUE"


#: An option set nowhere (everett's ``NO_VALUE``, without importing everett and, with it,
#: :mod:`typing`: ~2.5 ms of every cron tick).
NO_VALUE = _NoValue()


def parse_bool(text: str) -> bool:
    """everett's ``parse_bool`` (``t true yes y 1 on`` / ``f false no n 0 off``, any case),
    without importing ``everett.manager`` (it imports inspect: ~5 ms of every cron tick).

    Raises:
        ValueError: anything else.
    """
    value = text.lower()
    if value in ("t", "true", "yes", "y", "1", "on"):
        return True
    if value in ("f", "false", "no", "n", "0", "off"):
        return False
    raise ValueError(f"{value!r} is not a valid bool value")


def parser_for(default: Any) -> Callable[[str], Any]:
    """The string parser implied by a default value's type."""
    if isinstance(default, bool):
        return parse_bool
    if isinstance(default, int):
        return int
    if isinstance(default, float):
        return float
    return str


class Option(Frozen):
    """One declared option.

    ``reference_value_from`` names a namespace (``resource.postgresql``) whose
    option of the same name supplies the value when this one is not set. ``formerly`` is
    the option's old name in the same namespace (a renamed option): still read, when the new
    name is not set, with a deprecation warning (docs/conventions.md, "Deprecation policy").
    """

    name: str
    default: Any = None
    doc: str = ""
    parser: Callable[[str], Any] = str
    reference_value_from: str | None = None
    secret: bool = False
    url_paths_secret: bool = False  # its URLs' paths may hold tokens (shown as /***)
    formerly: str | None = None  # its name before a rename, still read (deprecated)

    def parse(self, text: str) -> Any:
        return self.parser(text)


class Namespace:
    """A tree of options, configman style."""

    def __init__(self, doc: str = "") -> None:
        self._doc = doc
        self._options: dict[str, Option] = {}
        self._namespaces: dict[str, Namespace] = {}

    def add_option(
        self,
        name: str,
        default: Any = None,
        doc: str = "",
        from_string_converter: Callable[[str], Any] | None = None,
        reference_value_from: str | None = None,
        secret: bool | None = None,
        url_paths_secret: bool = False,
        formerly: str | None = None,
        **_ignored: Any,
    ) -> Option:
        """Declare an option; unknown configman keywords are accepted and ignored.
        ``url_paths_secret``: the value holds URLs whose paths may carry a token (a webhook's
        address): listings show them as ``https://host/***``. ``formerly``: the option's old
        name (a rename), still read when the new one is not set, with a ``DeprecationWarning``.

        A ``default`` given as a string is parsed by ``from_string_converter``
        when one is given, as configman did.
        """
        parser = from_string_converter or parser_for(default)
        if secret is None:
            secret = any(word in name.lower() for word in SECRET_WORDS)
        if isinstance(default, str) and from_string_converter is not None and default != "":
            default = from_string_converter(default)
        option = Option(
            name, default, doc, parser, reference_value_from, secret, url_paths_secret, formerly
        )
        self._options[name] = option
        return option

    def namespace(self, name: str, doc: str = "") -> "Namespace":
        """Return the sub-namespace ``name``, creating it if needed."""
        return self._namespaces.setdefault(name, Namespace(doc))

    def __getattr__(self, name: str) -> "Namespace":
        namespaces: dict[str, Namespace] = self.__dict__.get("_namespaces", {})
        if name in namespaces:
            return namespaces[name]
        raise AttributeError(name)

    def walk(self, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Option]]:
        """Every option with its namespace path, depth first, in declaration order."""
        for option in self._options.values():
            yield prefix, option
        for name, child in self._namespaces.items():
            yield from child.walk(prefix + (name,))

    def merged(self, other: "Namespace") -> "Namespace":
        """A new namespace holding this one's options, then ``other``'s."""
        result = Namespace(self._doc)
        for source in (self, other):
            for path, option in source.walk():
                target = result
                for part in path:
                    target = target.namespace(part)
                target._options[option.name] = option
        return result


class DotDict(dict[str, "Any"]):  # "Any": typing is not imported at run time
    """A dict whose keys are also attributes: ``config.bucket`` or ``config['bucket']``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __repr__(self) -> str:
        return "DotDict(" + ", ".join(f"{key}=..." for key in self) + ")"


class RequiredConfig:
    """configman's mixin: a class with a ``required_config`` Namespace."""

    required_config: Namespace = Namespace()

    @classmethod
    def get_required_config(cls) -> Namespace:
        return cls.required_config
