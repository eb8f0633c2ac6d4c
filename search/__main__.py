"""``python -m search "firefix"``, and the ``symbols-search`` command: see :mod:`search.cli`."""

import os
import sys

from .cli import EXIT_PIPE_CLOSED, main


def run() -> None:
    """The console script: the command line of this process."""
    try:
        code = main(sys.argv[1:], sys.stdout, sys.stderr)
        sys.stdout.flush()
    except BrokenPipeError:  # `python -m search xul | head -1`: end quietly, as the runner does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_PIPE_CLOSED
    sys.exit(code)


if __name__ == "__main__":
    run()
