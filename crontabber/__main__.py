"""``python -m crontabber``, and the ``crontabber`` command (pyproject.toml)."""

import sys

from .cli import main
from .command import exit_quietly


def run() -> None:
    """The console script: the command line of this process."""
    exit_quietly(lambda: main(sys.argv[1:]))


if __name__ == "__main__":
    run()
