"""Fit Python source lines to the line length that ``ruff format`` leaves long:
``python scripts/fit_lines.py [--width N] PATH...`` (then ``ruff format``).

``ruff format`` wraps code, never text. This breaks what it leaves over the width, without
changing what the code means:

- a string literal (not triple-quoted) in brackets, alone on its line or ending it with a
  comma: cut at spaces into adjacent literals on lines of their own (Python joins them: the
  same value). An f-string is cut outside its ``{...}``; a piece without one loses its ``f``;
- a comment line: its words carried over to ``#`` lines below it, at its indentation;
- a line of a docstring: its words carried over to a line below it, at its indentation
  (the docstring's text keeps its words and their order: help and the reference pages read
  the same).

Anything else over the width is listed (``path:line: length``) for a person to fit, and the
exit status is then 1. Each rewritten file is checked first: its syntax tree must equal the
original's, docstrings compared by their words. Files are changed in place; run it again
after a merge.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from pathlib import Path

STRING = re.compile(r"^(\s*)([rRfFbBuU]{0,2})(\"|')(.*)\3(,?)\s*$")
#: A statement or an item ending in one string literal: ``return "..."``, ``x = "..."``,
#: ``name="...",`` or ``"key": "...",`` (in brackets).
HEADED = re.compile(
    r"^(\s*)(return |else |[\w.]+ = |\w+=|\"[^\"]*\": )([rRfFbBuU]{0,2}(\"|').*\4)(,?)\s*$"
)


def _docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers (1-based) inside the docstrings of ``tree``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    end = body[0].end_lineno or body[0].lineno
                    lines.update(range(body[0].lineno, end + 1))
    return lines


def _bracket_depths(text: str) -> dict[int, int]:
    """For each line number, the bracket depth at its start (tokens, not text)."""
    depths: dict[int, int] = {}
    depth = 0
    row = 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        while row < token.start[0]:
            row += 1
            depths.setdefault(row, depth)
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
    return depths


def _cuts(body: str, is_f: bool, room: int) -> list[str] | None:
    """``body`` (a literal's inside) cut after spaces into pieces of at most ``room``
    characters, never inside ``{...}`` of an f-string nor after a backslash; None if no cut fits."""
    pieces: list[str] = []
    start = 0
    while len(body) - start > room:
        best = -1
        depth = 0
        index = start
        while index < len(body) and index - start < room:
            char = body[index]
            if is_f and depth == 0 and body[index : index + 2] in ("{{", "}}"):
                index += 2  # a literal brace
                continue
            if is_f and char == "{":
                depth += 1
            elif is_f and char == "}" and depth:
                depth -= 1
            elif char == " " and depth == 0 and body[index - 1] != "\\":
                best = index + 1
            index += 1
        if best <= start:
            return None
        pieces.append(body[start:best])
        start = best
    pieces.append(body[start:])
    return pieces


def _fit_headed(line: str, width: int, in_brackets: bool) -> list[str] | None:
    """``return "..."`` and the like: the literal in parentheses of its own, then cut."""
    match = HEADED.match(line)
    if match is None or (
        match.group(2) != "return " and not match.group(2).endswith(" = ") and not in_brackets
    ):
        return None  # (``else``, ``name=`` and ``"key": `` only in brackets)
    indent, head, literal, _, comma = match.groups()
    inner = _fit_string(f"{indent}    {literal}\n", width, pieces=1)
    if inner is None:
        return None
    return [f"{indent}{head}(\n", *inner, f"{indent}){comma}\n"]


def _fit_string(line: str, width: int, pieces: int = 2) -> list[str] | None:
    """A line holding one literal (in brackets), cut into at least ``pieces`` literals."""
    match = STRING.match(line)
    if match is None:
        return None
    indent, prefix, quote, body, comma = match.groups()
    if quote in body.replace("\\" + quote, ""):
        return None  # two literals on the line already, or an escaped quote: leave it
    is_f = "f" in prefix.lower()
    room = width - len(indent) - len(prefix) - 2 - len(comma)
    cut = _cuts(body, is_f, room)
    if cut is None or len(cut) < pieces:
        return None
    out = []
    for index, piece in enumerate(cut):
        own = prefix if not is_f or "{" in piece else prefix.replace("f", "").replace("F", "")
        end = comma if index == len(cut) - 1 else ""
        out.append(f"{indent}{own}{quote}{piece}{quote}{end}\n")
    return out


def _wrap_words(line: str, width: int, lead: str) -> list[str] | None:
    """``line`` cut at the last spaces that fit; its indentation kept, each later piece
    starting with ``lead``; None if a word alone would not fit."""
    text = line.rstrip("\n")
    indent = text[: len(text) - len(text.lstrip(" "))]
    words = text[len(indent) :].split(" ")
    if text.startswith(lead):
        words = text[len(lead) :].split(" ")
        indent = lead
    out: list[str] = []
    current = indent + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) > width and current.strip() not in ("", lead.strip()):
            out.append(current.rstrip() + "\n")
            current = lead + word
        else:
            current = f"{current} {word}"
    out.append(current.rstrip() + "\n")
    return out if len(out) > 1 and all(len(o) - 1 <= width for o in out) else None


def _fit_comment(line: str, width: int) -> list[str] | None:
    match = re.match(r"^(\s*)# (.*)$", line.rstrip("\n"))
    if match is None:
        return None
    lead = f"{match.group(1)}# "
    return _wrap_words(lead + match.group(2), width, lead)


def _fit_docstring_line(line: str, width: int) -> list[str] | None:
    indent = re.match(r"^\s*", line).group(0)  # type: ignore[union-attr]
    return _wrap_words(line, width, indent)


def _words_tree(tree: ast.AST) -> str:
    """``tree`` dumped with every docstring reduced to its words."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    body[0].value.value = " ".join(body[0].value.value.split())
    return ast.dump(tree)


def fit(path: Path, width: int) -> list[str]:
    """Fit ``path``'s long lines in place; the lines still too long (``path:line: length``)."""
    text = path.read_text()
    tree = ast.parse(text)
    docstrings = _docstring_lines(tree)
    depths = _bracket_depths(text)
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    left: list[str] = []
    for number, line in enumerate(lines, 1):
        if len(line.rstrip("\n")) <= width:
            out.append(line)
            continue
        fitted = None
        if number in docstrings:
            fitted = _fit_docstring_line(line, width)
        elif line.lstrip().startswith("#"):
            fitted = _fit_comment(line, width)
        else:
            in_brackets = depths.get(number, 0) > 0
            fitted = _fit_string(line, width) if in_brackets else None
            fitted = fitted or _fit_headed(line, width, in_brackets)
        if fitted is None:
            left.append(f"{path}:{len(out) + 1}: {len(line.rstrip())}")
            out.append(line)
        else:
            out.extend(fitted)
    new = "".join(out)
    if new != text:
        if _words_tree(ast.parse(new)) != _words_tree(ast.parse(text)):
            return [f"{path}: not rewritten (its meaning would change)"]
        path.write_text(new)
    return left


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/fit_lines.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("paths", nargs="+", type=Path, help="files or directories (their *.py)")
    parser.add_argument("--width", type=int, default=100, help="the line length (default 100)")
    args = parser.parse_args(argv)
    files = [f for p in args.paths for f in ([p] if p.is_file() else sorted(p.rglob("*.py")))]
    left = [entry for path in files for entry in fit(path, args.width)]
    print("\n".join(left), file=sys.stderr) if left else None
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
