"""``python -m crontabber``."""

import sys

from .cli import main
from .command import exit_quietly

exit_quietly(lambda: main(sys.argv[1:]))
