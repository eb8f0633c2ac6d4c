"""The runner's command line (``python -m crontabber``, the ``crontabber`` command): parse,
call, print.

- :mod:`~crontabber.cli.dispatch`: the parser, the refusals made before anything runs, and
  the handler of each mode;
- :mod:`~crontabber.cli.common`: the :class:`~crontabber.cli.common.Context` every handler
  takes, and what handlers share;
- the handlers: :mod:`~crontabber.cli.run` (a tick, ``--job``), :mod:`~crontabber.cli.show`
  (``--list-jobs``, ``--history``, ``--show-error``, ``--logs``),
  :mod:`~crontabber.cli.operate` (the operator actions and ``--explain``, ``--audit``) and
  :mod:`~crontabber.cli.monitor` (``--nagios``, ``--alerts``, ``--test-alert``).
"""

from .dispatch import main

__all__ = ["main"]
