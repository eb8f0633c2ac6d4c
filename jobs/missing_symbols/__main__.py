"""``python -m jobs.missing_symbols``: see cli.py."""
from crontabber import exit_quietly

from .cli import main

exit_quietly(main)
