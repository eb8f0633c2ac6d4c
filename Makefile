# The two commands of README.md: `make run` and `make test`. Everything they
# need is installed and started here (nothing installed by hand survives to a
# new machine). Services: scripts/services.sh; their addresses: .services/env.

SHELL := /bin/bash
PYTHON ?= python3
PY := .venv/bin/python
# Export the services' addresses and credentials to the command that follows.
WITH_ENV := set -a && . .services/env && set +a &&

.PHONY: run test test-pooled stress check lint docs bench faults setup venv services stop status \
	clean

run: setup
	@echo "== seeding a small demo: upload archives, missing-symbol batches"
	$(WITH_ENV) $(PY) -m jobs.uploads --admin.conf=crontabber.ini demo
	$(WITH_ENV) $(PY) -m jobs.missing_symbols demo
	@echo "== one cron tick"
	$(WITH_ENV) $(PY) -m crontabber --admin.conf=crontabber.ini
	$(WITH_ENV) $(PY) -m crontabber --admin.conf=crontabber.ini --list-jobs

# The pooled lane: what a transaction pooler could break, again with every database reached
# through PgBouncer in transaction pooling mode (tests/conftest.py;
# tests/integration/test_pooled_lane.py proves it went through it): the runner and its ledger
# (claims, leases, fencing, SET LOCAL), several hosts with kills, the alerts, the rolling deploy
# (migrations), the dashboard's read-only sessions, and each job's store (advisory transaction
# locks, a temporary table, server-side cursors) in its integration tests. The jobs' command
# tests are left out: they run the same stores through the same SQL, and what they add (exit
# codes, output, argument parsing) does not depend on the pooler; the kill drills of
# faults/pooled.py kill each job through PgBouncer. Left out too: test_hosts_alerts.py
# (test_hosts.py and test_alerts.py cover its kills and its SQL through the pooler). Measured
# on 2026-11-28: the five files left out took 156 s through PgBouncer (docs/development.md).
POOLED_TESTS := tests/integration/test_pooled_lane.py tests/cli/test_hosts.py \
	tests/cli/test_leases.py tests/cli/test_alerts.py tests/cli/test_run_ledger.py \
	tests/cli/test_rolling_deploy.py tests/integration/test_runner.py \
	tests/integration/test_uploads.py tests/integration/test_uploads_queue.py \
	tests/integration/test_missing_symbols.py tests/integration/test_prune.py \
	tests/integration/test_runlog.py tests/integration/test_search_job.py \
	tests/integration/test_search_new_uploads.py tests/integration/test_dashboard_api.py

# The suite runs on TEST_WORKERS pytest-xdist workers (one per core here; TEST_WORKERS=0: one
# process); the modules that start a service of their own are one work unit (tests/conftest.py).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS)
test: venv
	SYMBOLS_PG_FAST=1 bash scripts/services.sh start
	bash scripts/services.sh browser
	$(MAKE) --no-print-directory lint docs
	$(WITH_ENV) $(PY) -m pytest $(XDIST) --durations=25 tests
	$(MAKE) --no-print-directory test-pooled

# The pooled lane alone (services started): 2 kills of each job through PgBouncer, then pytest.
test-pooled: venv
	$(WITH_ENV) $(PY) -m faults --only pooled --scale 0.04 --no-report
	$(WITH_ENV) SYMBOLS_TEST_POOLED=1 $(PY) -m pytest $(XDIST) --durations=10 $(POOLED_TESTS)

# The stress lane (not part of `make test`): the timing-sensitive files, STRESS_ROUNDS times
# under `stress-ng --cpu 2 --cpu-load 60` (installed by scripts/services.sh stress), then the
# failures per test (scripts/stress.py, from pytest's JUnit XML of each round). The files:
# several hosts killed at random moments (hosts, hosts_alerts, drain, rolling_deploy), leases
# (kill -9 takeovers, SIGSTOP past the lease, timeouts), reruns killed mid-interval (reruns,
# reruns_hosts, reruns_parallel), kill -9 records and 20 runners at once (abandoned_runs,
# concurrency), the prune job's pace and kills (prune_cli, prune_inventory_cli), a decoding
# worker killed (missing_symbols_limits).
STRESS_TESTS := tests/cli/test_hosts.py tests/cli/test_hosts_alerts.py tests/cli/test_drain.py \
	tests/cli/test_rolling_deploy.py tests/cli/test_leases.py tests/cli/test_reruns.py \
	tests/cli/test_reruns_hosts.py tests/cli/test_reruns_parallel.py \
	tests/cli/test_abandoned_runs.py tests/cli/test_concurrency.py tests/cli/test_prune_cli.py \
	tests/cli/test_prune_inventory_cli.py tests/integration/test_missing_symbols_limits.py
STRESS_ROUNDS ?= 3
stress: venv
	SYMBOLS_PG_FAST=1 bash scripts/services.sh start
	bash scripts/services.sh stress
	$(WITH_ENV) $(PY) scripts/stress.py --rounds $(STRESS_ROUNDS) $(STRESS_TESTS)

# Lint, format and types (ruff and mypy, configured in pyproject.toml and mypy.ini): seconds.
LINTED := crontabber jobs search dashboard tests faults bench scripts devservices setup.py
lint: venv
	.venv/bin/ruff check $(LINTED)
	.venv/bin/ruff format --check $(LINTED)
	$(PY) -m mypy

# The docs site (mkdocs.yml): a dead link, a page out of the nav, a stale generated reference
# page or a Markdown file pointing outside the repository (scripts/check_links.py) fails it.
docs: venv
	$(PY) scripts/gen_reference.py --check
	$(PY) scripts/check_links.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

# The fast lane: lint, types and the unit tests (no services), in well under a minute.
check: lint
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

# Every benchmark; search_rebuild_cluster runs on the 3-node cluster (started here, 1 GB heaps).
bench: setup
	SYMBOLS_ESC_HEAP=1g bash scripts/services.sh start esc
	$(WITH_ENV) $(PY) -m bench

# The fault suite (~30 minutes; not part of `make test`): writes docs/reliability.md.
# Its tools (Toxiproxy, hey, mitmproxy) go to .services/tools (scripts/fault-tools.sh).
faults: setup
	bash scripts/fault-tools.sh > /dev/null
	$(WITH_ENV) $(PY) -m faults

setup: venv services

venv: .venv/.installed

.venv/.installed: requirements.txt
	$(PYTHON) -m venv .venv
	$(PY) -m pip install --quiet --disable-pip-version-check "$$(grep '^pip==' requirements.txt)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m compileall -q crontabber jobs search dashboard > /dev/null
	touch $@

services:
	bash scripts/services.sh start

stop:
	bash scripts/services.sh stop

status:
	bash scripts/services.sh status

# Stops the services, removes their data (in .services and outside the clone:
# see scripts/services.sh) and the venv.
clean:
	bash scripts/services.sh clean
	rm -rf .venv
