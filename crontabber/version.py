"""What version this code is, taken from the git tags (``vX.Y.Z`` gives ``X.Y.Z``).

Two answers, for two costs:

- :func:`built`: what the build wrote into ``crontabber/_version.py`` (``setup.py``'s hook:
  a wheel, an sdist), or :data:`UNBUILT` in a source tree. The tick's fleet record
  (``crontabber_host.version``) reads :func:`recorded`: the built one, or in a git checkout
  :data:`UNBUILT` with the commit read from the checkout's files (no git process, no
  ``importlib.metadata``), so two hosts running different checkouts show different versions.
- :func:`version`: the whole answer (``crontabber.__version__``), read lazily by
  ``--version``, ``--configtest``, the dashboard, Sentry's release and the webhooks' agent:
  the built one, else in a git checkout ``git describe`` (:func:`from_describe`), else
  :data:`UNKNOWN`.

This module imports nothing at its top (the idle tick imports it); ``setup.py`` loads it by
its path, without the package.
"""

from __future__ import annotations

#: What a tick records when the code runs from a source tree (no build wrote a version).
UNBUILT = "0+unbuilt"
#: What :func:`version` says when neither a build nor git knows.
UNKNOWN = "0+unknown"
#: ``git describe``'s arguments: the newest ``v``-tag, its distance and commit, dirty or not
#: (only the commit when no tag is reachable).
DESCRIBE = ("describe", "--tags", "--long", "--dirty", "--always", "--match", "v[0-9]*")

_cached: list[str] = []


def built() -> str:
    """The version a build wrote into the package, or :data:`UNBUILT`."""
    try:
        from ._version import version as written  # written by setup.py; absent in a checkout
    except ImportError:
        return UNBUILT
    return str(written)


def recorded() -> str:
    """What a tick records as this host's version: :func:`built`, or in a git checkout
    ``0+unbuilt.g<commit>`` (its first 7 hex digits, :func:`checkout_commit`), else
    :data:`UNBUILT`. Uncommitted changes do not show: git would have to be asked."""
    found = built()
    if found != UNBUILT:
        return found
    import os

    commit = checkout_commit(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return f"{UNBUILT}.g{commit[:7]}" if commit else UNBUILT


def checkout_commit(root: str) -> str | None:
    """The commit the git checkout at ``root`` is on, read from its files: ``.git/HEAD``
    (a commit, or a branch), the branch's ref file or ``packed-refs``; a linked worktree's
    ``.git`` file (``gitdir:``) and its ``commondir`` followed. None when ``root`` is no
    checkout or its files say nothing readable (an unborn branch, another layout)."""
    import os

    def read(path: str) -> str:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()

    try:
        git = os.path.join(root, ".git")
        if os.path.isfile(git):  # a linked worktree or a submodule
            pointer = read(git)
            if not pointer.startswith("gitdir:"):
                return None
            git = os.path.join(root, pointer.removeprefix("gitdir:").strip())
        common = git
        if os.path.isfile(os.path.join(git, "commondir")):
            common = os.path.join(git, read(os.path.join(git, "commondir")))
        head = read(os.path.join(git, "HEAD"))
        if not head.startswith("ref:"):
            return head if _is_commit(head) else None
        ref = head.removeprefix("ref:").strip()
        for where in (git, common):
            if os.path.isfile(os.path.join(where, ref)):
                found = read(os.path.join(where, ref))
                return found if _is_commit(found) else None
        for line in read(os.path.join(common, "packed-refs")).splitlines():
            commit, _, name = line.partition(" ")
            if name == ref and _is_commit(commit):
                return commit
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def version() -> str:
    """This code's version (PEP 440): the built one; else, in a git checkout, from ``git
    describe`` (a tag ``v1.2.0`` gives ``1.2.0``, 3 commits later ``1.2.0.post3+gabc1234``,
    uncommitted changes add ``.dirty``, no tag ``0+gabc1234``); else :data:`UNKNOWN`.
    Computed once per process."""
    if not _cached:
        found = built()
        if found == UNBUILT:
            import os

            found = from_git(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) or UNKNOWN
        _cached.append(found)
    return _cached[0]


def from_git(root: str) -> str | None:
    """The version of the git checkout at ``root`` (:func:`from_describe`), or None when
    ``root`` is no checkout or git cannot tell."""
    import os
    import subprocess

    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        done = subprocess.run(
            ["git", *DESCRIBE], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return from_describe(done.stdout.strip()) if done.returncode == 0 else None


def from_describe(described: str) -> str:
    """A PEP 440 version from ``git describe`` output (:data:`DESCRIBE`):
    ``v1.2.0-0-gabc1234`` gives ``1.2.0``; ``v1.2.0-3-gabc1234-dirty`` gives
    ``1.2.0.post3+gabc1234.dirty``; ``abc1234`` (no tag) gives ``0+gabc1234``.

    Raises:
        ValueError: ``described`` is no such output.
    """
    dirty = described.endswith("-dirty")
    described = described.removesuffix("-dirty")
    tagged = "-" in described
    if tagged:  # v1.2.0-3-gabc1234
        tag, distance, commit = described.rsplit("-", 2)
        base = tag.removeprefix("v")
    else:  # no tag: abc1234
        tag, base, distance, commit = "v", "0", "0", f"g{described}"
    if not (
        tag.startswith("v")
        and distance.isdigit()
        and commit.startswith("g")
        and commit[1:].isalnum()
    ):
        raise ValueError(f"not git describe output: {described!r}")
    local = ".".join(
        ([] if tagged and distance == "0" else [commit]) + (["dirty"] if dirty else [])
    )
    post = f".post{distance}" if distance != "0" else ""
    return f"{base}{post}" + (f"+{local}" if local else "")
