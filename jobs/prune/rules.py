"""Retention rules for S3 pruning: what may be deleted, as pure functions.

A rule covers one bucket and one key prefix and deletes objects older than
its maximum age. Rules of kind ``uploads`` and ``batches`` also need the
database to agree (the archive belongs to a finished upload; the batch was
consumed); that check happens in the store, a page of keys at a time.

Safety rules that hold whatever the configuration says:

- a key no rule covers is never touched (only rule prefixes are listed);
- in the symbols bucket, nothing under the symbol files' prefix is deleted
  unless the rule's own prefix is inside it (the rule names it explicitly);
- a key that a path-resolving back end could read as another key (a ``.`` or ``..``
  segment, an empty one: :func:`ambiguous_key`) is never deleted: prefixes are compared as
  text, and s3proxy's file store resolves ``a/../v1/x`` to ``v1/x``.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from dataclasses import dataclass

from crontabber.errors import ConfigurationError


class Kind(enum.Enum):
    UPLOADS = "uploads"  # inbox archives of done/failed uploads
    BATCHES = "batches"  # consumed missing-symbol batches
    AGE = "age"  # anything under the prefix older than the age (reports, extra rules)


@dataclass(frozen=True)
class Rule:
    """Delete objects under ``bucket/prefix`` older than ``max_age_days``."""

    name: str
    kind: Kind
    bucket: str
    prefix: str
    max_age_days: float

    def cutoff(self, now: dt.datetime) -> dt.datetime:
        """Objects (and uploads, batches) last changed before this may go."""
        return now - dt.timedelta(days=self.max_age_days)


@dataclass(frozen=True)
class Protection:
    """The symbol files: ``symbols_bucket/symbols_prefix``."""

    symbols_bucket: str
    symbols_prefix: str

    def guards(self, rule: Rule) -> bool:
        """Whether ``rule`` must skip keys under the symbols prefix.

        A rule whose prefix lies inside the symbols prefix names it
        explicitly and is allowed; any other rule on that bucket is not.
        """
        return (
            rule.bucket == self.symbols_bucket
            and bool(self.symbols_prefix)
            and not rule.prefix.startswith(self.symbols_prefix)
        )

    def allows(self, rule: Rule, key: str) -> bool:
        return not ambiguous_key(key) and not (
            self.guards(rule) and key.startswith(self.symbols_prefix)
        )


def ambiguous_key(key: str) -> bool:
    """Pure: whether ``key`` holds a segment a back end that maps keys to paths would
    resolve (``.``, ``..``) or drop (an empty one: a leading ``/``, ``//``; a trailing ``/``,
    a folder marker, is fine). S3 keeps such a key literally; a file store may not, and then
    a text prefix check says nothing about the object reached (security review, N-7)."""
    segments = key.split("/")
    return any(segment in (".", "..") for segment in segments) or "" in segments[:-1]


_EXTRA = re.compile(
    r"^(?P<bucket>[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])/(?P<prefix>\S*)\s*\|\s*(?P<days>\d+(\.\d+)?)$"
)


def parse_extra_rules(text: str) -> list[Rule]:
    """Extra rules, one per line (or ``;``): ``BUCKET/PREFIX|DAYS``.

    ``logs-bucket/tmp/|7`` deletes objects under ``tmp/`` of ``logs-bucket``
    older than 7 days. ``BUCKET/|DAYS`` covers the whole bucket.

    Raises:
        ConfigurationError: naming the bad line.
    """
    rules = []
    for line in re.split(r"[\n;]", text or ""):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _EXTRA.match(line)
        if not match:
            raise ConfigurationError(f"prune rule {line!r}", "expected BUCKET/PREFIX|DAYS")
        rules.append(
            Rule(
                f"extra:{match['bucket']}/{match['prefix']}",
                Kind.AGE,
                match["bucket"],
                match["prefix"],
                float(match["days"]),
            )
        )
    return rules


def older(last_modified: dt.datetime, rule: Rule, now: dt.datetime) -> bool:
    """Whether an object last modified at ``last_modified`` is past the rule's age."""
    return last_modified < rule.cutoff(now)
