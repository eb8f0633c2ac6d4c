"""The dependency audit (issue #24 item 12) against the real PyPI: every pin and every
installed distribution; a yanked or advised version fails it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "scripts"))
import audit_dependencies as audit  # noqa: E402

REPO = Path(__file__).resolve().parent.parent.parent


def test_the_pinned_and_installed_dependencies_pass_the_audit():
    done = subprocess.run([sys.executable, "scripts/audit_dependencies.py"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("audited ") and " 0 with problems" in done.stdout


def test_a_yanked_release_and_an_unknown_version_fail_it():
    """Real PyPI documents: requests 2.32.0 was yanked (withdrawn by its maintainers)."""
    yanked = audit.judge("requests", "2.32.0", audit.fetch("requests", 20))
    assert yanked.problems and yanked.problems[0].startswith("2.32.0 is yanked on PyPI")
    unknown = audit.judge("requests", "0.0.0.1", audit.fetch("requests", 20))
    assert unknown.problems == ["0.0.0.1 is not a release on PyPI"]
    requests = audit.fetch("requests", 20)
    assert not audit.judge("requests", "2.31.0", requests).problems  # a good, older release


def test_an_advisory_on_the_latest_release_fails_it():
    document = {"info": {"version": "2.0"}, "releases": {"1.0": [{}], "2.0": [{}]},
                "vulnerabilities": [{"id": "GHSA-x", "aliases": ["CVE-1"], "fixed_in": ["2.1"]}]}
    assert audit.judge("pkg", "2.0", document).problems == ["advisory GHSA-x, CVE-1 (fixed in 2.1)"]
    behind = audit.judge("pkg", "1.0", document)
    assert behind.problems == [] and behind.behind  # reported as not audited, not failed
