"""A real browser for the dashboard's tests: Debian's headless chromium
driven by Selenium through Debian's chromium-driver (the same package
version as the browser, so they always match), installed by
``scripts/services.sh browser`` (``make test`` runs it). Screenshots go to
``tests/artifacts/`` (not committed). A missing browser fails: nothing skips."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.fixtures.crontab import crontab  # noqa: F401 - the fixture
from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
WIDTH, HEIGHT = 1366, 768  # a laptop screen


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            pytest.fail(
                f"{path} is missing: run `bash scripts/services.sh browser` (make test does)",
                pytrace=False,
            )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH},{HEIGHT}",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    # The viewport itself is the laptop's screen (the window size includes no chrome headless,
    # but set it exactly).
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    yield driver
    driver.quit()


@pytest.fixture
def shot(browser: Any) -> Any:
    """``shot(name)``: a screenshot of the viewport (or of ``element``) in tests/artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)

    def take(name: str, element: Any = None) -> Path:
        path = ARTIFACTS / f"dashboard-{name}.png"
        (element or browser).save_screenshot(str(path)) if element is None else element.screenshot(
            str(path)
        )
        assert path.stat().st_size > 1000, path
        return path

    return take
