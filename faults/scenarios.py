"""Each job's fault scenario: how to seed its work, when its work is settled, and a brute-force
check of its invariants that does not go through the code under test (the checkers list S3,
read the tables and count msgpack bytes themselves).

A scenario's ``check()`` returns a :class:`Check`: units lost, units duplicated, and problems
(a half-published upload, a partial index left behind...) that make the round not converge.
"""

from __future__ import annotations

import collections
import csv
import datetime as dt
import gzip
import io
import os
import random
import tempfile
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import msgpack
from elasticsearch import NotFoundError

from faults import harness
from faults.harness import ALIAS, INBOX, PRUNE_BUCKET, SYMBOLS


@dataclass
class Check:
    lost: int = 0
    duplicated: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.lost and not self.duplicated and not self.problems


class Scenario:
    """One job under faults."""

    app: str = ""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.db = harness.connect()
        self.s3 = harness.s3_client()
        harness.ensure_buckets(self.s3)

    def command(self) -> list[str]:
        return harness.job_command(self.app)

    def seed(self) -> None:
        """Add this round's work."""

    def settled(self) -> bool:
        return True

    def started(self) -> bool:
        """Whether the job has begun this round's work (visible in the database); polled
        before a PostgreSQL fault so that it lands on work under way."""
        return True

    def check(self) -> Check:
        raise NotImplementedError

    def during(self) -> Check:
        """Checked right after a kill, before any rerun (a state readers may see)."""
        return Check()


# ------------------------------------------------------------------ uploads ---


def _sym(seed: str, module: str, lines: int) -> bytes:
    """A .sym file whose MODULE record names ``module`` and id ``seed`` (its key's)."""
    body = [f"MODULE windows x86_64 {seed} {module}"]
    body += [f"FUNC {i * 64:x} 40 0 faults::{seed}::f{i}()" for i in range(lines)]
    return ("\n".join(body) + "\n").encode()


