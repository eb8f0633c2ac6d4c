"""The build's one hook (everything else is in pyproject.toml): the version, taken from the
git tags (``crontabber/version.py``), is the package's and is written into it as
``crontabber/_version.py``, in the wheel and in the sdist, so an installed crontabber knows its
version without git and without ``importlib.metadata``. A source tree without git (an sdist)
keeps the ``_version.py`` its sdist was given."""

from __future__ import annotations

import os
import runpy

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
WRITTEN = os.path.join("crontabber", "_version.py")


def _version() -> str:
    """From git; else the ``_version.py`` of an sdist; else ``0+unknown``."""
    rules = runpy.run_path(os.path.join(HERE, "crontabber", "version.py"))  # not the package
    found = rules["from_git"](HERE)
    if found is None and os.path.exists(os.path.join(HERE, WRITTEN)):
        found = runpy.run_path(os.path.join(HERE, WRITTEN))["version"]
    return str(found or rules["UNKNOWN"])


VERSION = _version()


def _write(base: str) -> None:
    path = os.path.join(base, WRITTEN)
    if os.path.exists(path):
        os.remove(path)  # it may be a hard link to the source tree's (sdist's release tree)
    with open(path, "w", encoding="utf-8") as out:
        out.write(
            '"""Written by setup.py at build time (crontabber/version.py)."""\n\nversion = '
            f'"{VERSION}"\n'
        )


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        _write(self.build_lib)


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        _write(base_dir)


setup(version=VERSION, cmdclass={"build_py": BuildPy, "sdist": Sdist})
