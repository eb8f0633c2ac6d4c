"""Audit the dependencies against PyPI: ``python scripts/audit_dependencies.py``.

Why not ``pip-audit``: its PyPI service asks ``/pypi/NAME/VERSION/json`` for each pin, and
the PyPI mirror this machine reaches answers 404 for every per-version URL (only
``/pypi/NAME/json`` works); its default service, OSV (api.osv.dev), is not reachable at all.
So pip-audit reports "Dependency not found on PyPI and could not be audited" for every
package. This is the closest honest check with what PyPI does serve: the project document
``/pypi/NAME/json`` lists the advisories that affect the project's latest release, and the
yanked flag of every release.

Audited: every pin of ``requirements.txt`` and every distribution installed in the running
interpreter's environment (the transitive ones too: s3transfer, jmespath..., and the venv's
own pip, which ``requirements.txt`` pins). Fails (exit 1) when a version

- has an advisory PyPI lists for it: for a version behind the latest release, from the
  release's own document (``/pypi/NAME/VERSION/json``: an old pin whose advisory a later
  release fixes fails, naming the fix); for any version, the advisories of the latest
  release (a flaw the latest still has, the older pin has had at least as long),
- is yanked on PyPI (its maintainers withdrew it, often for a security reason), or
- does not exist on PyPI.

Reported, not failed: a version behind the latest release whose own document PyPI does not
serve (the mirror this machine reaches answers 404 for every per-version URL): its advisories
cannot be known here, and the list names it, so a reviewer can bump it. Exit 2 when PyPI
cannot be reached: the audit did not happen, and says so.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.metadata
import json
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

PYPI = "https://pypi.org/pypi/{name}/json"
PYPI_RELEASE = "https://pypi.org/pypi/{name}/{version}/json"
PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


@dataclass
class Finding:
    name: str
    version: str
    latest: str = ""
    problems: list[str] = field(default_factory=list)
    release_audited: bool = True  # False: behind, and PyPI served no document of this release

    @property
    def behind(self) -> bool:
        return bool(self.latest) and self.version != self.latest


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """``name -> version`` of the ``==`` pins of a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line)
        if match:
            found[normalised(match.group(1))] = match.group(2)
    return found


def installed() -> dict[str, str]:
    """``name -> version`` of the distributions of the running interpreter's environment."""
    return {
        normalised(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"]
    }


def judge(name: str, version: str, document: dict, release: dict | None = None) -> Finding:
    """The problems of ``name==version`` given PyPI's project ``document`` and, for a version
    behind the latest, its ``release`` document (None: PyPI did not serve it) (pure)."""
    latest = str(document.get("info", {}).get("version", ""))
    finding = Finding(name, version, latest)
    files = document.get("releases", {}).get(version)
    if files is None:
        finding.problems.append(f"{version} is not a release on PyPI")
        return finding
    if files and all(f.get("yanked") for f in files):
        reason = next((f.get("yanked_reason") for f in files if f.get("yanked_reason")), "")
        finding.problems.append(f"{version} is yanked on PyPI" + (f": {reason}" if reason else ""))
    advisories = list(document.get("vulnerabilities") or [])  # the latest release's
    if version != latest:
        if release is None:
            finding.release_audited = False
        else:
            seen = {advisory.get("id") for advisory in advisories}
            advisories += [
                advisory
                for advisory in release.get("vulnerabilities") or []
                if advisory.get("id") not in seen
            ]
    for advisory in advisories:
        ids = ", ".join([advisory.get("id", "?"), *advisory.get("aliases", [])])
        fixed = ", ".join(advisory.get("fixed_in") or []) or "no fix yet"
        finding.problems.append(f"advisory {ids} (fixed in {fixed})")
    return finding


def fetch_release(name: str, version: str, timeout: float) -> dict | None:
    """PyPI's document of one release, or None when PyPI does not serve it (404)."""
    try:
        with urllib.request.urlopen(
            PYPI_RELEASE.format(name=name, version=version), timeout=timeout
        ) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def fetch(name: str, timeout: float) -> dict:
    with urllib.request.urlopen(PYPI.format(name=name), timeout=timeout) as response:
        return json.load(response)


def audit(packages: dict[str, str], timeout: float = 20) -> list[Finding]:
    """One finding per package, PyPI asked 8 at a time.

    Raises:
        OSError: PyPI could not be reached (urllib's errors are OSErrors).
    """

    def one(item: tuple[str, str]) -> Finding:
        name, version = item
        try:
            document = fetch(name, timeout)
            latest = str(document.get("info", {}).get("version", ""))
            release = fetch_release(name, version, timeout) if version != latest else None
            return judge(name, version, document, release)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return Finding(name, version, problems=["not on PyPI"])
            raise

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, sorted(packages.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requirements", default=str(Path(__file__).parent.parent / "requirements.txt")
    )
    parser.add_argument(
        "--pin-only",
        action="store_true",
        help="audit requirements.txt's pins only, not the installed environment",
    )
    args = parser.parse_args(argv)
    packages = installed() if not args.pin_only else {}
    packages.update(pins(Path(args.requirements)))  # a pin wins over what is installed
    try:
        findings = audit(packages)
    except OSError as exc:
        print(f"audit_dependencies: PyPI unreachable ({exc}): nothing was audited", file=sys.stderr)
        return 2
    bad = [f for f in findings if f.problems]
    behind = [f for f in findings if f.behind and not f.problems and not f.release_audited]
    for finding in bad:
        for problem in finding.problems:
            print(f"FAIL {finding.name}=={finding.version}: {problem}")
    print(
        f"audited {len(findings)} packages against PyPI: {len(bad)} with problems; "
        f"{len(behind)} behind their latest release, whose own advisories PyPI here does "
        f"not serve: "
        + (", ".join(f"{f.name} {f.version} (latest {f.latest})" for f in behind) or "none")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
