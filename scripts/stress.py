"""Run test files N times on a loaded machine and say which tests failed in how many rounds.

``python scripts/stress.py [--rounds N] [--cpu-load P] FILE...`` (``make stress``): starts
``stress-ng --cpu 2 --cpu-load P`` (two workers each busy P% of the time), runs ``pytest FILE...``
N times while it runs, each round writing pytest's JUnit XML, stops the load, then prints one
line per test that failed or errored in any round (``failures/rounds  test id``). Exit status:
0 when every round passed, 1 otherwise (2: stress-ng or a round's report missing). Each round
runs to its end (no ``-x``): a flaky test shows up beside the others.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path


def failed_tests(report: Path) -> list[str]:
    """The ids (``path::name``) of the tests that failed or errored in a JUnit XML report."""
    failed = []
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "")
            path = module.replace(".", "/") + ".py" if module else "?"
            failed.append(f"{path}::{case.get('name', '?')}")
    return failed


def summary(rounds: int, failures: collections.Counter[str]) -> list[str]:
    """The closing lines: each failed test with its count of failed rounds, most first."""
    if not failures:
        return [f"stress: every test passed in all {rounds} rounds"]
    lines = [f"stress: {len(failures)} test(s) failed in some of {rounds} rounds:"]
    for test, count in sorted(failures.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"  {count}/{rounds}  {test}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/stress.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("files", nargs="+", help="test files (pytest arguments)")
    parser.add_argument("--rounds", type=int, default=3, help="times to run the files (default 3)")
    parser.add_argument(
        "--cpu-load", type=int, default=60, help="stress-ng's --cpu-load (default 60)"
    )
    args = parser.parse_args(argv)
    stress_ng = shutil.which("stress-ng")
    if stress_ng is None:
        print(
            "stress: stress-ng not found (scripts/services.sh stress installs it)", file=sys.stderr
        )
        return 2
    reports = Path(tempfile.mkdtemp(prefix="stress-"))
    load = subprocess.Popen(
        [stress_ng, "--cpu", "2", "--cpu-load", str(args.cpu_load), "--quiet"],
        stdin=subprocess.DEVNULL,
    )
    failures: collections.Counter[str] = collections.Counter()
    try:
        for index in range(1, args.rounds + 1):
            report = reports / f"round-{index}.xml"
            print(
                f"== stress round {index}/{args.rounds} (stress-ng --cpu 2 --cpu-load "
                f"{args.cpu_load})"
            )
            sys.stdout.flush()
            pytest = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
            ]
            subprocess.run([*pytest, *args.files], check=False)
            if not report.exists():
                print(f"stress: round {index} wrote no report ({report})", file=sys.stderr)
                return 2
            failures.update(failed_tests(report))
    finally:
        load.terminate()
        load.wait()
    print(
        "\n".join(summary(args.rounds, failures))
        + f"\nstress: the rounds' reports are in {reports}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
