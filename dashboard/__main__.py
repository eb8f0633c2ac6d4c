"""``python -m dashboard``, and the ``symbols-dashboard`` command: see :mod:`dashboard.server`."""

import sys

from .server import main


def run() -> None:
    """The console script: the command line of this process."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    run()
