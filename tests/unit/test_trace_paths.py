"""The traced figures' counting rule (``scripts/trace_paths.py``): distinct files, and returns
to a file already left, from a path; a forked child's path put in where it was forked; the
command's section between its marks; and the recorder on a small package of its own, forking."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("trace_paths", REPO / "scripts" / "trace_paths.py")
assert _spec and _spec.loader
trace_paths = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trace_paths)

ENTER, LEAVE = trace_paths.ENTER, trace_paths.LEAVE


@pytest.mark.parametrize(
    ("path", "files", "returns"),
    [
        ([], 0, 0),
        (["a"], 1, 0),
        (["a", "a", "a"], 1, 0),  # calls within one file: one visit
        (["a", "b", "c"], 3, 0),
        (["a", "b", "a"], 2, 1),
        (["a", "b", "b", "a", "b"], 2, 2),
        (["a", "b", "c", "b", "a", "c", "d"], 4, 3),
    ],
)
def test_files_and_returns_of_a_path(path, files, returns):
    assert trace_paths.count_path(path) == (files, returns)


def test_a_forked_childs_path_goes_where_it_was_forked():
    paths = {1: ["a", "b", "a", "c"], 2: ["x", "y"], 3: ["z"], 4: ["w"]}
    forks = {2: (1, 2), 3: (1, 3), 4: (2, 1)}  # 4 is forked by 2 after its first file
    assert trace_paths.spliced(paths, forks, 1) == ["a", "b", "x", "w", "y", "a", "z", "c"]


def test_the_section_is_the_span_between_the_marks():
    path = ["m", ENTER, "a", "b", "a", LEAVE, "m", "c"]
    assert trace_paths.section(path) == (["a", "b", "a"], ["m", "a", "b", "a", "m", "c"])
    assert trace_paths.section(["m", ENTER, "a", "b"]) == (["a", "b"], ["m", "a", "b"])
    assert trace_paths.section(["m", "a"]) == ([], ["m", "a"])


def _package(root: Path) -> Path:
    """``pkg/``: ``one.start`` calls ``two.helper`` then ``one.back``, forks, and in the child
    calls ``two.helper`` before ``os._exit``; the parent calls ``one.back`` after the child."""
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text(
        "import os\n"
        "from pkg import two\n"
        "def back():\n    return 1\n"
        "def start():\n"
        "    two.helper()\n"
        "    back()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        two.helper()\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "    back()\n"
        "    return 2\n"
        "def outside():\n    return start()\n"
    )
    (pkg / "two.py").write_text("def helper():\n    return 3\n")
    return pkg


def test_the_recorder_follows_the_calls_into_a_forked_child(tmp_path, monkeypatch):
    pkg = _package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("pkg", "pkg.one", "pkg.two"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    from pkg import one

    folder = tmp_path / "paths"
    folder.mkdir()
    recorder = trace_paths.Recorder(pkg, folder, ("pkg/one.py", "start"))
    assert recorder.run(one.outside) == 2
    assert os.getpid() == recorder.root
    path = recorder.path()
    # outside (one), start (one, marked), helper (two), back (one), fork: the child's helper
    # (two), then the parent's back (one) and the end of start
    assert path == [
        "pkg/one.py",
        ENTER,
        "pkg/one.py",
        "pkg/two.py",
        "pkg/one.py",
        "pkg/two.py",
        "pkg/one.py",
        LEAVE,
    ]
    section, whole = trace_paths.section(path)
    assert trace_paths.count_path(section) == (2, 3)
    assert trace_paths.count_path(whole) == (2, 3)  # outside() and start() are one visit


def test_several_runs_print_the_fewest_returns_and_what_differed():
    assert trace_paths.figures([(3, 5)]) == "3 files, 5 returns"
    assert trace_paths.figures([(3, 5), (3, 5), (3, 5)]) == "3 files, 5 returns (fewest of 3 runs)"
    assert (
        trace_paths.figures([(3, 9), (4, 5), (3, 7), (2, 5)])
        == "2 files, 5 returns (fewest of 4 runs; files 2-4; returns 5-9)"
    )
