"""Size and naming figures of the code (issue 17): ``python scripts/metrics.py [--list]``.

Reads ``crontabber/``, ``jobs/`` and ``search/`` (not tests, bench or the configman shim's
vendored parts) with :mod:`ast` and prints:

- the largest module (lines);
- the longest function or method (lines, decorators excluded);
- how many functions are over 50 lines (STYLE.md: "anything over ~50 is a smell");
- names defined twice: module-level classes and functions whose name is defined at module
  level in more than one module (one name, two ideas; methods are left out: ``run`` on every
  job is one idea, and so is ``main``, the entry point of every ``python -m`` module).

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
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and node.name not in SAME_IDEA):
                defined[node.name].add(rel)
    largest = max(sizes.items(), key=lambda kv: kv[1])
    longest = max(funcs, key=lambda kv: kv[1])
    long = sorted((f for f in funcs if f[1] > LONG), key=lambda kv: -kv[1])
    twice = {name: sorted(where) for name, where in sorted(defined.items()) if len(where) > 1}
    print(f"largest module: {largest[0]} ({largest[1]} lines)")
    print(f"longest function: {longest[0]} ({longest[1]} lines)")
    print(f"functions over {LONG} lines: {len(long)}")
    print(f"names defined twice: {len(twice)}")
    if args.list:
        for name, n in long:
            print(f"  long: {name} ({n} lines)")
        for name, where in twice.items():
            print(f"  twice: {name}: {', '.join(where)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
