"""The generated reference pages (options, exit codes) match the code: a new option or exit
code without `scripts/gen_reference.py` fails here (issue #26: references that cannot drift);
and no Markdown file points outside the repository (`scripts/check_links.py`)."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("check_links", REPO / "scripts" / "check_links.py")
assert _spec and _spec.loader
check_links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_links)


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "gen_reference", REPO / "scripts" / "gen_reference.py"
    )
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
    assert all(
        f"| `{'.'.join([*path, option.name])}` |" in options
        for path, option in runner_options().walk(())
    )
    codes = (REPO / "docs/reference/exit-codes.md").read_text()
    assert all(f"| {int(code)} |" in codes for code, _ in EXIT_CODES)


def test_spans_are_shown_as_written_in_the_ini():
    """Trial 2026-11-26 #17: a job's defaults read ``datetime.timedelta(0)``."""
    options = (REPO / "docs/reference/options.md").read_text()
    assert "datetime.timedelta" not in options
    assert "| `crontabber.class-MissingSymbolsCronApp.alert_silence` | `'1h'` |" in options


def test_no_markdown_file_points_outside_the_repository(tmp_path):
    """Trial 2026-11-26 #17: docs/crontabber-0.18.md pointed into ../shared. ``make docs``
    runs scripts/check_links.py over every Markdown file."""
    assert check_links.leaving(REPO) == []
    (tmp_path / "docs" / "jobs").mkdir(parents=True)
    (tmp_path / "README.md").write_text("[docs](docs/jobs/a.md)\n")
    (tmp_path / "docs" / "jobs" / "a.md").write_text(
        "[up](../../README.md) [web](https://example.org/../x) [here](#top) "
        "s3://.../manifest.json\n"
        "[style](../../../shared/STYLE.md#models)\n"
        "read `../../../shared/reference/spec.md` first\n"
        '[spec]: ../../../spec.md\n<img src="/etc/logo.png">\n'
    )
    assert check_links.leaving(tmp_path) == [
        "docs/jobs/a.md:2: ../../../shared/STYLE.md",
        "docs/jobs/a.md:3: ../../../shared/reference/spec.md",
        "docs/jobs/a.md:4: ../../../spec.md",
        "docs/jobs/a.md:5: /etc/logo.png",
    ]


def test_the_settle_lag_and_jitter_limit_is_documented():
    """Trial 2026-11-26 #17: the limit was found only as a configuration error."""
    options = (REPO / "docs/reference/options.md").read_text()
    assert "settle_lag + jitter must be shorter than the job's frequency" in options
    alerts = (REPO / "docs/alerts.md").read_text()
    assert "The two together must be shorter than the job's frequency" in alerts
