"""The generated reference pages (options, exit codes) match the code: a new option or exit
code without `scripts/gen_reference.py` fails here (issue #26: references that cannot drift)."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_pages_are_current():
    generator = load_generator()
    for path, build in generator.PAGES.items():
        assert (REPO / path).read_text() == build(), f"{path}: run scripts/gen_reference.py"


def test_every_runner_option_and_exit_code_is_listed():
    from crontabber.command import EXIT_CODES
    from crontabber.config.settings import runner_options

    options = (REPO / "docs/reference/options.md").read_text()
    assert "`crontabber.require_reason`" in options and "`crontabber.output_tail_bytes`" in options
    assert all(f"| `{'.'.join([*path, option.name])}` |" in options for path, option in runner_options().walk(()))
    codes = (REPO / "docs/reference/exit-codes.md").read_text()
    assert all(f"| {int(code)} |" in codes for code, _ in EXIT_CODES)


def test_spans_are_shown_as_written_in_the_ini():
    """Trial 2026-11-26 #17: a job's defaults read ``datetime.timedelta(0)``."""
    options = (REPO / "docs/reference/options.md").read_text()
    assert "datetime.timedelta" not in options
    assert "| `crontabber.class-MissingSymbolsCronApp.alert_silence` | `'1h'` |" in options


def test_the_docs_link_nothing_outside_the_repository():
    """Trial 2026-11-26 #17: docs/crontabber-0.18.md pointed into ../shared."""
    for page in (REPO / "docs").rglob("*.md"):
        assert "../shared/" not in page.read_text(), page


def test_the_settle_lag_and_jitter_limit_is_documented():
    """Trial 2026-11-26 #17: the limit was found only as a configuration error."""
    options = (REPO / "docs/reference/options.md").read_text()
    assert "settle_lag + jitter must be shorter than the job's frequency" in options
    alerts = (REPO / "docs/alerts.md").read_text()
    assert "The two together must be shorter than the job's frequency" in alerts
