"""Size, naming and import figures of the code: ``python scripts/metrics.py [--list]``.

Reads ``crontabber/``, ``jobs/`` and ``search/`` (not tests, bench or the configman shim's
vendored parts) with :mod:`ast` and prints:

- the largest module (lines);
- the longest function or method (lines, decorators excluded);
- how many functions are over 50 lines (STYLE.md: "anything over ~50 is a smell");
- names defined twice: module-level classes and functions whose name is defined at module
  level in more than one module (one name, two ideas; methods are left out: ``run`` on every
  job is one idea, and so is ``main``, the entry point of every ``python -m`` module);
- import circles in ``crontabber/``: groups of its modules that import each other, directly or
  through others (imports inside functions count: deferring an import hides a circle, it does
  not end it);
- modules of ``crontabber/`` without a docstring (``--list`` prints each module's first
  docstring line, which must say what the module owns).

Nothing is run or imported; the figures are reproducible from a checkout alone.
"""

from __future__ import annotations

import argparse
import ast
import collections
import sys
from pathlib import Path

ROOTS = ("crontabber", "jobs", "search")
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
    """``crontabber.cli.operate`` for ``crontabber/cli/operate.py`` (a package: its ``__init__``)."""
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/metrics.py")
    parser.add_argument("--list", action="store_true", help="list the long functions and names")
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    sizes: dict[str, int] = {}
    funcs: list[tuple[str, int]] = []
    defined: dict[str, set[str]] = collections.defaultdict(set)
    for path in modules(repo):
        rel = str(path.relative_to(repo))
        text = path.read_text()
        sizes[rel] = len(text.splitlines())
        tree = ast.parse(text, rel)
        funcs += [(f"{rel}:{name}", n) for name, n in functions(tree)]
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in SAME_IDEA:
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
    print(f"modules of crontabber/ without a docstring: {sum(not line for line in firsts.values())}")
    if args.list:
        for name, n in long:
            print(f"  long: {name} ({n} lines)")
        for name, where in twice.items():
            print(f"  twice: {name}: {', '.join(where)}")
        for loop in loops:
            print(f"  circle: {' <-> '.join(loop)}")
        for name, line in firsts.items():
            print(f"  module {name}: {line or '(no docstring)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
