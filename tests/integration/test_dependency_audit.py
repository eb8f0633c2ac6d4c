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
    done = subprocess.run(
        [sys.executable, "scripts/audit_dependencies.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
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


def test_an_advisory_on_the_latest_release_fails_it_and_older_pins_too():
    document = {
        "info": {"version": "2.0"},
        "releases": {"1.0": [{}], "2.0": [{}]},
        "vulnerabilities": [{"id": "GHSA-x", "aliases": ["CVE-1"], "fixed_in": ["2.1"]}],
    }
    assert audit.judge("pkg", "2.0", document).problems == ["advisory GHSA-x, CVE-1 (fixed in 2.1)"]
    behind = audit.judge("pkg", "1.0", document)  # the latest still has it: so has 1.0
    assert behind.problems == ["advisory GHSA-x, CVE-1 (fixed in 2.1)"] and behind.behind


def test_a_pin_behind_a_release_that_fixes_an_advisory_fails_it():
    """Security review I-6: pip 23.2.1 (CVE-2023-5752, fixed in 23.3) was only listed as
    behind. Its release document names the advisory: the audit fails on it."""
    document = {
        "info": {"version": "26.3"},
        "releases": {"23.2.1": [{}], "26.3": [{}]},
        "vulnerabilities": [],
    }
    release = {
        "vulnerabilities": [
            {"id": "GHSA-mq26-g339-26xf", "aliases": ["CVE-2023-5752"], "fixed_in": ["23.3"]}
        ]
    }
    old = audit.judge("pip", "23.2.1", document, release)
    assert old.problems == ["advisory GHSA-mq26-g339-26xf, CVE-2023-5752 (fixed in 23.3)"]
    clean = audit.judge("pip", "23.2.1", document, {"vulnerabilities": []})
    assert clean.problems == [] and clean.release_audited
    unserved = audit.judge("pip", "23.2.1", document, None)  # PyPI here: 404 per version
    assert unserved.problems == [] and not unserved.release_audited


def test_the_venv_runs_the_pinned_pip():
    """The venv's own pip is audited like the pins: requirements.txt pins it, and the venv
    is made with that pip (it came with 23.2.1, CVE-2023-5752)."""
    pinned = audit.pins(REPO / "requirements.txt")["pip"]
    assert audit.installed()["pip"] == pinned
