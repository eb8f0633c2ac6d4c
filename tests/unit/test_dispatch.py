"""The dispatcher's reading of a plain tick's command line, without argparse."""

import pytest

from crontabber.cli.dispatch import PARSER_DEFAULTS, build_parser, plain_tick


def test_the_defaults_of_a_plain_tick_are_the_parsers():
    """An option added to the parser must be added to PARSER_DEFAULTS too."""
    args, rest = build_parser().parse_known_args([])
    assert rest == [] and vars(args) == PARSER_DEFAULTS


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--admin.conf=crontabber.ini"],
        ["--admin.conf", "x.ini"],
        ["--admin.conf="],
        ["--admin.conf=a=b.ini"],
    ],
)
def test_a_plain_tick_reads_as_argparse_reads_it(argv):
    plain = plain_tick(argv)
    args, rest = build_parser().parse_known_args(argv)
    assert plain is not None and rest == [] and vars(plain) == vars(args)


@pytest.mark.parametrize(
    "argv",
    [
        ["--list-jobs"],
        ["--admin.conf=a", "--nagios"],
        ["--admin=x"],
        ["--admin.conf", "-x"],
        ["--admin.conf"],
        ["-h"],
        ["--crontabber.error_retry_time=5"],
        ["--admin.conf=a", "x"],
        ["--admin.conf", "a", "--admin.conf", "b"],
    ],
)
def test_any_other_command_line_goes_to_argparse(argv):
    assert plain_tick(argv) is None
