"""Size, naming and import figures of the code: ``python scripts/metrics.py [--list] [--traced]``.

Reads ``crontabber/``, ``jobs/`` and ``search/`` (not tests, bench or the configman shim's
vendored parts) with :mod:`ast` and prints:

- the largest module (lines);
- the longest function or method (lines, decorators excluded);
- how many functions are over 50 lines (docs/conventions.md, "Size and names": a smell);
- names defined twice: module-level classes and functions whose name is defined at module
  level in more than one module (one name, two ideas; methods are left out: ``run`` on every
  job is one idea, and so is ``main``, the entry point of every ``python -m`` module);
- import circles in ``crontabber/``: groups of its modules that import each other, directly or
  through others (imports inside functions count: deferring an import hides a circle, it does
  not end it);
- folder circles: subpackages (``crontabber/alerts/``, ``jobs/uploads/``) or top folders
  (``faults/``, ``bench/``) of the whole repository that import each other, each folded into
  one node beside its package's own modules (``crontabber/alerts/`` <-> ``crontabber/explain.py``
  is one); tests are left out (they import what they test, and their fixtures are shared);
- modules of ``crontabber/`` without a docstring (``--list`` prints each module's first
  docstring line, which must say what the module owns);
- the largest class (lines and methods);
- imports inside functions (deferred imports: each hides a dependency from the module's head);
- test cross-imports: modules of the whole repository importing a test module or a
  ``conftest.py`` (shared test code lives in ``tests/helpers.py`` and ``tests/fixtures/``);
- bench imports: modules outside ``bench/`` importing it (the benchmarks are a leaf: what they
  share with tests and the fault suite lives in ``devservices/`` or ``tests/fixtures/``).

Nothing is run or imported; the figures are reproducible from a checkout alone. With
``--traced`` it then prints the traced figures of ``scripts/trace_paths.py`` (a cron tick
running one due job, and ``--rerun NAME --parallel 2``: files and returns of their call paths),
which runs those commands against the local services (``make services``; a temporary
database): a separate script, so that the plain figures need no service.
"""

from __future__ import annotations

import argparse
import ast
import collections
import subprocess
import sys
from pathlib import Path

ROOTS = ("crontabber", "jobs", "search")
#: Every directory of Python code in the repository, for the cross-import counts.
EVERYWHERE = ROOTS + (
    "dashboard",
    "configman",
    "devservices",
    "tests",
    "bench",
    "faults",
    "scripts",
)
LONG = 50
SAME_IDEA = {"main"}  # each ``python -m`` module's entry point


def modules(repo: Path) -> list[Path]:
    """Every ``.py`` file under the roots, sorted."""
    return sorted(p for root in ROOTS for p in (repo / root).rglob("*.py"))


