"""argparse's side of every command: the parser whose mistakes are one line and exit 1
(:class:`CommandParser`), its help formatter (:class:`Formatter`), and a job's operator
command's parser with ``--admin.conf`` and the exit-code table in its ``--help``
(:func:`command_parser`, exported by :mod:`crontabber`).

Apart from :mod:`crontabber.command` so that a plain cron tick (``--admin.conf`` alone), which
:mod:`crontabber.cli.dispatch` reads without argparse, imports neither argparse nor gettext.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .command import exit_codes_text
from .errors import ConfigurationError


class CommandParser(argparse.ArgumentParser):
    """An argparse parser whose mistakes are :class:`ConfigurationError` (one line,
    exit 1) rather than argparse's usage and exit 2 (2 means "locked" here). Its
    subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise ConfigurationError("the command line", message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, refusing a misspelled option at once, with the closest one it has
        (``--prot``: did you mean --port?); ``--namespace.option=value`` overrides are left
        in the rest for :func:`crontabber.command.split_overrides`."""
        parsed, rest = super().parse_known_args(args, namespace)
        for item in rest:
            name = item.split("=", 1)[0]
            if name.startswith("--") and "." not in name:
                known = [flag for action in self._actions for flag in action.option_strings]
                self.error(f"unrecognized argument {item!r}{did_you_mean(name, known)}")
        return parsed, rest


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean --port?)`` when one of the ``known`` options is close to ``name``,
    else ``""`` (argparse does not guess before Python 3.12)."""
    import difflib

    # compared without the dashes, which every option shares (--prot is not close to --to)
    stems = {flag[2:]: flag for flag in known if flag.startswith("--")}
    found = difflib.get_close_matches(name.lstrip("-"), list(stems), n=1, cutoff=0.6)
    return f" (did you mean {stems[found[0]]}?)" if found else ""


def _terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it (``COLUMNS``,
    then standard output's terminal, then 80), without importing shutil."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            stdout = sys.__stdout__  # None without one: AttributeError below
            columns = os.get_terminal_size(stdout.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns or 80


class Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter (descriptions and epilogs kept as written), sized by
    :func:`_terminal_columns`.

    argparse builds a formatter for every ``add_argument``, and the default one
    imports shutil (with lzma and bz2) to size itself: ~4 ms of every cron tick.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)


def command_parser(prog: str, description: str) -> CommandParser:
    """The parser of a job's operator command: ``--admin.conf=FILE``, the overrides
    (``--crontabber.class-X.opt=value``, any position, left to
    :func:`crontabber.command.run_command`)
    and the exit-code table in ``--help``. Add the subcommands to it."""
    parser = CommandParser(
        prog=prog,
        description=description,
        epilog="options: --crontabber.class-CLASS.OPTION=VALUE (and any runner option) override "
        "crontabber.ini, as for python -m crontabber; --logging.level=DEBUG shows "
        "tracebacks.\n" + exit_codes_text(),
    )
    parser.add_argument(
        "--admin.conf",
        dest="conf",
        metavar="FILE",
        default=None,
        help="the INI file (default: ./config/crontabber.ini or ./crontabber.ini)",
    )
    return parser
