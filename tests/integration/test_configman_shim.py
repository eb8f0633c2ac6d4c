"""A crontabber app importing configman runs unchanged."""


def test_app_written_for_configman_runs(crontab):
    crontab.configure(
        ["tests.fixtures.configman_app.LegacyApp|1d"],
        extra="    [[class-LegacyApp]]\n        names=x, y, z\n",
    )
    assert crontab.run()[0] == 0
    assert crontab.state("legacy-app").last_error == {}
    assert [c["app_name"] for c in crontab.calls()] == ["x", "y", "z"]
