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
    assert all(f"| `{'.'.join([*path, option.name])}` |" in options
               for path, option in runner_options().walk(()))
    codes = (REPO / "docs/reference/exit-codes.md").read_text()
    assert all(f"| {int(code)} |" in codes for code, _ in EXIT_CODES)
