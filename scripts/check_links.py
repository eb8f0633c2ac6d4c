"""No Markdown file of the repository points outside it: ``python scripts/check_links.py``.

Reads every ``.md`` file of the checkout (hidden directories and the built site left out) and
finds each relative path it names, as a link (``[text](path)``, ``[name]: path``,
``href="path"``) or written out (``../shared/STYLE.md``), resolves it from the file's
directory and reports those that land outside the repository, and absolute paths. A page
that links outside the checkout works on one machine only; ``make docs`` runs this and fails
on any. Links with a scheme (``https:``, ``mailto:``) and anchors are not paths.

Exit 0 when none, 1 with one line per path (``file:line: path``) otherwise.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(
    r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"  # [text](path "title")
    r"|^\s*\[[^\]]+\]:\s*(\S+)"  # [name]: path
    r"|(?:href|src)=\"([^\"]+)\"",
    re.M,
)
# A path written out that climbs: ../x, ../../x (not the ".../" of an elided URL)
CLIMB = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-][\w./-]*)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
SKIPPED = {".site", "site", "node_modules"}


def markdown_files(repo: Path) -> list[Path]:
    """The ``.md`` files of ``repo``, outside hidden and built directories."""
    return sorted(
        p
        for p in repo.rglob("*.md")
        if not any(
            part.startswith(".") or part in SKIPPED for part in p.relative_to(repo).parts[:-1]
        )
    )


def targets(text: str) -> list[tuple[int, str]]:
    """``(line, path)`` of every path ``text`` names: its links' targets and the climbing
    paths written out, without their anchor or query (anchors alone and URLs with a
    scheme left out)."""
    found = []
    for pattern in (LINK, CLIMB):
        for match in pattern.finditer(text):
            target = (
                next(group for group in match.groups() if group).split("#", 1)[0].split("?", 1)[0]
            )
            if target and not SCHEME.match(target):
                found.append((text.count("\n", 0, match.start()) + 1, target))
    return sorted(set(found))


def outside(repo: Path, page: Path, target: str) -> bool:
    """Whether ``target``, named in ``page``, is an absolute path or resolves outside ``repo``."""
    if target.startswith("/"):
        return True
    return not (page.parent / target).resolve().is_relative_to(repo.resolve())


def leaving(repo: Path) -> list[str]:
    """``file:line: path`` for every path of a Markdown file of ``repo`` that leaves it."""
    return [
        f"{page.relative_to(repo)}:{line}: {target}"
        for page in markdown_files(repo)
        for line, target in targets(page.read_text())
        if outside(repo, page, target)
    ]


def main() -> int:
    found = leaving(Path(__file__).resolve().parent.parent)
    for line in found:
        print(f"{line}: points outside the repository", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
