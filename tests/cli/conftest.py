"""Run the real entry point, ``python -m crontabber``, as a subprocess
(:class:`tests.fixtures.runner_cli.Cli`)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.fixtures.crontab import crontab  # noqa: F401 - the fixture
from tests.fixtures.netns import network_namespaces
from tests.fixtures.runner_cli import Cli


@pytest.fixture
def cli(crontab: Any) -> Iterator[Cli]:
    cli = Cli(crontab)
    yield cli
    cli.close()


@pytest.fixture
def namespaces() -> Any:
    """Four hosts: network namespaces, each with the address of its host side
    (:func:`tests.fixtures.netns.network_namespaces`)."""
    with network_namespaces(4) as made:
        yield made
