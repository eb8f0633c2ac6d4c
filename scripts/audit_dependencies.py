"""Audit the dependencies against PyPI: ``python scripts/audit_dependencies.py``.

Why not ``pip-audit``: its PyPI service asks ``/pypi/NAME/VERSION/json`` for each pin, and
the PyPI mirror this machine reaches answers 404 for every per-version URL (only
``/pypi/NAME/json`` works); its default service, OSV (api.osv.dev), is not reachable at all.
So pip-audit reports "Dependency not found on PyPI and could not be audited" for every
package. This is the closest honest check with what PyPI does serve: the project document
``/pypi/NAME/json`` lists the advisories that affect the project's latest release, and the
yanked flag of every release.

Audited: every pin of ``requirements.txt`` and every distribution installed in the running
interpreter's environment (the transitive ones too: s3transfer, jmespath...). Fails (exit 1)
when a version

- is pinned or installed at the latest release and PyPI lists an advisory for it,
- is yanked on PyPI (its maintainers withdrew it, often for a security reason), or
- does not exist on PyPI.

Reported, not failed: a version behind the latest release is not audited for advisories
(PyPI here serves none for older releases); the list names them, so a reviewer can bump
them. Exit 2 when PyPI cannot be reached: the audit did not happen, and says so.
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
PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


@dataclass
class Finding:
    name: str
    version: str
    latest: str = ""
    problems: list[str] = field(default_factory=list)

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
    return {normalised(dist.metadata["Name"]): dist.version
            for dist in importlib.metadata.distributions() if dist.metadata["Name"]}


def judge(name: str, version: str, document: dict) -> Finding:
    """The problems of ``name==version`` given PyPI's project ``document`` (pure)."""
    latest = str(document.get("info", {}).get("version", ""))
    finding = Finding(name, version, latest)
    files = document.get("releases", {}).get(version)
    if files is None:
        finding.problems.append(f"{version} is not a release on PyPI")
        return finding
    if files and all(f.get("yanked") for f in files):
        reason = next((f.get("yanked_reason") for f in files if f.get("yanked_reason")), "")
        finding.problems.append(f"{version} is yanked on PyPI" + (f": {reason}" if reason else ""))
    if version == latest:
        for advisory in document.get("vulnerabilities") or []:
            ids = ", ".join([advisory.get("id", "?"), *advisory.get("aliases", [])])
            fixed = ", ".join(advisory.get("fixed_in") or []) or "no fix yet"
            finding.problems.append(f"advisory {ids} (fixed in {fixed})")
    return finding


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
            return judge(name, version, fetch(name, timeout))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return Finding(name, version, problems=["not on PyPI"])
            raise

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, sorted(packages.items())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", default=str(Path(__file__).parent.parent / "requirements.txt"))
    parser.add_argument("--pin-only", action="store_true",
                        help="audit requirements.txt's pins only, not the installed environment")
    args = parser.parse_args(argv)
    packages = installed() if not args.pin_only else {}
    packages.update(pins(Path(args.requirements)))  # a pin wins over what is installed
    try:
        findings = audit(packages)
    except OSError as exc:
        print(f"audit_dependencies: PyPI unreachable ({exc}): nothing was audited", file=sys.stderr)
        return 2
    bad = [f for f in findings if f.problems]
    behind = [f for f in findings if f.behind and not f.problems]
    for finding in bad:
        for problem in finding.problems:
            print(f"FAIL {finding.name}=={finding.version}: {problem}")
    print(f"audited {len(findings)} packages against PyPI: {len(bad)} with problems; "
          f"{len(behind)} behind their latest release, whose advisories PyPI here does not "
          f"serve: " + (", ".join(f"{f.name} {f.version} (latest {f.latest})" for f in behind) or "none"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
