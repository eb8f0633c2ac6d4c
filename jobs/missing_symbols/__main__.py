"""``python -m jobs.missing_symbols``: see cli.py."""
import sys

from .cli import main

sys.exit(main())
