"""A parsed ``crontabber.ini`` kept between cron ticks.

Every host starts the runner every few minutes, and the INI file rarely changes between two
ticks. Parsing it takes configobj (its import alone compiles a dozen regular expressions:
~2.5 ms) and the parse (~1.5 ms): together about a tenth of an idle tick. So the parse's
result (each value with its path, and the section paths) is kept in a file of its own, read
back when the INI file is unchanged, as Python keeps a ``.pyc`` beside a source.

- **Where**: ``$XDG_CACHE_HOME/crontabber/`` (``~/.cache/crontabber/``), one file per INI
  path, named after it. ``CRONTABBER_INI_CACHE=0`` (or no home) turns it off.
- **When it is used**: only while the INI file's device, inode, size, modification time
  and change time (``ctime``, which nothing but the kernel sets: a copy that keeps the old
  modification time still changes it) are those recorded when it was parsed. Anything else,
  a damaged or foreign cache file included, is a miss: the file is parsed again and the
  cache rewritten.
- **Safety**: the cache holds what the INI file holds (a database password, perhaps), so
  it is written as the INI file's reader only: a directory of mode 0700 and files of mode
  0600, owned by the process's user, replaced atomically; a cache file (or directory) that
  is not the user's own or that others may write is never read; links are not followed.
- **Only for the user's own INI file** (:func:`usable_for`): whoever runs as the process's
  user can rewrite its cache, so a cache is kept and read only for an INI file that user owns
  (and so could have written itself). A root-owned ``/etc/crontabber.ini`` read by the
  runner's user is parsed every time: a job, or anything else running as that user, could
  otherwise change the configuration every later tick reads, invisibly (the security
  review's N-9). ``--configtest`` always parses the file.
- At most :data:`KEEP` files are kept (the oldest go: a test suite writes one per
  temporary INI file).
"""

from __future__ import annotations

import marshal
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, TypeAlias

    #: What is kept: ``(path, name, value)`` of each value, and each section's path.
    Parsed: TypeAlias = tuple[tuple[tuple[tuple[str, ...], str, str], ...], tuple[str, ...]]

FORMAT = 1  # bumped when what is kept changes
KEEP = 64


def cache_dir(environ: Mapping[str, str] = os.environ) -> str | None:
    """The cache's directory, or None when it is turned off (``CRONTABBER_INI_CACHE=0``) or
    there is no home to keep it in."""
    if environ.get("CRONTABBER_INI_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    base = environ.get("XDG_CACHE_HOME") or (
        os.path.join(environ["HOME"], ".cache") if environ.get("HOME") else None
    )
    return os.path.join(base, "crontabber") if base else None


def usable_for(path: str) -> bool:
    """Whether a cache may stand for the INI file at ``path``: the process's user owns it.

    Raises:
        OSError: ``path`` cannot be examined.
    """
    return os.stat(path).st_uid == os.getuid()


def file_key(path: str) -> tuple[int, ...]:
    """What must not change for a parse of ``path`` to stand (see the module's docstring).

    Raises:
        OSError: ``path`` cannot be examined.
    """
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def entry(directory: str, path: str) -> str:
    """The cache file of the INI file at ``path`` (an absolute path) in ``directory``."""
    return os.path.join(directory, path.replace("%", "%%").replace("/", "%") + ".marshal")


def load(directory: str | None, path: str, key: tuple[int, ...]) -> Parsed | None:
    """The parse kept for ``path`` when it was taken with ``key``, else None (no cache, a
    different key, a file that is not safely this user's, or one that does not decode)."""
    if directory is None:
        return None
    try:
        if os.lstat(directory).st_uid != os.getuid():  # (as save() refuses to write there)
            return None
        fd = os.open(entry(directory, path), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        with os.fdopen(fd, "rb", closefd=False) as file:
            kept = marshal.loads(file.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    finally:
        os.close(fd)
    if not (isinstance(kept, tuple) and len(kept) == 4 and kept[0] == FORMAT and kept[1] == key):
        return None
    return kept[2], kept[3]


def save(directory: str | None, path: str, key: tuple[int, ...], parsed: Parsed) -> None:
    """Keep ``parsed`` for ``path`` (taken with ``key``); any error leaves no cache file,
    never a failed tick."""
    if directory is None:
        return
    target = entry(directory, path)
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.lstat(directory).st_uid != os.getuid():
            return
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(marshal.dumps((FORMAT, key, *parsed)))
        os.replace(temporary, target)
        _prune(directory)
    except (OSError, ValueError):
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _prune(directory: str) -> None:
    """Keep the newest :data:`KEEP` cache files."""
    with os.scandir(directory) as found:
        files = [
            (e.stat().st_mtime_ns, e.path)
            for e in found
            if e.name.endswith(".marshal") and e.is_file()
        ]
    for _, stale in sorted(files)[:-KEEP]:
        try:
            os.unlink(stale)
        except OSError:
            pass
