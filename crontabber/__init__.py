"""A Python 3 successor of Mozilla's crontabber.

Public surface for jobs: :mod:`crontabber.base` (``BaseCronApp``),
:mod:`crontabber.mixins` (decorators), :mod:`crontabber.config.options`
(``Namespace``), :mod:`crontabber.errors` (``CrontabberError``),
:mod:`crontabber.sqlfiles` (named SQL), :mod:`crontabber.connection_factory`,
:mod:`crontabber.config.job` and :mod:`crontabber.database` (a job command's connection),
:mod:`crontabber.jsonout` (``--json``: ISO 8601 UTC times, seconds),
and the shape every operator command shares (:mod:`crontabber.command`, exported here):
one table of exit codes, ``--admin.conf`` and the ``--crontabber.class-X.opt=value``
overrides, one-line errors (:mod:`crontabber.formats`: ``one_line``, ``printable``,
``utc_text``); ``describe_failure``: an error in one line naming the service
and its address.
"""

from .command import EXIT_CODES, ExitCode, command_parser, exit_codes_text, exit_quietly, run_command
from .failures import describe as describe_failure
from .formats import one_line, printable, utc_text

__version__ = "1.0.0a1"

__all__ = ["EXIT_CODES", "ExitCode", "command_parser", "describe_failure", "exit_codes_text",
           "exit_quietly", "one_line", "printable", "run_command", "utc_text", "__version__"]
