"""The jobs' shared defaults (jobs/defaults.py): jobs that meet at one place in S3 agree on
it when the INI leaves it out (issue 16: prune's ``uploads_prefix`` was ``uploads/`` while
``enqueue`` stored archives under ``inbox/``, so a default INI never pruned an archive)."""

from __future__ import annotations

from typing import Any


def defaults(cls: type) -> dict[str, Any]:
    """A job class's option defaults, by option name."""
    return {option.name: option.default for _, option in cls.required_config.walk()}


def test_prune_deletes_where_enqueue_stores_by_default():
    from jobs.prune import PruneS3CronApp
    from jobs.uploads import ProcessUploadsCronApp

    prune, uploads = defaults(PruneS3CronApp), defaults(ProcessUploadsCronApp)
    assert prune["uploads_prefix"] == uploads["inbox_prefix"]
    assert prune["inbox_bucket"] == uploads["inbox_bucket"]


def test_prune_protects_and_cleans_what_the_other_jobs_write_by_default():
    from jobs.missing_symbols.apps import MissingSymbolsCronApp, MissingSymbolsReportCronApp
    from jobs.prune import PruneS3CronApp
    from jobs.uploads import ProcessUploadsCronApp

    prune, uploads = defaults(PruneS3CronApp), defaults(ProcessUploadsCronApp)
    batches, reports = defaults(MissingSymbolsCronApp), defaults(MissingSymbolsReportCronApp)
    assert prune["missing_prefix"] == batches["prefix"]
    assert prune["inbox_bucket"] == batches["inbox_bucket"]
    assert prune["reports_prefix"] == reports["report_prefix"]
    assert prune["symbols_bucket"] == uploads["symbols_bucket"] == reports["symbols_bucket"]
    # the protected prefix covers where uploads publish (object_key strips the slashes)
    assert prune["symbols_prefix"].strip("/") == uploads["symbols_prefix"].strip("/")
