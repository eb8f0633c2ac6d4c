"""The runner's import graph has no circles and every module says what it owns
(``python scripts/metrics.py --list`` prints both)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("metrics_script", REPO / "scripts" / "metrics.py")
assert _spec and _spec.loader
metrics = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(metrics)


def test_no_import_circles_in_the_runner():
    graph, _ = metrics.runner_modules(REPO)
    assert "crontabber.cli.dispatch" in graph and graph["crontabber.cli.operate"]
    assert metrics.circles(graph) == []


def test_the_circle_finder_finds_a_circle_through_a_deferred_import():
    assert metrics.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_runner_module_has_a_docstring():
    _, firsts = metrics.runner_modules(REPO)
    assert [name for name, line in firsts.items() if not line] == []
