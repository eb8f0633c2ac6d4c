from tests.fixtures.crontab import crontab  # noqa: F401 - the fixture
