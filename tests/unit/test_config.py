"""Configuration: precedence, spellings, job loading errors (no database)."""

import pytest

from crontabber.config.catalog import job_config, load_jobs, run_order
from crontabber.config.settings import load_settings
from crontabber.errors import ConfigurationError
from tests.helpers import write_ini

JOBS = "tests.fixtures.sample_jobs"


def test_precedence_cli_over_env_over_file_over_default(tmp_path):
    ini = write_ini(tmp_path, [])
    assert load_settings(ini, {}, {}).error_retry_time == 50
    assert load_settings(ini, {}, {"CRONTABBER_ERROR_RETRY_TIME": "42"}).error_retry_time == 42
    assert (
        load_settings(
            ini, {"crontabber.error_retry_time": "44"}, {"CRONTABBER_ERROR_RETRY_TIME": "42"}
        ).error_retry_time
        == 44
    )
    assert load_settings(ini, {}, {}).max_ongoing_age_hours == 12.0


def test_crontabber_dotted_environment_names_work(tmp_path):
    ini = write_ini(tmp_path, [])
    assert load_settings(ini, {}, {"crontabber.error_retry_time": "41"}).error_retry_time == 41


def test_database_options_from_resource_namespace_and_override(tmp_path):
    ini = write_ini(
        tmp_path, [], "[resource]\n    [[postgresql]]\n        host=db.example\n        port=6543\n"
    )
    settings = load_settings(ini, {}, {"RESOURCE_POSTGRESQL_PASSWORD": "s3cret"})
    assert (settings.database.host, settings.database.port) == ("db.example", 6543)
    assert settings.database.password == "s3cret"
    assert "s3cret" not in repr(settings) and "s3cret" not in repr(settings.database)
    override = load_settings(ini, {"crontabber.host": "other"}, {})
    assert override.database.host == "other"


def test_missing_conf_file_is_an_error(tmp_path):
    with pytest.raises(ConfigurationError, match="no such file"):
        load_settings(str(tmp_path / "nope.ini"), {}, {})


def test_bad_value_names_the_option(tmp_path):
    ini = write_ini(tmp_path, [])
    with pytest.raises(ConfigurationError, match="crontabber.error_retry_time"):
        load_settings(ini, {"crontabber.error_retry_time": "soon"}, {})


def test_job_options_from_ini_section_env_and_cli(tmp_path):
    ini = write_ini(tmp_path, [f"{JOBS}.FooJob|1d"], "    [[class-FooJob]]\n        greeting=hi\n")
    settings = load_settings(ini, {}, {})
    (job,) = load_jobs(settings)
    assert job_config(job, settings.sources).greeting == "hi"
    env = load_settings(ini, {}, {"CRONTABBER_CLASS_FOOJOB_GREETING": "env"})
    assert job_config(job, env.sources).greeting == "env"
    cli = load_settings(
        ini,
        {"crontabber.class-FooJob.greeting": "cli"},
        {"CRONTABBER_CLASS_FOOJOB_GREETING": "env"},
    )
    assert job_config(job, cli.sources).greeting == "cli"
    config = job_config(job, settings.sources)
    assert config.frequency == "1d" and config.time is None and config.sleep == 0.0
    assert config.database.host == "localhost"


def test_schedule_override_per_job(tmp_path):
    ini = write_ini(tmp_path, [f"{JOBS}.BasicJob|1d"])
    settings = load_settings(
        ini,
        {"crontabber.class-BasicJob.frequency": "7d", "crontabber.class-BasicJob.time": "03:00"},
        {},
    )
    (job,) = load_jobs(settings)
    assert str(job.schedule) == "7d @ 03:00"


