"""The public surface (docs/architecture.md, "The public surface"): ``crontabber.__all__`` is
whole, documented and has nothing private; the jobs, ``search/`` and the dashboard import only
what the table of that section lets them (an AST scan, imports inside functions included): the
dashboard, besides what everyone may, ``crontabber.inspection`` alone."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import crontabber

REPO = Path(__file__).resolve().parent.parent.parent
EVERYONE = "everyone"
DASHBOARD = "the dashboard"


def surface() -> dict[str, dict[str, set[str] | None]]:
    """The section's table: for each row (``everyone``, ``the dashboard``), module -> the
    names it gives (None: every public one). The dashboard's row adds to everyone's."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## The public surface", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, dict[str, set[str] | None]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith((EVERYONE, DASHBOARD)):
            continue
        modules: dict[str, set[str] | None] = {}
        for module, names in re.findall(r"`(crontabber(?:\.\w+)*)`(?: \(([^)]*)\))?", cells[1]):
            listed = set(re.findall(r"`(\w+)`", names))
            modules[module] = set(crontabber.__all__) if listed == {"__all__"} else (listed or None)
        rows[EVERYONE if cells[0].startswith(EVERYONE) else DASHBOARD] = modules
    rows[DASHBOARD] = {**rows[EVERYONE], **rows[DASHBOARD]}
    return rows


def imports_of(path: Path) -> list[tuple[int, str, list[str]]]:
    """Each import of a ``crontabber`` module in ``path``: (line, module, names imported from
    it; [] for ``import crontabber.x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "crontabber"
        ):
            found.append((node.lineno, node.module or "", [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, [])
                for a in node.names
                if a.name.split(".")[0] == "crontabber"
            ]
    return found


def refused(modules: dict[str, set[str] | None], module: str, names: list[str]) -> list[str]:
    """What of ``from module import names`` the surface ``modules`` does not give."""
    if module not in modules:
        return [module]
    out = []
    for name in names:
        submodule = f"{module}.{name}"
        if submodule in modules and modules[submodule] is None:
            continue  # from crontabber import sqlfiles: a module given whole
        allowed = modules[module]
        if name.startswith("_") or (allowed is not None and name not in allowed):
            out.append(f"{module}.{name}")
    return out


def test_the_table_names_real_modules_and_names():
    rows = surface()
    assert set(rows) == {EVERYONE, DASHBOARD} and len(rows[EVERYONE]) >= 10
    # the dashboard reads the runner through the inspection module alone
    assert set(rows[DASHBOARD]) - set(rows[EVERYONE]) == {"crontabber.inspection"}
    assert rows[DASHBOARD]["crontabber.inspection"] is None
    for module, names in rows[DASHBOARD].items():
        loaded = importlib.import_module(module)
        for name in names or ():
            assert hasattr(loaded, name), f"{module}.{name}"


def test_every_name_in_all_exists_is_documented_and_public():
    assert len(crontabber.__all__) == len(set(crontabber.__all__))
    exports = crontabber._EXPORTS
    assert set(crontabber.__all__) == {*exports, "__version__"}  # each loads on first use
    for name in crontabber.__all__:
        assert not name.startswith("_") or (name.startswith("__") and name.endswith("__")), name
        value = getattr(crontabber, name)
        if name == "__version__":
            assert isinstance(value, str) and "``__version__``" in (crontabber.__doc__ or "")
            continue
        module, attribute = exports[name]
        assert not module.startswith("_") and not attribute.startswith("_"), name
        if callable(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"
        else:  # a constant: a #: comment above its assignment in its module
            source = (REPO / "crontabber" / f"{module}.py").read_text().splitlines()
            line = next(i for i, text in enumerate(source) if re.match(rf"{attribute}\b.*=", text))
            assert source[line - 1].startswith("#:"), f"{name} has no #: comment"
    star: dict[str, object] = {}
    exec("from crontabber import *", star)  # noqa: S102 - what a star import gives: __all__ alone
    assert set(star) - {"__builtins__"} == set(crontabber.__all__)


def test_nothing_exported_is_private_where_it_is_defined():
    for name in crontabber.__all__:
        value = getattr(crontabber, name)
        module = getattr(value, "__module__", None)
        if module is not None:  # a function, a class: defined in a public module, named publicly
            assert module.startswith("crontabber.") and not any(
                p.startswith("_") for p in module.split(".")
            )
            assert not value.__qualname__.startswith("_"), name


def test_the_jobs_search_and_the_dashboard_import_only_the_public_surface():
    rows = surface()
    outside = []
    for package, row in (("jobs", EVERYONE), ("search", EVERYONE), ("dashboard", DASHBOARD)):
        for path in sorted((REPO / package).rglob("*.py")):
            for line, module, names in imports_of(path):
                for what in refused(rows[row], module, names):
                    outside.append(f"{path.relative_to(REPO)}:{line}: {what}")
    assert outside == []


def test_the_scan_sees_an_import_outside_the_surface(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from crontabber.errors import CrontabberError\n"
        "def f():\n"
        "    from crontabber.tick import run_tick\n"
        "    from crontabber.store import StateStore\n"
        "    from crontabber.inspection import job_runs, _overdue_seconds\n"
        "    from crontabber import _EXPORTS, sqlfiles, one_line\n"
        "    import crontabber.cli.dispatch\n"
    )
    rows = surface()
    found = [
        what
        for _, module, names in imports_of(probe)
        for what in refused(rows[DASHBOARD], module, names)
    ]
    assert found == [
        "crontabber.tick",
        "crontabber.store",
        "crontabber.inspection._overdue_seconds",
        "crontabber._EXPORTS",
        "crontabber.cli.dispatch",
    ]