class Uploads(Scenario):
    """Two archives per round (6 deflated .sym members, a stored binary member, an ignorable file:
    small, so that a round is cheap while each run still publishes a dozen objects over its
    4 workers); every member's key is new. A done upload must have each member's object,
    the .sym ones gzipped (Content-Encoding: gzip) and inflating to the member's bytes, the
    others byte-equal, and one file_upload row each; a failed one must name a reason and
    have written no object and no row."""

    app = "process-uploads"
    SYMS = 6

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.members: dict[int, dict[str, bytes]] = {}
        self.checked: set[int] = set()
        self.tmp = tempfile.TemporaryDirectory(prefix="faults-uploads-")

    def seed(self) -> None:
        from jobs.uploads.commands import enqueue_archive
        from jobs.uploads.store import UploadStore

        store = UploadStore(self.db)
        for _ in range(2):
            tag = uuid.uuid4().hex.upper()
            members: dict[str, bytes] = {}
            for i in range(self.SYMS):
                debug_id = f"{tag[:31]}{i:02X}"
                members[f"faultsu{i}.pdb/{debug_id}/faultsu{i}.sym"] = _sym(
                    debug_id, f"faultsu{i}.pdb", 200 + 40 * i
                )
            members[f"faultsu.dll/{tag[:32]}0/faultsu.dl_"] = os.urandom(20_000)
            path = os.path.join(self.tmp.name, f"faults-{tag[:8]}.zip")
            with zipfile.ZipFile(path, "w") as archive:
                for name, data in members.items():
                    kind = zipfile.ZIP_DEFLATED if name.endswith(".sym") else zipfile.ZIP_STORED
                    archive.writestr(name, data, compress_type=kind)
                archive.writestr("faults-symbols.txt", b"ignored\n")
            upload_id = enqueue_archive(store, self.s3, INBOX, "inbox/", _path(path), "faults")
            os.unlink(path)
            self.members[upload_id] = members

    def settled(self) -> bool:
        rows = harness.query(self.db, "uploads", ids=self.fresh())
        return all(row[3] in ("done", "failed") for row in rows)

    def started(self) -> bool:
        """An upload of the round claimed (the job has read the queue and is publishing)."""
        rows = harness.query(self.db, "uploads", ids=self.fresh())
        return any(row[3] != "pending" for row in rows)

    def fresh(self) -> list[int]:
        return [i for i in self.members if i not in self.checked]

    def check(self) -> Check:
        result = Check()
        fresh = self.fresh()
        rows = {row[0]: row for row in harness.query(self.db, "uploads", ids=fresh)}
        recorded = collections.Counter(
            row[0] for row in harness.query(self.db, "file_uploads", ids=fresh)
        )
        for upload_id in fresh:
            status, error = rows[upload_id][3], rows[upload_id][4]
            members = self.members[upload_id]
            present = {name: self._object(name) for name in members}
            if status == "done":
                for name, data in members.items():
                    got = present[name]
                    if got is None or got != data:
                        result.lost += 1
                        result.problems.append(
                            f"upload {upload_id}: {name} {'missing' if got is None else 'differs'}"
                        )
                if recorded[upload_id] != len(members):
                    result.problems.append(
                        f"upload {upload_id}: {recorded[upload_id]} file_upload rows for "
                        f"{len(members)} members"
                    )
            elif status == "failed":
                # a valid archive that ended failed is an upload lost to the faults
                result.lost += 1
                written = [name for name, got in present.items() if got is not None]
                if not error:
                    result.problems.append(f"upload {upload_id}: failed without a reason")
                if written or recorded[upload_id]:
                    result.problems.append(
                        f"upload {upload_id}: failed ({error}) but half-"
                        f"published: {len(written)} objects, "
                        f"{recorded[upload_id]} rows"
                    )
            else:
                result.problems.append(f"upload {upload_id}: still {status}")
            self.checked.add(upload_id)
        return result

    def _object(self, name: str) -> bytes | None:
        """The member's bytes as the symbols bucket serves them (inflated when the object is
        gzip-encoded, which every .sym object must be), or None when absent."""
        try:
            got = self.s3.get_object(Bucket=SYMBOLS, Key=f"v1/{name}")
        except self.s3.exceptions.NoSuchKey:
            return None
        body = got["Body"].read()
        if name.endswith(".sym"):
            if got.get("ContentEncoding") != "gzip":
                return b"<not gzip-encoded>"
            return gzip.decompress(body)
        return body


def _path(text: str) -> Any:
    import pathlib

    return pathlib.Path(text)


# ------------------------------------------------------------ missing symbols ---

Symbol = tuple[str, str, str, str]
FIRST_DAY = dt.date(2026, 11, 1)
DAYS = 20


