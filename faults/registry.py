"""The fault modules, in the order `python -m faults` runs them."""

# Each name is a module `faults.<name>` with `run(scale: float) -> list[FaultResult]`.
MODULES: tuple[str, ...] = (
    "kills",  # kill -9 of a runner during each job
    "pooled",  # the same kills, every runner connected through PgBouncer (transaction pooling)
    "postgres",  # PostgreSQL restarted mid-run; stopped for longer than a run
    "failover",  # the primary killed under load, its standby promoted (async, remote_apply)
    "s3",  # connection resets, latency, timeouts, bandwidth; HTTP 500/503 SlowDown
    "elasticsearch",  # ES down before and during a rebuild; the endpoint's 503
    "es_cluster",  # a node of a 3-node cluster killed under search load and during a rebuild
    "search_load",  # the search endpoint under gunicorn, driven by hey; fuzzed queries
    "disk",  # the upload spool's disk full
)
