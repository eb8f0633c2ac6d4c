"""``python -m bench [NAME ...] [--rounds N] [--save-to DIR] [OPTIONS]``: run benchmarks, rewrite
bench/RESULTS.md (its table and notes; the lab notes at its end, kept by hand, stay as they are).

A bench module with an ``options(argv)`` function takes the command line's other options
(``python -m bench fleet --jobs 10,100``); ``--save-to DIR`` writes the results there and
leaves bench/results and RESULTS.md alone (a test's run)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import json
import os
import platform
import shlex
import sys
from pathlib import Path

from .harness import Comparison, Report, Sample

HERE = Path(__file__).resolve().parent
#: RESULTS.md's hand-kept part: from this heading to the end, a rewrite keeps what is there
#: (dated measurements made by hand, which the docs link to for their figures).
LAB_NOTES = "## Lab notes"


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    except OSError:
        mem_kb = 0
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}), "
        f"{mem_kb / 1024 / 1024:.0f} GiB RAM, Python {platform.python_version()}"
    )


RESULTS_DIR = HERE / "results"


def save(name: str, report: Report, command: str, directory: Path = RESULTS_DIR) -> None:
    """Keep one benchmark's latest results (bench/results/NAME.json), with its own table and
    data, if any."""
    directory.mkdir(exist_ok=True)
    record: dict[str, object] = {
        "date": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        "machine": machine(),
        "command": command,
        "comparisons": [dataclasses.asdict(c) for c in report.comparisons],
    }
    if report.table:
        record["table"] = report.table
    if report.data:
        record["data"] = report.data
    (directory / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")


def load_all() -> dict[str, dict]:
    records = {}
    for path in sorted(RESULTS_DIR.glob("*.json")):
        record = json.loads(path.read_text())
        record["comparisons"] = [
            Comparison(**{**c, "ours": Sample(**c["ours"]), "baseline": Sample(**c["baseline"])})
            for c in record["comparisons"]
        ]
        records[path.stem] = record
    return records


def render(records: dict[str, dict]) -> str:
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python -m bench`) from `bench/results/*.json`. Each row: ours "
        "and the baseline interleaved in one run; medians over the rounds, spread = min-max. "
        "Ratio > 1 means ours is better (for times and memory: baseline / ours).",
        "",
        "| benchmark | metric | ours (median) | baseline (median) | ratio | goal | rounds | ours "
        "spread "
        "| baseline spread |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for module, record in records.items():
        notes.append(
            f"- {module}: run {record['date']} on {record['machine']} with `{record['command']}`"
        )
        for c in record["comparisons"]:
            lines.append(
                f"| {module}: {c.name} | {c.metric} ({c.unit}) | {c.ours.median:.4g} | "
                f"{c.baseline.median:.4g} ({c.baseline.label}) | {c.ratio:.2f}x | {c.goal} | "
                f"{len(c.ours.values)} | {c.ours.spread} | {c.baseline.spread} |"
            )
            notes += [f"- {module}: {note}" for note in c.notes]
    if notes:
        lines += ["", "## Notes", "", *notes]
    for module, record in records.items():
        if record.get("table"):
            run = f"Run {record['date']} with `{record['command']}`."
            lines += ["", f"## {module}", "", run, ""]
            lines += record["table"]
    return "\n".join(lines) + "\n"


def lab_notes(results: str) -> str:
    """The hand-kept lab notes of RESULTS.md's text ``results`` (from :data:`LAB_NOTES` to its
    end, after a blank line), or ``""``."""
    at = results.find("\n" + LAB_NOTES + "\n")
    return "\n" + results[at + 1 :] if at >= 0 else ""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", add_help=False)
    parser.add_argument("-h", "--help", action="store_true", help="this, then each named bench's")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--rounds", type=int, default=0, help="rounds (default: each bench's own)")
    parser.add_argument("--save-to", type=Path, help="write NAME.json there, not RESULTS.md")
    args, extra = parser.parse_known_args(argv)
    names = args.names or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    modules = {name: importlib.import_module(f"bench.bench_{name}") for name in names}
    if args.help:
        parser.print_help()
        for name in args.names:  # a bench's own options (bench_fleet.options)
            if hasattr(modules[name], "options"):
                print()
                modules[name].options(["--help"])
        return 0
    # every bench's options checked before the first one runs
    own = {name: module for name, module in modules.items() if hasattr(module, "options")}
    taking = {name: module.options(extra) for name, module in own.items()}
    if extra and len(taking) < len(modules):
        refusing = ", ".join(name for name in modules if name not in taking)
        parser.error(f"unrecognized arguments: {' '.join(extra)} ({refusing} takes no options)")
    command = ("python -m bench " + " ".join(shlex.quote(a) for a in argv)).strip()
    for name, module in modules.items():
        print(f"== {name}", file=sys.stderr)
        rounds = args.rounds or module.ROUNDS
        result = module.run(rounds, taking[name]) if name in taking else module.run(rounds)
        report = result if isinstance(result, Report) else Report(result)
        for c in report.comparisons:
            print(
                f"   {c.name}: ours {c.ours.median:.4g} {c.unit}, {c.baseline.label} "
                f"{c.baseline.median:.4g} {c.unit}, ratio {c.ratio:.2f}x",
                file=sys.stderr,
            )
        if report.table:
            print("\n".join(report.table))
        save(name, report, command, args.save_to or RESULTS_DIR)
    if args.save_to is not None:
        return 0
    results = HERE / "RESULTS.md"
    results.write_text(
        render(load_all()) + lab_notes(results.read_text() if results.exists() else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
