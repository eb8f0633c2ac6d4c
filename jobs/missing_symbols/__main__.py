"""``python -m jobs.missing_symbols``, and the ``symbols-missing-symbols`` command: see cli.py."""

from crontabber import exit_quietly

from .cli import main


def run() -> None:
    """The console script: the command line of this process."""
    exit_quietly(main)


if __name__ == "__main__":
    run()
