"""The runner's import graph has no circles, its folders none either, and every module says
what it owns; no module imports a test module (or a conftest) and nothing outside ``bench/``
imports it (``python scripts/metrics.py --list`` prints all of them)."""

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


def test_no_folder_imports_another_that_imports_it_back():
    graph = metrics.import_graph(REPO)
    assert metrics.folded(graph, 2)["crontabber.alerts"] >= {"crontabber.store"}
    assert metrics.folder_circles(graph) == []


def test_the_folder_circle_finder_folds_subpackages_and_top_folders():
    graph = {
        "pkg.sub.a": {"pkg.top"},
        "pkg.top": {"pkg.sub.b"},  # a subpackage and a module beside it
        "faults.x": {"bench.y"},
        "bench.y": {"faults.z"},  # two top folders
        "tests.test_a": {"pkg.top"},
        "pkg.sub.b": {"tests.fixtures"},  # through tests: left out
    }
    assert metrics.folder_circles(graph) == [["pkg.sub", "pkg.top"], ["bench", "faults"]]


def test_every_runner_module_has_a_docstring():
    _, firsts = metrics.runner_modules(REPO)
    assert [name for name, line in firsts.items() if not line] == []


def test_no_module_imports_a_test_module_and_only_bench_imports_bench():
    graph = metrics.import_graph(REPO)
    assert (
        graph["tests.conftest"] >= {"tests.helpers"}
        and "bench.services" in graph["bench.bench_tick"]
    )
    assert metrics.test_cross_imports(graph) == []
    assert metrics.bench_imports(graph) == []


def test_the_cross_import_finders_find_deferred_and_relative_imports(tmp_path):
    files = {
        "tests/__init__.py": "",
        "tests/conftest.py": "REPO = 1\n",
        "tests/helpers.py": "from tests.conftest import REPO\n",
        "tests/cli/__init__.py": "",
        "tests/cli/test_a.py": "def test_a():\n    from .test_b import shared\n",
        "tests/cli/test_b.py": "from tests import helpers\nshared = 1\n",
        "bench/__init__.py": "",
        "bench/services.py": "from . import harness\n",
        "bench/harness.py": "",
        "faults/__init__.py": "",
        "faults/net.py": "def create():\n    from bench.services import database\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = metrics.import_graph(tmp_path)
    assert metrics.test_cross_imports(graph) == [
        ("tests.cli.test_a", "tests.cli.test_b"),
        ("tests.helpers", "tests.conftest"),
    ]
    assert metrics.bench_imports(graph) == [("faults.net", "bench.services")]
