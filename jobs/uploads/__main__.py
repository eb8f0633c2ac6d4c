"""``python -m jobs.uploads``, and the ``symbols-uploads`` command: see :mod:`jobs.uploads.cli`."""

from crontabber import exit_quietly

from .cli import main


def run() -> None:
    """The console script: the command line of this process."""
    exit_quietly(main)


if __name__ == "__main__":
    run()
