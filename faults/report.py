"""Keeps each module's results and writes `docs/reliability.md` from them."""

from __future__ import annotations

import json
import pathlib

from faults.registry import MODULES
from faults.result import FaultResult

ROOT = pathlib.Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "reliability.md"


def results_dir() -> pathlib.Path:
    """Where each module's last results are kept: ``faults/results/``, in the repository, so
    a run of some modules on a new machine keeps the others' rows (the results of the runs
    before this directory existed were read back from the report: their figures are one
    text each)."""
    return ROOT / "faults" / "results"


def save(module: str, results: list[FaultResult], *, command: str, date: str) -> None:
    """Writes one module's results, replacing its previous ones."""
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    body = {"command": command, "date": date, "results": [r.to_json() for r in results]}
    tmp = directory / f"{module}.json.tmp"
    tmp.write_text(json.dumps(body, indent=2))
    tmp.replace(directory / f"{module}.json")


def load() -> dict[str, dict]:
    """Every module's last saved results, by module name, in registry order."""
    found = {}
    for module in MODULES:
        path = results_dir() / f"{module}.json"
        if path.exists():
            found[module] = json.loads(path.read_text())
    return found


def render(saved: dict[str, dict]) -> str:
    """The Markdown of docs/reliability.md: one table row per fault kind."""
    lines = [
        "# Reliability: the fault suite's figures",
        "",
        "Written by `make faults` (`python -m faults`); do not edit by hand.",
        "Each fault is thrown at the real services (PostgreSQL, Elasticsearch, s3proxy)",
        "at random points; *converged* counts the throws after which the system reached",
        "a correct state by itself; *lost* and *duplicated* count units lost or",
        "published/counted twice. The goal is converged = thrown and 0 lost, 0 duplicated.",
        "",
        "| fault | thrown | converged | lost | duplicated | figures |",
        "|---|---:|---:|---:|---:|---|",
    ]
    notes: list[str] = []
    runs: list[str] = []
    for module, body in saved.items():
        runs.append(f"- `{module}`: `{body['command']}` on {body['date']}")
        for data in body["results"]:
            r = FaultResult.from_json(data)
            figures = "; ".join(f"{k} {v}".rstrip() for k, v in r.figures.items())
            lines.append(
                f"| {r.fault} | {r.thrown} | {r.converged} | {r.lost} | {r.duplicated} | {figures} "
                "|"
            )
            notes.extend(f"- {r.fault}: {n}" for n in r.notes)
    lines += ["", "## Runs", "", *runs]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def write() -> pathlib.Path:
    REPORT.write_text(render(load()))
    return REPORT
