"""The strict check of option names (no database)."""

import pytest

from crontabber.config.names import check_names, commented_classes, environment_notes, known_names
from crontabber.config.options import Namespace
from crontabber.config.settings import load_settings, runner_options
from crontabber.errors import ConfigurationError

JOBS = "tests.fixtures.sample_jobs"


def foo_options():
    options = Namespace()
    options.add_option("greeting", "hello")
    options.namespace("database").add_option(
        "host", "localhost", reference_value_from="resource.postgresql"
    )
    return options


def known(jobs_text=""):
    return known_names(
        runner_options(), [(("crontabber", "class-FooJob"), foo_options())], jobs_text
    )


def test_declared_referenced_and_legacy_names():
    names = known()
    assert names.classify("crontabber.error_retry_time") == "known"
    assert names.classify("Crontabber.Class-FooJob.Greeting") == "known"  # case ignored
    assert names.classify("secrets.sentry.dsn") == "known"  # sentry.dsn refers to it
    assert names.classify("resource.postgresql.host") == "known"
    assert names.classify("crontabber.class-FooJob.database.database_class") == "legacy"
    assert names.classify("logging.syslog_host") == "legacy"
    assert names.classify("crontabber.class-FooJob.greting") == "unknown"


def test_a_newly_declared_runner_option_is_known_without_listing_it():
    runner = runner_options()
    runner.namespace("crontabber").add_option("heartbeat_seconds", 30)
    assert known_names(runner, [], "").classify("crontabber.heartbeat_seconds") == "known"


def test_unknown_names_are_refused_with_the_closest_one():
    with pytest.raises(
        ConfigurationError,
        match=(
            "no such option crontabber.class-FooJob.greting; did you mean "
            "crontabber.class-FooJob.greeting"
        ),
    ):
        check_names(known(), ["crontabber.class-FooJob.greting"], "crontabber.ini")
    with pytest.raises(
        ConfigurationError, match=r"section \[\[class-FoJob\]\].*did you mean \[\[class-FooJob\]\]"
    ):
        check_names(known(), ["crontabber.class-FoJob.greeting"], "crontabber.ini")
    with pytest.raises(ConfigurationError) as info:
        check_names(known(), ["crontabber.eror_retry_time"], None)
    assert info.value.where == "--crontabber.eror_retry_time"
    assert "did you mean --crontabber.error_retry_time?" in info.value.problem
    assert check_names(known(), ["application", "crontabber.jobs"], "x.ini") == ["application"]


def test_a_commented_out_job_keeps_its_section_unchecked():
    text = "tests.Foo|1d\n  # jobs.prune.PruneS3CronApp|1d ; #jobs.x.Other|5m, # a note"
    assert commented_classes(text) == {"PruneS3CronApp", "Other"}
    names = known(text)
    assert names.classify("crontabber.class-PruneS3CronApp.anything") == "open"
    assert names.classify("crontabber.class-PruneS3CronAp.anything") == "unknown"


def test_environment_notes_only_for_crontabber_looking_names():
    names = known("# jobs.x.Paused|1d")
    environ = {
        "CRONTABBER_ERROR_RETRY_TIME": "1",
        "CRONTABBER_CLASS_FOOJOB_GREETING": "x",
        "CRONTABBER_CLASS-FOOJOB_GREETING": "x",
        "CRONTABBER_CLASS_PAUSED_X": "1",
        "CRONTABBER_EROR_RETRY_TIME": "1",
        "crontabber.class-FooJob.greting": "x",
        "RESOURCE_POSTGRESQL_HOSTNAME": "x",
        "HOME": "/root",
        "other.dotted": "x",
    }
    assert environment_notes(names, environ) == [
        "environment variable CRONTABBER_EROR_RETRY_TIME matches no option (did you mean "
        "CRONTABBER_ERROR_RETRY_TIME?)",
        "environment variable crontabber.class-FooJob.greting matches no option"
        " (did you mean crontabber.class-FooJob.greeting?)",
    ]


def test_load_jobs_refuses_an_unknown_ini_option(tmp_path):
    from crontabber.config.catalog import load_jobs

    path = tmp_path / "crontabber.ini"
    path.write_text(
        f"[crontabber]\n    jobs={JOBS}.FooJob|1d\n    [[class-FooJob]]\n        greting=x\n"
    )
    with pytest.raises(ConfigurationError, match="greting"):
        load_jobs(load_settings(str(path), {}, {}))


def test_a_replaced_jobs_list_keeps_the_sections_of_the_ini_list(tmp_path):
    from crontabber.config.catalog import load_jobs

    path = tmp_path / "crontabber.ini"
    path.write_text(
        f"[crontabber]\n    jobs={JOBS}.FooJob|1d, {JOBS}.BarJob|1d\n    [[class-FooJob]]\n        "
        "greeting=x\n"
    )
    (job,) = load_jobs(load_settings(str(path), {"crontabber.jobs": f"{JOBS}.BarJob|1d"}, {}))
    assert job.app_name == "bar"
