"""The fault modules, in the order `python -m faults` runs them."""

# Each name is a module `faults.<name>` with `run(scale: float) -> list[FaultResult]`.
MODULES: tuple[str, ...] = (
    "kills",  # kill -9 of a runner during each job
    "pooled",  # the same kills, every runner connected through PgBouncer (transaction pooling)
    "postgres",  # PostgreSQL restarted mid-run; stopped for longer than a run
    "s3",  # connection resets, latency, timeouts, bandwidth; HTTP 500/503 SlowDown
    "elasticsearch",  # ES down before and during a rebuild; the endpoint's 503
    "search_load",  # the search endpoint under gunicorn, driven by hey; fuzzed queries
    "disk",  # the upload spool's disk full
)