class MissingSymbols(Scenario):
    """Four batches of 300 lookups per round (two transactions of two batches) over a small
    set of symbols (so counts add up across batches and transactions), seen on 20 days of
    November 2026. The totals per symbol and per symbol and day must equal a brute-force
    count of the batches' msgpack bytes, and every batch must have one `ok` row with its
    event count. Each batch is read back from S3 and decoded once, when first checked (its
    bytes never change; the database's totals are compared with all batches' sums every
    round)."""

    app = "missing-symbols"
    BATCHES, EVENTS = 4, 300

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.keys: list[str] = []
        self.round = 0
        # this instance's symbols and batches only (the database keeps earlier runs')
        self.tag = uuid.uuid4().hex[:8]
        self.like = f"faultsm{self.tag}_%"
        self.batches = f"missing/faults/{self.tag}/"
        # key -> (totals, totals per day, events) decoded from the batch's bytes in S3
        self.decoded: dict[
            str,
            tuple[collections.Counter[Symbol], collections.Counter[tuple[Symbol, dt.date]], int],
        ] = {}

    def seed(self) -> None:
        self.round += 1
        for _ in range(self.BATCHES):
            events = []
            for _ in range(self.EVENTS):
                n = self.rng.randrange(40)
                event: dict[str, Any] = {
                    "debug_file": f"faultsm{self.tag}_{n}.pdb",
                    "debug_id": f"{n:033X}",
                    "seen_at": (
                        dt.datetime.combine(FIRST_DAY, dt.time(12), dt.timezone.utc)
                        + dt.timedelta(days=self.rng.randrange(DAYS))
                    ).timestamp(),
                }
                if n % 3 == 0:
                    event["code_file"] = f"faultsm{n}.dll"
                if self.rng.random() < 0.5:
                    event["count"] = self.rng.randint(1, 5)
                events.append(event)
            key = f"{self.batches}{uuid.uuid4().hex}.msgpack"
            self.s3.put_object(
                Bucket=INBOX, Key=key, Body=b"".join(msgpack.packb(e) for e in events)
            )
            self.keys.append(key)

    def settled(self) -> bool:
        rows = harness.query(self.db, "batch_rows", like=self.batches + "%")
        return {row[0] for row in rows} >= set(self.keys)

    def expected(
        self,
    ) -> tuple[
        collections.Counter[Symbol], collections.Counter[tuple[Symbol, dt.date]], dict[str, int]
    ]:
        """Brute force: every batch read back from S3 and decoded event by event (once per
        batch: see the class's docstring), summed over all batches."""
        totals: collections.Counter[Symbol] = collections.Counter()
        days: collections.Counter[tuple[Symbol, dt.date]] = collections.Counter()
        events: dict[str, int] = {}
        for key in self.keys:
            if key not in self.decoded:
                self.decoded[key] = self._decode(key)
            batch_totals, batch_days, n = self.decoded[key]
            totals.update(batch_totals)
            days.update(batch_days)
            events[key] = n
        return totals, days, events

    def _decode(
        self, key: str
    ) -> tuple[collections.Counter[Symbol], collections.Counter[tuple[Symbol, dt.date]], int]:
        totals: collections.Counter[Symbol] = collections.Counter()
        days: collections.Counter[tuple[Symbol, dt.date]] = collections.Counter()
        body = self.s3.get_object(Bucket=INBOX, Key=key)["Body"].read()
        n = 0
        for event in msgpack.Unpacker(io.BytesIO(body), raw=False):
            n += 1
            symbol = (
                event["debug_file"],
                event["debug_id"],
                event.get("code_file") or "",
                event.get("code_id") or "",
            )
            count = event.get("count", 1)
            day = dt.datetime.fromtimestamp(event["seen_at"], dt.timezone.utc).date()
            totals[symbol] += count
            days[(symbol, day)] += count
        return totals, days, n

    def check(self) -> Check:
        result = Check()
        totals, days, events = self.expected()
        got: collections.Counter[Any] = collections.Counter(
            {
                tuple(row[:4]): row[4]
                for row in harness.query(self.db, "missing_totals", like=self.like)
            }
        )
        got_days: collections.Counter[Any] = collections.Counter(
            {
                (tuple(row[:4]), row[4]): row[5]
                for row in harness.query(self.db, "missing_day_totals", like=self.like)
            }
        )
        # lookups lost or counted twice, by symbol; the per-day table must agree too
        want: collections.Counter[Any] = collections.Counter(totals)
        result.lost += sum((want - got).values())
        result.duplicated += sum((got - want).values())
        if collections.Counter(days) != got_days:
            result.problems.append("missing_symbol_day differs from the batches' days")
        batches = {
            row[0]: row for row in harness.query(self.db, "batch_rows", like=self.batches + "%")
        }
        for key in self.keys:
            row = batches.get(key)
            if row is None or row[2] != "ok" or row[1] != events[key]:
                result.problems.append(f"batch {key}: {row}")
        return result


