"""``python -m jobs.uploads``: see :mod:`jobs.uploads.cli`."""

from crontabber import exit_quietly

from .cli import main

exit_quietly(main)
