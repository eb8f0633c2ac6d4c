"""A Python 3 successor of Mozilla's crontabber.

Public surface for jobs: :mod:`crontabber.base` (``BaseCronApp``),
:mod:`crontabber.mixins` (decorators), :mod:`crontabber.config.options`
(``Namespace``), :mod:`crontabber.errors` (``CrontabberError``),
:mod:`crontabber.sqlfiles` (named SQL), :mod:`crontabber.connection_factory`,
:mod:`crontabber.config.job` and :mod:`crontabber.database` (a job command's connection),
:mod:`crontabber.jsonout` (``--json``: ISO 8601 UTC times, seconds),
and the shape every operator command shares (:mod:`crontabber.command`, exported here):
one table of exit codes, ``--admin.conf`` and the ``--crontabber.class-X.opt=value``
overrides (``command_parser``, ``CommandParser``, ``split_overrides``), secrets masked in
what a command logs (:mod:`crontabber.redaction`: ``redact``, ``redact_handlers``,
``secret_values``), one-line errors (:mod:`crontabber.formats`: ``one_line``, ``printable``,
``utc_text``); ``describe_failure``: an error in one line naming the service
and its address.

The names exported here load on first use (PEP 562): ``python -m crontabber`` imports this
package before its ``__main__`` can turn the garbage collector off for the start-up.
``__version__`` too: in a checkout it asks git (:func:`crontabber.version.version`), which a
cron tick never does.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .command import (
        EXIT_CODES,
        ExitCode,
        exit_codes_text,
        exit_quietly,
        run_command,
        split_overrides,
    )
    from .failures import describe as describe_failure
    from .formats import one_line, printable, utc_text
    from .parsing import CommandParser, command_parser
    from .redaction import redact, redact_handlers, secret_values

    __version__: str

__all__ = [
    "CommandParser",
    "EXIT_CODES",
    "ExitCode",
    "command_parser",
    "describe_failure",
    "exit_codes_text",
    "exit_quietly",
    "one_line",
    "printable",
    "redact",
    "redact_handlers",
    "run_command",
    "secret_values",
    "split_overrides",
    "utc_text",
    "__version__",
]

#: Each exported name: (its module, its name there).
_EXPORTS = {
    "EXIT_CODES": ("command", "EXIT_CODES"),
    "ExitCode": ("command", "ExitCode"),
    "command_parser": ("parsing", "command_parser"),
    "CommandParser": ("parsing", "CommandParser"),
    "exit_codes_text": ("command", "exit_codes_text"),
    "exit_quietly": ("command", "exit_quietly"),
    "run_command": ("command", "run_command"),
    "split_overrides": ("command", "split_overrides"),
    "describe_failure": ("failures", "describe"),
    "one_line": ("formats", "one_line"),
    "printable": ("formats", "printable"),
    "utc_text": ("formats", "utc_text"),
    "redact": ("redaction", "redact"),
    "redact_handlers": ("redaction", "redact_handlers"),
    "secret_values": ("redaction", "secret_values"),
}


def __getattr__(name: str) -> Any:
    """An exported name, imported from its module on first use."""
    if name == "__version__":
        from .version import version

        globals()[name] = version()
        return globals()[name]
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value
    return value