class MissingSymbolsReport(Scenario):
    """Reports of 3 of the seeded days (each round's a random run of 3 consecutive ones of the
    20), written by one ``--rerun`` per round (removed before each round): after the reruns
    each day's CSV must be there and equal to one the checker writes itself from
    missing_symbol_day (header, rows by count descending, ties by the fields)."""

    app = "missing-symbols-report"
    DAYS = 3

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.first = 0  # the round's first day, as an offset from FIRST_DAY

    def command(self) -> list[str]:
        # --date D reports D's previous day: these dates report the round's days
        first = FIRST_DAY + dt.timedelta(days=self.first + 1)
        last = FIRST_DAY + dt.timedelta(days=self.first + self.DAYS)
        # --reason: a rerun is an audited action that needs one (require_reason): without it
        # every run of this drill was refused (exit 1) and its kills never landed
        return harness.runner_command(
            "--rerun",
            self.app,
            "--date",
            first.isoformat(),
            "--to",
            last.isoformat(),
            "--reason",
            "fault drill",
        )

    def seed(self) -> None:
        self.first = self.rng.randrange(DAYS - self.DAYS + 1)
        keys = list(harness.list_objects(self.s3, SYMBOLS, "reports/missing-symbols/"))
        for key in keys:
            self.s3.delete_object(Bucket=SYMBOLS, Key=key)

    def check(self) -> Check:
        result = Check()
        for offset in range(self.first, self.first + self.DAYS):
            day = FIRST_DAY + dt.timedelta(days=offset)
            rows = sorted(
                harness.query(self.db, "day_rows", day=day),
                key=lambda r: (-r[4], r[0], r[1], r[2], r[3]),
            )
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")
            writer.writerow(("debug_file", "debug_id", "code_file", "code_id", "count"))
            writer.writerows(rows)
            key = f"reports/missing-symbols/{day:%Y-%m-%d}.csv"
            try:
                body = self.s3.get_object(Bucket=SYMBOLS, Key=key)["Body"].read().decode()
            except self.s3.exceptions.NoSuchKey:
                result.lost += 1
                result.problems.append(f"{key} missing")
                continue
            if body != text.getvalue():
                result.lost += 1
                result.problems.append(f"{key} differs from missing_symbol_day")
        return result


# ------------------------------------------------------------------- search ---


class Rebuild(Scenario):
    """The rebuild over a source that does not change between rounds, so every complete
    version of the alias holds the same number of documents, N (the first unkilled build's).
    Right after each kill the alias must point at one index of N documents; after the reruns
    every version left must hold N (a partial one is never kept), at most `keep` of them.
    Versions older than the first unkilled build (an earlier suite run's, built from a smaller
    source) are not partial: they are left out of the count check (the next build deletes
    them; one that stayed would exceed `keep`)."""

    app = "rebuild-search-index"
    KEEP = 2

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.es = harness.es_client()
        self.complete: int | None = None
        self.earlier: set[str] = set()  # versions before the first unkilled build

    def versions(self) -> dict[str, int]:
        found = self.es.indices.get(
            index=f"{ALIAS}-*", allow_no_indices=True, expand_wildcards="all"
        )
        names = sorted(found)
        if names:
            self.es.indices.refresh(index=",".join(names), ignore_unavailable=True)
        counts = {}
        for name in names:
            try:
                counts[name] = int(self.es.count(index=name)["count"])
            except NotFoundError:
                # deleted between the listing and the count: a delete the killed job had
                # sent still completes in Elasticsearch (a version it was pruning)
                continue
        return counts

    def aliased(self) -> list[str]:
        if not self.es.indices.exists_alias(name=ALIAS):
            return []
        return sorted(self.es.indices.get_alias(name=ALIAS))

    def during(self) -> Check:
        result = Check()
        behind = self.aliased()
        if self.complete is None:
            return result
        counts = self.versions()
        if len(behind) != 1 or counts.get(behind[0]) != self.complete:
            result.problems.append(
                f"right after the kill the alias points at {behind} "
                f"({[counts.get(b) for b in behind]} documents, "
                f"complete: {self.complete})"
            )
        return result

    def check(self) -> Check:
        result = Check()
        counts = self.versions()
        behind = self.aliased()
        if self.complete is None and len(behind) == 1:
            self.complete = counts[behind[0]]
            self.earlier = set(counts) - set(behind)
        if len(behind) != 1 or counts.get(behind[0]) != self.complete:
            result.problems.append(f"the alias points at {behind}")
            return result
        partial = [
            name for name, n in counts.items() if n != self.complete and name not in self.earlier
        ]
        if partial:
            result.problems.append(
                f"partial indices left: {partial} ({[counts[p] for p in partial]} of "
                f"{self.complete})"
            )
        if len(counts) > self.KEEP:
            result.problems.append(f"{len(counts)} versions kept (keep={self.KEEP})")
        return result


