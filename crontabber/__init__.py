"""A Python 3 successor of Mozilla's crontabber.

Public surface for jobs: :mod:`crontabber.base` (``BaseCronApp``),
:mod:`crontabber.mixins` (decorators), :mod:`crontabber.options`
(``Namespace``), :mod:`crontabber.errors` (``CrontabberError``),
:mod:`crontabber.queries` (named SQL), :mod:`crontabber.connection_factory`,
:mod:`crontabber.jobconfig` and :mod:`crontabber.database` (a job command's connection).
"""

__version__ = "1.0.0a1"