@pytest.mark.parametrize(
    "entries,problem",
    [
        ([f"{JOBS}.Nope|1d"], "has no class 'Nope'"),
        (["no_such_module.Job|1d"], "cannot import module 'no_such_module'"),
        ([f"{JOBS}.NoAppName|1d"], "has no app_name"),
        ([f"{JOBS}.FooJob|1d", f"{JOBS}.DuplicateFoo|1d"], "app_name 'foo' is already used"),
        ([f"{JOBS}.FooJob|1d", f"{JOBS}.FooJob|2d"], "already used"),
        ([f"{JOBS}.CycleA|1d", f"{JOBS}.CycleB|1d"], "dependency cycle"),
        ([f"{JOBS}.FooJob|5"], "bad frequency"),
        ([f"{JOBS}.FooJob|1d|24:00"], "bad time"),
    ],
)
def test_bad_job_lists_name_the_offending_entry(tmp_path, entries, problem):
    settings_or_error = None
    with pytest.raises(ConfigurationError) as info:
        settings_or_error = load_settings(write_ini(tmp_path, entries), {}, {})
        load_jobs(settings_or_error)
    assert problem in str(info.value)


def test_bad_job_option_value_fails_at_load(tmp_path):
    ini = write_ini(tmp_path, [f"{JOBS}.FooJob|1d"])
    settings = load_settings(ini, {"crontabber.class-FooJob.sleep": "long"}, {})
    with pytest.raises(ConfigurationError, match="crontabber.class-FooJob.sleep"):
        load_jobs(settings)


def test_run_order_parents_first_then_alphabetical(tmp_path):
    ini = write_ini(
        tmp_path,
        [f"{JOBS}.FooBarJob|1d", f"{JOBS}.BarJob|1d", f"{JOBS}.FooJob|1d", f"{JOBS}.BasicJob|1d"],
    )
    jobs = load_jobs(load_settings(ini, {}, {}))
    assert [j.app_name for j in jobs] == ["foobar", "bar", "foo", "basic-job"]
    assert [j.app_name for j in run_order(jobs)] == ["basic-job", "foo", "bar", "foobar"]


def test_decorators_do_not_leak_options_into_parents():
    from crontabber.base import BaseCronApp
    from tests.fixtures import sample_jobs

    assert [opt.name for _, opt in BaseCronApp.required_config.walk()] == []
    names = {".".join([*p, o.name]) for p, o in sample_jobs.FooJob.required_config.walk()}
    assert "greeting" in names and "database.host" in names
    assert "greeting" not in {o.name for _, o in sample_jobs.BarJob.required_config.walk()}


@pytest.mark.parametrize(
    "text",
    ["t", "TRUE", "Yes", "y", "1", "on", "f", "False", "NO", "n", "0", "Off", "maybe", "", "2"],
)
def test_the_bool_parser_is_everetts(text):
    """crontabber.config.options.parse_bool stands in for everett's (whose module costs a
    tick its import of inspect): the same answer, the same error."""
    from everett.manager import parse_bool as everetts

    from crontabber.config.options import parse_bool

    try:
        expected: object = everetts(text)
    except ValueError as exc:
        expected = str(exc)
    try:
        got: object = parse_bool(text)
    except ValueError as exc:
        got = str(exc)
    assert got == expected


@pytest.mark.parametrize(
    "key, namespace",
    [
        ("bucket", ["crontabber", "class-Foo"]),
        ("dsn", None),
        ("host", []),
        ("x", ["", "resource", "postgresql"]),
    ],
)
def test_the_command_line_and_environment_names_are_everetts(key, namespace):
    from everett.manager import ConfigDictEnv, generate_uppercase_key

    from crontabber.config.options import NO_VALUE
    from crontabber.config.settings import CommandLineSource, uppercase_key

    assert uppercase_key(key, namespace) == generate_uppercase_key(key, namespace)
    dotted = ".".join([*(part for part in namespace or [] if part), key])
    cli = {dotted: "v", "other.name": "w"}
    everett_env = ConfigDictEnv({d.replace(".", "_"): v for d, v in cli.items()})
    assert CommandLineSource(cli).get(key, namespace) == everett_env.get(key, namespace) == "v"
    # Missing from both: ours is our NO_VALUE (a tick does not import everett), false as everett's.
    assert CommandLineSource(cli).get("nope", namespace) is NO_VALUE
    assert not everett_env.get("nope", namespace) and not NO_VALUE
