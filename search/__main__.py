"""``python -m search "firefix"``: see :mod:`search.cli`."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:], sys.stdout, sys.stderr))
