"""`python -m faults [--only NAME ...] [--scale F]`: run the fault suite, write
docs/reliability.md."""

from __future__ import annotations

import argparse
import datetime
import importlib
import shlex
import sys

from faults import report
from faults.registry import MODULES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m faults", description=__doc__)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=MODULES,
        metavar="NAME",
        help=f"run only these modules ({', '.join(MODULES)})",
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply every fault count (1.0: the published run)",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="print the results only: docs/reliability.md and the saved "
        "results stay as they are (make test's short drills)",
    )
    args = parser.parse_args(argv)
    command = "python -m faults " + shlex.join(sys.argv[1:] if argv is None else argv)
    failed = False
    for module in args.only or MODULES:
        print(f"== faults.{module}", flush=True)
        results = importlib.import_module(f"faults.{module}").run(args.scale)
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        if not args.no_report:
            report.save(module, results, command=command.strip(), date=date)
        for r in results:
            print(
                f"   {r.fault}: thrown {r.thrown}, converged {r.converged}, lost {r.lost}, "
                f"duplicated {r.duplicated}",
                flush=True,
            )
            failed |= not r.ok
    if not args.no_report:
        print(f"wrote {report.write()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
