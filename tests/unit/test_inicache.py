"""The parse of crontabber.ini kept between ticks (crontabber.config.inicache): used only
while the file is unchanged, only from a file that is safely the user's own, never a tick's
failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crontabber.config import inicache
from crontabber.config.inifile import IniFile
from tests.helpers import REPO

TEXT = (
    "top=1\n[resource.postgresql]\n    host=db\n    password=s3cret\n[crontabber]\n    "
    "[[class-Foo]]\n        n=2\n"
)

# A process that reads the INI file and says what it found and whether it imported configobj.
READ = """
import json, sys
from crontabber.config.inifile import IniFile
ini = IniFile(sys.argv[1])
print(json.dumps({"values": [[list(v.path), v.name, v.value] for v in ini.values],
                  "sections": list(ini.sections), "configobj": "configobj" in sys.modules}))
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache in a directory of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CRONTABBER_INI_CACHE", raising=False)
    return tmp_path / "cache" / "crontabber"


def ini_file(tmp_path, text=TEXT):
    path = tmp_path / "crontabber.ini"
    path.write_text(text)
    return path


def read(path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", READ, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=os.environ,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_next_process_reads_the_parse_back_without_configobj(tmp_path, cache):
    path = ini_file(tmp_path)
    first, second = read(path), read(path)
    assert first["configobj"] and not second["configobj"]
    assert (second["values"], second["sections"]) == (first["values"], first["sections"])
    assert ["resource", "postgresql"] in [v[0] for v in second["values"]]
    (kept,) = cache.iterdir()
    assert (
        oct(kept.stat().st_mode & 0o777) == "0o600" and oct(cache.stat().st_mode & 0o777) == "0o700"
    )


def test_a_changed_file_is_parsed_again_even_with_its_old_size_and_time(tmp_path, cache):
    path = ini_file(tmp_path)
    IniFile(str(path))
    before = path.stat()
    path.write_text(TEXT.replace("host=db", "host=dc"))  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `cp -p` would leave it
    assert IniFile(str(path)).get(("resource", "postgresql"), "host") == "dc"


@pytest.mark.parametrize("damage", ["others may write it", "garbage", "another format"])
def test_a_cache_file_not_safely_ours_or_damaged_is_not_read(tmp_path, cache, damage):
    path = ini_file(tmp_path)
    IniFile(str(path))
    (kept,) = cache.iterdir()
    key = inicache.file_key(str(path))
    forged = ((((), "top", "forged"),), ())
    if damage == "others may write it":
        kept.write_bytes(__import__("marshal").dumps((inicache.FORMAT, key, *forged)))
        kept.chmod(0o666)
    elif damage == "garbage":
        kept.write_bytes(b"\x00not marshal")
    else:
        kept.write_bytes(__import__("marshal").dumps((inicache.FORMAT + 1, key, *forged)))
    assert IniFile(str(path)).get((), "top") == "1"


def test_turned_off_it_writes_nothing(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("CRONTABBER_INI_CACHE", "0")
    IniFile(str(ini_file(tmp_path)))
    assert not cache.exists()


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path, cache):
    cache.parent.mkdir()
    cache.write_text("a file where the directory should be")
    assert IniFile(str(ini_file(tmp_path))).get((), "top") == "1"


def test_only_the_newest_files_are_kept(tmp_path, cache):
    for n in range(inicache.KEEP + 5):
        folder = tmp_path / f"ini{n}"
        folder.mkdir()
        IniFile(str(ini_file(folder)))
    assert len(list(cache.iterdir())) == inicache.KEEP


def test_the_cache_of_an_ini_file_another_user_owns_is_neither_kept_nor_read(tmp_path, cache):
    """The third review's N-9: whoever runs as this process's user can write its cache, so a
    cache stands only for an INI file this user owns (and could have changed itself). Here the
    file is another user's (as root's /etc/crontabber.ini is to the runner's user: the test
    runs as root, which may chown), and a cache entry forged for it is not read."""
    path = ini_file(tmp_path)
    os.chown(path, 65534, 65534)  # nobody's
    IniFile(str(path))
    assert not cache.exists() or list(cache.iterdir()) == []  # nothing kept for it
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    forged = ((((), "top", "forged"),), ())
    kept = inicache.entry(str(cache), os.path.abspath(path))
    with open(kept, "wb") as file:
        file.write(
            __import__("marshal").dumps((inicache.FORMAT, inicache.file_key(str(path)), *forged))
        )
    os.chmod(kept, 0o600)
    assert IniFile(str(path)).get((), "top") == "1"
    assert (
        inicache.load(str(cache), os.path.abspath(path), inicache.file_key(str(path))) is not None
    )  # (it is there)


def test_a_cache_directory_another_user_owns_is_not_read(tmp_path, cache):
    """The review's I-7: save() refused such a directory, load() read it."""
    path = ini_file(tmp_path)
    IniFile(str(path))
    (kept,) = cache.iterdir()
    kept.write_bytes(
        __import__("marshal").dumps(
            (inicache.FORMAT, inicache.file_key(str(path)), (((), "top", "forged"),), ())
        )
    )
    assert (
        IniFile(str(path)).get((), "top") == "forged"
    )  # (a forged file of our own: read, as before)
    os.chown(cache, 65534, 65534)
    assert IniFile(str(path)).get((), "top") == "1"


def test_configtest_parses_the_file_itself(tmp_path, cache):
    """What ``--configtest`` shows is the file's, even when a cache of the user's own says
    otherwise (a forged or stale parse: the check is of the file)."""
    path = tmp_path / "c.ini"
    path.write_text(
        "[crontabber]\n    error_retry_time=300\n    jobs=tests.fixtures.sample_jobs.BasicJob|1d\n"
    )
    parsed = IniFile(str(path))
    (kept,) = cache.iterdir()
    values = tuple(
        (v.path, v.name, "301" if v.name == "error_retry_time" else v.value) for v in parsed.values
    )
    kept.write_bytes(
        __import__("marshal").dumps(
            (inicache.FORMAT, inicache.file_key(str(path)), values, parsed.sections)
        )
    )
    assert (
        IniFile(str(path)).get(("crontabber",), "error_retry_time") == "301"
    )  # a tick would read it
    done = subprocess.run(
        [sys.executable, "-m", "crontabber", f"--admin.conf={path}", "--configtest"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    assert "crontabber.error_retry_time = 300  [INI file" in done.stdout
