"""``python -m jobs.uploads``: see :mod:`jobs.uploads.cli`."""

import sys

from .cli import main

sys.exit(main())
