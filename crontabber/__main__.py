"""``python -m crontabber``, and the ``crontabber`` command (pyproject.toml)."""

import gc
import sys

# A cron tick is a short process that builds long-lived objects (modules, settings, the
# jobs' classes): the collector's passes over them while it starts, and again while the
# interpreter exits, were ~15 ms of every idle tick (bench tick). It is off until the mode's
# handler runs (crontabber.cli.dispatch.resume_collection moves what was built out of its
# sight, gc.freeze, and turns it on: the runner and each job's forked child collect as
# usual), and what the process built is moved out of its sight again before the exit.
gc.disable()

from .cli import main  # noqa: E402
from .command import exit_quietly  # noqa: E402


def _main() -> int:
    code = main(sys.argv[1:])
    gc.freeze()
    return code


def run() -> None:
    """The console script: the command line of this process."""
    exit_quietly(_main)


if __name__ == "__main__":
    run()