# -------------------------------------------------------------------- prune ---


class Prune(Scenario):
    """Objects under faults-prune/junk/ (8 folders, 100 bytes each) and a rule deleting what
    is older than ~1 s; each round's runs are capped (the pool is reused, refilled when low).
    What the round's runs recorded in prune_run/prune_rule_result must equal what the checker
    sees gone from the bucket: keys and bytes (a killed run's batches in flight are counted by
    the round's first run after the killed run's lease passed, which reconciles its intents
    first: docs/jobs/prune.md).

    A refill comes while at least 3 runs' worth of old objects are left, so the new ones have
    aged past the rule by the time a run needs them: only the first seed waits for its
    objects to age (once). The pool is small, as listing it twice a round is a round's cost."""

    app = "prune-s3"
    SIZE = 100
    CAP = 150
    POOL = 8 * CAP

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.before: dict[str, int] = {}
        self.after_run = 0

    def command(self) -> list[str]:
        return harness.job_command(self.app) + [f"--crontabber.class-PruneS3CronApp.cap={self.CAP}"]

    def seed(self) -> None:
        have = harness.list_objects(self.s3, PRUNE_BUCKET, "junk/")
        if len(have) < 4 * self.CAP:
            body = b"x" * self.SIZE
            keys = [f"junk/{i % 8}/{uuid.uuid4().hex}" for i in range(self.POOL - len(have))]
            with ThreadPoolExecutor(8) as pool:
                list(
                    pool.map(
                        lambda k: self.s3.put_object(Bucket=PRUNE_BUCKET, Key=k, Body=body), keys
                    )
                )
            if len(have) < self.CAP:
                import time

                time.sleep(1.0)  # too few old ones left: let the new ones age past the rule
            have = harness.list_objects(self.s3, PRUNE_BUCKET, "junk/")
        self.before = have
        self.after_run = harness.query(self.db, "last_prune_run")[0][0]

    def settled(self) -> bool:
        """No batch of the round's runs left uncounted: a killed run's are reconciled by the
        first run after its lease (the fault INI's lease_seconds) has passed."""
        return harness.query(self.db, "prune_unsettled", after=self.after_run)[0][0] == 0

    def check(self) -> Check:
        result = Check()
        now = harness.list_objects(self.s3, PRUNE_BUCKET, "junk/")
        gone = set(self.before) - set(now)
        gone_bytes = sum(self.before[k] for k in gone)
        keys, size = harness.query(self.db, "prune_audit", after=self.after_run)[0]
        if keys < len(gone):
            result.lost += int(len(gone) - keys)
        elif keys > len(gone):
            result.duplicated += int(keys - len(gone))
        if size != gone_bytes:
            result.problems.append(
                f"audit says {keys} keys, {size} bytes; gone: {len(gone)} keys, {gone_bytes} bytes"
            )
        return result


# ------------------------------------------------------------------- runlog ---


class RunLog(Scenario):
    """3,000 run-log rows older than keep_days (90) and 50 recent ones of a fake app per round,
    deleted 300 a transaction: afterwards no old row is left and every recent one is kept."""

    app = "prune-run-log"
    FAKE = "faults-runlog"

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.recent = harness.query(self.db, "log_counts", app=self.FAKE, days=90)[0][1]

    def seed(self) -> None:
        harness.query(self.db, "seed_log", app=self.FAKE, days=90, old=3000, recent=50)
        self.recent += 50

    def check(self) -> Check:
        result = Check()
        old, recent = harness.query(self.db, "log_counts", app=self.FAKE, days=90)[0]
        if old:
            result.problems.append(f"{old} old rows left")
        if recent < self.recent:
            result.lost += self.recent - recent
        return result


SCENARIOS: tuple[type[Scenario], ...] = (
    Uploads,
    MissingSymbols,
    MissingSymbolsReport,
    Rebuild,
    Prune,
    RunLog,
)