def functions(tree: ast.AST) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every function and method in ``tree``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert child.end_lineno is not None
                found.append((prefix + child.name, child.end_lineno - child.lineno + 1))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def module_name(repo: Path, path: Path) -> str:
    """``crontabber.cli.operate`` for ``crontabber/cli/operate.py`` (a package: its
    ``__init__``)."""
    parts = list(path.relative_to(repo).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(repo: Path, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that the module at ``path`` imports, anywhere in it."""
    name = module_name(repo, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            found.update(t for t in [base] + [f"{base}.{a.name}" for a in node.names] if t in known)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
    found.discard(name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def folded(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its first ``depth`` name parts (2: a subpackage
    is one node, its package's own modules stay apart; 1: a top folder is one node)."""
    fold = lambda name: ".".join(name.split(".")[:depth])  # noqa: E731
    out: dict[str, set[str]] = collections.defaultdict(set)
    for name, found in graph.items():
        out[fold(name)].update(fold(other) for other in found)
    for name, found in out.items():
        found.discard(name)
    return dict(out)


def folder_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of :func:`folded` ``graph``, subpackages then top folders, tests left out."""
    apart = lambda name: name.split(".")[0] == "tests"  # noqa: E731
    kept = {
        name: {o for o in found if not apart(o)} for name, found in graph.items() if not apart(name)
    }
    return circles(folded(kept, 2)) + circles(folded(kept, 1))


def runner_modules(repo: Path) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The import graph of ``crontabber/`` and each module's first docstring line."""
    paths = sorted((repo / "crontabber").rglob("*.py"))
    known = {module_name(repo, p) for p in paths}
    graph = {module_name(repo, p): imports(repo, p, known) for p in paths}
    firsts = {}
    for p in paths:
        doc = ast.get_docstring(ast.parse(p.read_text()))
        firsts[module_name(repo, p)] = doc.strip().splitlines()[0] if doc else ""
    return graph, firsts


def classes(tree: ast.AST) -> list[tuple[str, int, int]]:
    """``(qualified name, lines, methods)`` of every class in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            methods = sum(isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) for c in node.body)
            found.append((node.name, node.end_lineno - node.lineno + 1, methods))
    return found


def deferred_imports(tree: ast.AST) -> int:
    """How many import statements in ``tree`` sit inside a function (at any depth)."""
    count = 0

    def visit(node: ast.AST, in_function: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                count += in_function
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(tree, False)
    return count


def is_test_module(name: str) -> bool:
    """A test module or a ``conftest`` under ``tests/`` (``tests.cli.test_cli``,
    ``tests.conftest``)."""
    last = name.rpartition(".")[2]
    return name.split(".")[0] == "tests" and (last.startswith("test_") or last == "conftest")


def import_graph(repo: Path) -> dict[str, set[str]]:
    """Each module of :data:`EVERYWHERE` and the repository's modules it imports, anywhere in it."""
    paths = sorted(
        p for root in EVERYWHERE if (repo / root).is_dir() for p in (repo / root).rglob("*.py")
    )
    known = {module_name(repo, p) for p in paths}
    return {module_name(repo, p): imports(repo, p, known) for p in paths}


def test_cross_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, test module)``: a test module or conftest imported as a library."""
    return sorted(
        (name, other) for name, found in graph.items() for other in found if is_test_module(other)
    )


def bench_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, bench module)``: ``bench`` imported from outside it."""
    inside = lambda name: name == "bench" or name.startswith("bench.")  # noqa: E731
    return sorted(
        (name, other)
        for name, found in graph.items()
        for other in found
        if inside(other) and not inside(name)
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/metrics.py")
    parser.add_argument("--list", action="store_true", help="list the long functions and names")
    parser.add_argument(
        "--traced",
        action="store_true",
        help="also the traced paths of two real commands (scripts/trace_paths.py; the services)",
    )
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    sizes: dict[str, int] = {}
    funcs: list[tuple[str, int]] = []
    defined: dict[str, set[str]] = collections.defaultdict(set)
    klasses: list[tuple[str, int, int]] = []
    deferred = 0
    for path in modules(repo):
        rel = str(path.relative_to(repo))
        text = path.read_text()
        sizes[rel] = len(text.splitlines())
        tree = ast.parse(text, rel)
        funcs += [(f"{rel}:{name}", n) for name, n in functions(tree)]
        klasses += [(f"{rel}:{name}", n, methods) for name, n, methods in classes(tree)]
        deferred += deferred_imports(tree)
        for node in tree.body:
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and node.name not in SAME_IDEA
            ):
                defined[node.name].add(rel)
    largest = max(sizes.items(), key=lambda kv: kv[1])
    longest = max(funcs, key=lambda kv: kv[1])
    long = sorted((f for f in funcs if f[1] > LONG), key=lambda kv: -kv[1])
    twice = {name: sorted(where) for name, where in sorted(defined.items()) if len(where) > 1}
    print(f"largest module: {largest[0]} ({largest[1]} lines)")
    print(f"longest function: {longest[0]} ({longest[1]} lines)")
    print(f"functions over {LONG} lines: {len(long)}")
    print(f"names defined twice: {len(twice)}")
    graph, firsts = runner_modules(repo)
    loops = circles(graph)
    print(f"import circles in crontabber/: {len(loops)}")
    print(
        f"modules of crontabber/ without a docstring: {sum(not line for line in firsts.values())}"
    )
    biggest = max(klasses, key=lambda kv: kv[1])
    print(f"largest class: {biggest[0]} ({biggest[1]} lines, {biggest[2]} methods)")
    print(f"imports inside functions: {deferred}")
    everywhere = import_graph(repo)
    folders = folder_circles(everywhere)
    print(f"folder circles: {len(folders)}")
    crossed, benched = test_cross_imports(everywhere), bench_imports(everywhere)
    print(f"test cross-imports: {len(crossed)} in {len({name for name, _ in crossed})} modules")
    print(f"bench imports: {len(benched)} in {len({name for name, _ in benched})} modules")
    if args.list:
        for name, n in long:
            print(f"  long: {name} ({n} lines)")
        for name, where in twice.items():
            print(f"  twice: {name}: {', '.join(where)}")
        for loop in loops:
            print(f"  circle: {' <-> '.join(loop)}")
        for loop in folders:
            print(f"  folder circle: {' <-> '.join(loop)}")
        for name, line in firsts.items():
            print(f"  module {name}: {line or '(no docstring)'}")
        for name, other in crossed:
            print(f"  test cross-import: {name} -> {other}")
        for name, other in benched:
            print(f"  bench import: {name} -> {other}")
    if args.traced:
        sys.stdout.flush()
        script = repo / "scripts" / "trace_paths.py"
        # the commands' own log lines go to stderr: shown only when the tracing failed
        done = subprocess.run([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
        if done.returncode:
            sys.stderr.write(done.stderr)
        return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
