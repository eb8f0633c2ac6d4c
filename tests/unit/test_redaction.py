"""crontabber.redaction: what a log line loses (issue #24 items 2 and 11)."""

from crontabber.redaction import is_secret_name, redact, secret_values


def test_shapes_of_secrets_are_masked():
    assert redact("GET http://elastic:hunter22@es:9200/x") == "GET http://elastic:***@es:9200/x"
    assert redact("host=db password=hunter22 user=u") == "host=db password=*** user=u"
    assert redact("https://s3/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=abc123&a=1") == (
        "https://s3/k?X-Amz-Credential=***&X-Amz-Signature=***&a=1"
    )
    assert redact("{'password': 'hunter22'}") == "{'password': ***}"
    assert (
        redact("http://user@es:9200 and http://es:9200") == "http://user@es:9200 and http://es:9200"
    )


def test_secret_values_by_name_and_in_urls():
    env = {
        "RESOURCE_POSTGRESQL_PASSWORD": "pg-Secret-1",
        "AWS_SECRET_ACCESS_KEY": "aws/Secret+2",
        "ES_URL": "http://elastic:es%2Fsecret@es:9200",
        "SENTRY_DSN": "https://key@o1.ingest/1",
        "HOME": "/root",
        "SHORT_PASSWORD": "abc",
    }
    assert secret_values(env) == {
        "pg-Secret-1",
        "aws/Secret+2",
        "es%2Fsecret",
        "es/secret",
        "https://key@o1.ingest/1",
    }
    assert redact("connecting with pg-Secret-1 and aws/Secret+2", secret_values(env)) == (
        "connecting with *** and ***"
    )
    assert is_secret_name("crontabber.class-X.api_token") and not is_secret_name("bucket")
    assert not is_secret_name("AWS_ACCESS_KEY_ID")  # its value (e.g. "symbols") is everywhere


def test_a_password_equal_to_a_public_setting_is_not_masked_by_value():
    """The local services' user, database and password are all "crontabber": masking the
    value would mask every logger name; the shapes are still masked."""
    secrets = secret_values({"PASSWORD": "crontabber"}, {"USER": "crontabber"})
    assert secrets == set()
    assert redact("crontabber: password=crontabber", secrets) == "crontabber: password=***"


def test_prose_about_a_password_keeps_its_words():
    line = "configuration error in --crontabber.password: is not set"
    assert redact(line) == line
