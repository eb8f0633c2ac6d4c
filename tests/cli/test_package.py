"""The project is installable (issue #26): a wheel built from pyproject.toml, installed into a
new virtual environment outside the checkout, gives working commands whose SQL comes from the
installed sql/ (beside the packages, as in a checkout), and a runner configured without the
symbol server's jobs creates only crontabber's tables. Real PostgreSQL; the dependencies are the
project venv's (a .pth file), so the test needs no network."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from crontabber.store import connect
from tests.helpers import REPO, database_env

SKIP = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".services",
    "__pycache__",
    "*.egg-info",
    "build",
    ".mypy_cache",
    ".pytest_cache",
    "bench",
    "tests",
    "faults",
)


def run(argv, **kwargs):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv in a temporary directory with the project's wheel installed (no checkout on
    its path): its bin directory."""
    root = tmp_path_factory.mktemp("package")
    source = root / "source"
    shutil.copytree(REPO, source, ignore=SKIP)  # the build writes build/ and egg-info beside it
    # a release: the source committed and tagged in a repository of its own (setup.py's version)
    git = [
        "git",
        "-C",
        str(source),
        "-c",
        "user.name=test",
        "-c",
        "user.email=test@example.invalid",
    ]
    run([*git, "init", "-q"])
    run([*git, "add", "-A"])
    run([*git, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "release"])
    run([*git, "-c", "tag.gpgsign=false", "tag", "v9.8.7"])
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(root / "dist"),
        ]
    )
    (wheel,) = (root / "dist").glob("symbols_crontabber-9.8.7-*.whl")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ]
    )
    return venv / "bin"


def environ(database) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **database_env(database)}


def tables(database) -> set[str]:
    conn = connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
            return {row[0] for row in cur.fetchall()}
    finally:
        conn.close()


def host_versions(database) -> list[str]:
    conn = connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT version FROM crontabber_host")
            return [row[0] for row in cur.fetchall()]
    finally:
        conn.close()


def test_the_installed_commands_run_from_the_package_not_the_checkout(installed, tmp_path):
    where = run(
        [
            str(installed / "python"),
            "-c",
            "import crontabber, jobs, dashboard.store as d, crontabber.sqlfiles as q;"
            " print(crontabber.__file__); print(q.SQL_DIR); print(jobs.SQL_DIR);"
            " print(d.SQL_DIR)",
        ],
        cwd=tmp_path,
    ).stdout.split()
    assert all(str(installed.parent) in path and str(REPO) not in path for path in where), where
    # the one loader finds the top-level sql/ beside the packages, as in a checkout
    site = os.path.dirname(os.path.dirname(where[0]))
    assert where[1:] == [
        os.path.join(site, "sql", part) for part in ("crontabber", "jobs", "dashboard")
    ]
    assert os.path.isfile(os.path.join(where[1], "schema.sql"))
    assert os.path.isfile(os.path.join(where[1], "migrations", "0001_initial.sql"))
    assert os.path.isfile(os.path.join(where[2], "migrations", "0002_uploads.sql"))
    assert os.path.isfile(os.path.join(where[3], "dashboard.sql"))
    assert not os.path.exists(os.path.join(site, "sql", "faults"))  # the fault suite's: not shipped
    for command, said in (
        ("crontabber", "--logs NAME"),
        ("symbols-uploads", "enqueue"),
        ("symbols-missing-symbols", "write"),
        ("symbols-prune", "history"),
        ("symbols-search", "query"),
        ("symbols-dashboard", "--port"),
    ):
        done = run([str(installed / command), "--help"], cwd=tmp_path)
        assert said in done.stdout, (command, done.stdout)
    # the tag's version, written into the wheel by setup.py: no git where it is installed
    assert run([str(installed / "crontabber"), "--version"], cwd=tmp_path).stdout.strip() == "9.8.7"


def test_a_tick_from_the_package_creates_only_the_tables_its_jobs_need(
    installed, tmp_path, empty_database
):
    ini = tmp_path / "crontabber.ini"
    ini.write_text("[crontabber]\n    jobs='''\n    jobs.runlog.PruneRunLogCronApp|1d\n    '''\n")
    env = environ(empty_database)
    done = run([str(installed / "crontabber"), f"--admin.conf={ini}"], cwd=tmp_path, env=env)
    assert "Traceback" not in done.stderr
    assert tables(empty_database) == {
        "crontabber",
        "crontabber_log",
        "crontabber_run",
        "crontabber_audit",
        "crontabber_audit_head",
        "crontabber_host",
        "crontabber_alert",
        "crontabber_interval",
        "crontabber_notice",
        "crontabber_mute",
        "schema_migrations",
    }
    assert host_versions(empty_database) == ["9.8.7"]  # what the tick recorded: the build's
    listed = run(
        [str(installed / "crontabber"), f"--admin.conf={ini}", "--list-jobs"], cwd=tmp_path, env=env
    ).stdout
    assert "prune-run-log" in listed and " ok " in listed
    # the same site adds a job with tables of its own: the next tick brings them
    ini.write_text(
        "[crontabber]\n    jobs='''\n    jobs.runlog.PruneRunLogCronApp|1d\n"
        "    jobs.missing_symbols.MissingSymbolsRetentionCronApp|1d\n    '''\n"
    )
    run([str(installed / "crontabber"), f"--admin.conf={ini}"], cwd=tmp_path, env=env)
    assert {"missing_symbol", "upload", "prune_run"} <= tables(empty_database)
    logs = run(
        [
            str(installed / "crontabber"),
            f"--admin.conf={ini}",
            "--logs",
            "missing-symbols-retention",
        ],
        cwd=tmp_path,
        env=env,
    ).stdout
    assert "succeeded" in logs.splitlines()[0]


def test_a_checkout_reads_the_same_sql_directory():
    import jobs
    from crontabber import sqlfiles

    repo = os.path.realpath(REPO)
    assert sqlfiles.SQL_DIR == os.path.join(repo, "sql", "crontabber")
    assert jobs.SQL_DIR == os.path.join(repo, "sql", "jobs")
