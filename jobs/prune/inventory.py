"""A rule's keys from the newest S3 Inventory report of its bucket, not from listing it.

S3 Inventory writes, once a day or week, into a destination bucket and prefix:
``<prefix>/<source-bucket>/<config-id>/<YYYY-MM-DDTHH-MMZ>/manifest.json``, which names
gzipped CSV data files (``files: [{key, size, MD5checksum}]``, ``fileFormat: CSV``,
``fileSchema: "Bucket, Key, Size, LastModifiedDate, ..."``) under ``.../data/``. Reading
them costs one GET per data file where listing a bucket of hundreds of millions of keys
costs one request per 1,000.

What is refused (:class:`InventoryRefused`), before anything of it is used: a manifest older
than the job's ``inventory_max_age_hours``, one of another bucket or not in CSV, one lacking
``Key``, ``Size`` or ``LastModifiedDate``; a data file whose size or MD5 differs from the
manifest's (checked before any of its rows is used). An inventory is a past picture of the
bucket, so each key is confirmed by a HEAD just before it is deleted: only a key whose
``LastModified`` (and ``ETag``, if the inventory has it) is still the inventory's goes; a
key gone since is skipped (deleting it would be a no-op), one uploaded again since stays.
"""

from __future__ import annotations

import concurrent.futures
import csv
import datetime as dt
import gzip
import hashlib
import json
import logging
import re
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from typing import IO, Any, Iterator

from crontabber.errors import WorkRefused
from jobs.s3 import is_not_found

from .engine import BATCH, Check, Scope, select_page, shards
from .rules import Rule, ambiguous_key

logger = logging.getLogger(__name__)

#: The folder of one report: ``2026-11-22T01-00Z``.
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d-\d\dZ$")
_NEEDED = ("Bucket", "Key", "Size", "LastModifiedDate")
_CHUNK = 1 << 20  # bytes read at a time from a data file


class InventoryRefused(WorkRefused):
    """An inventory report the prune job will not delete by: ``where`` names it (an
    ``s3://`` address), ``problem`` says why. Nothing of it is used; the run fails (exit 5,
    one line)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"inventory {where} refused: {problem}")


@dataclass(frozen=True)
class InventoryLocation:
    """Where S3 Inventory writes the reports of every bucket: ``bucket/prefix``, and the
    inventory configuration's id (empty: the only one there is for the bucket)."""

    bucket: str
    prefix: str = ""
    config_id: str = ""
    max_age: dt.timedelta = dt.timedelta(hours=48)

    def folder(self, source_bucket: str) -> str:
        """The destination folder of ``source_bucket``'s configurations."""
        prefix = self.prefix.strip("/")
        return f"{prefix}/{source_bucket}/" if prefix else f"{source_bucket}/"


@dataclass(frozen=True)
class DataFile:
    """One gzipped CSV data file of a report, as the manifest describes it."""

    key: str
    size: int
    md5: str


@dataclass(frozen=True)
class Manifest:
    """One inventory report: where its manifest is, the bucket it lists, when it was taken,
    its columns and its data files."""

    bucket: str  # where the report is (the destination)
    key: str  # of manifest.json
    source_bucket: str
    created: dt.datetime
    columns: list[str]
    files: list[DataFile]

    @property
    def address(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @classmethod
    def parse(cls, bucket: str, key: str, body: bytes) -> Manifest:
        """A manifest.json's content, checked for what pruning needs.

        Raises:
            InventoryRefused: not JSON, not CSV, a column missing, a field missing.
        """
        where = f"s3://{bucket}/{key}"
        try:
            doc = json.loads(body)
            file_format = doc.get("fileFormat")
            columns = [name.strip() for name in str(doc["fileSchema"]).split(",")]
            files = [
                DataFile(f["key"], int(f["size"]), str(f["MD5checksum"]).lower())
                for f in doc["files"]
            ]
            created = _created(doc, key)
            source = str(doc["sourceBucket"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InventoryRefused(where, f"not a readable manifest ({exc!r})") from None
        if file_format != "CSV":
            raise InventoryRefused(where, f"fileFormat is {file_format!r}, only CSV is read")
        missing = [name for name in _NEEDED if name not in columns]
        if missing:
            raise InventoryRefused(where, f"fileSchema lacks {', '.join(missing)}")
        return cls(bucket, key, source, created, columns, files)

    def check(self, source_bucket: str, now: dt.datetime, max_age: dt.timedelta) -> None:
        """Refuse a report of another bucket, or one older than ``max_age`` at ``now``.

        Raises:
            InventoryRefused: naming the report and its age.
        """
        if self.source_bucket != source_bucket:
            raise InventoryRefused(
                self.address, f"it lists bucket {self.source_bucket!r}, not {source_bucket!r}"
            )
        age = now - self.created
        if age > max_age:
            raise InventoryRefused(
                self.address,
                f"taken {age.total_seconds() / 3600:.1f} h ago, over "
                f"inventory_max_age_hours={max_age.total_seconds() / 3600:g}: it does not "
                "know what changed since",
            )


def _created(doc: dict[str, Any], key: str) -> dt.datetime:
    """When the report was taken: ``creationTimestamp`` (ms since the epoch), else the
    name of its folder."""
    if "creationTimestamp" in doc:
        return dt.datetime.fromtimestamp(int(doc["creationTimestamp"]) / 1000, dt.timezone.utc)
    stamp = key.rstrip("/").split("/")[-2]
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H-%MZ").replace(tzinfo=dt.timezone.utc)


def newest_manifest(client: Any, location: InventoryLocation, source_bucket: str) -> Manifest:
    """The newest report of ``source_bucket`` whose manifest.json is there (a report being
    delivered has none yet: the one before it is read).

    Raises:
        InventoryRefused: no configuration or no report for the bucket, or several
            configurations and no ``inventory_id`` to choose.
    """
    folder = location.folder(source_bucket)
    where = f"s3://{location.bucket}/{folder}"
    config_id = location.config_id
    if not config_id:
        ids = _subfolders(client, location.bucket, folder)
        if len(ids) != 1:
            raise InventoryRefused(
                where,
                "no inventory configuration there"
                if not ids
                else f"several configurations ({', '.join(ids)}): set inventory_id",
            )
        config_id = ids[0]
    reports = sorted(
        (
            name
            for name in _subfolders(client, location.bucket, f"{folder}{config_id}/")
            if _STAMP.match(name)
        ),
        reverse=True,
    )
    for stamp in reports:
        key = f"{folder}{config_id}/{stamp}/manifest.json"
        body = _get_if_there(client, location.bucket, key)
        if body is not None:
            return Manifest.parse(location.bucket, key, body)
    raise InventoryRefused(f"{where}{config_id}/", "no report with a manifest.json")


def _subfolders(client: Any, bucket: str, prefix: str) -> list[str]:
    """The names of the first-level "folders" under ``prefix`` (:func:`.engine.shards`)."""
    return [folder[len(prefix) :].rstrip("/") for folder in shards(client, bucket, prefix)[1]]


def _get_if_there(client: Any, bucket: str, key: str) -> bytes | None:
    from botocore.exceptions import ClientError

    try:
        return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as exc:
        if is_not_found(exc):
            return None
        raise


@dataclass(frozen=True)
class Row:
    """One object of a report: its key (decoded), size, ``LastModified`` and ETag."""

    key: str
    size: int
    modified: dt.datetime
    etag: str | None


def rows(client: Any, manifest: Manifest) -> Iterator[Row]:
    """The current objects a report lists, a data file at a time, each file checked
    against the manifest (size, MD5) before any of its rows is used.

    Raises:
        InventoryRefused: a data file whose size or MD5 is not the manifest's.
    """
    index = {name: i for i, name in enumerate(manifest.columns)}
    for data in manifest.files:
        with tempfile.TemporaryFile() as spool:
            _fetch_checked(client, manifest, data, spool)
            spool.seek(0)
            with gzip.open(spool, "rt", encoding="utf-8", newline="") as text:
                yield from _csv_rows(csv.reader(text), index, manifest.source_bucket)


def _fetch_checked(client: Any, manifest: Manifest, data: DataFile, spool: IO[bytes]) -> None:
    """Copy a data file into ``spool``, checking its size and MD5 on the way."""
    body = client.get_object(Bucket=manifest.bucket, Key=data.key)["Body"]
    digest, size = hashlib.md5(usedforsecurity=False), 0
    for chunk in iter(lambda: body.read(_CHUNK), b""):
        digest.update(chunk)
        size += len(chunk)
        spool.write(chunk)
    where = f"s3://{manifest.bucket}/{data.key}"
    if size != data.size:
        raise InventoryRefused(where, f"{size} bytes, the manifest says {data.size}")
    if digest.hexdigest() != data.md5:
        raise InventoryRefused(where, f"MD5 {digest.hexdigest()}, the manifest says {data.md5}")


def _csv_rows(reader: Iterator[list[str]], index: dict[str, int], bucket: str) -> Iterator[Row]:
    """Rows of one CSV data file: keys URL-decoded (S3 Inventory encodes them), delete
    markers and versions other than the latest left out."""
    key_at, size_at, modified_at = index["Key"], index["Size"], index["LastModifiedDate"]
    bucket_at, etag_at = index["Bucket"], index.get("ETag")
    latest_at, marker_at = index.get("IsLatest"), index.get("IsDeleteMarker")
    for line in reader:
        if line[bucket_at] != bucket:
            continue
        if latest_at is not None and line[latest_at].lower() != "true":
            continue
        if marker_at is not None and line[marker_at].lower() == "true":
            continue
        yield Row(
            urllib.parse.unquote_plus(line[key_at]),
            int(line[size_at] or 0),
            dt.datetime.fromisoformat(line[modified_at]),
            line[etag_at].strip('"') if etag_at is not None else None,
        )


@dataclass
class InventorySource:
    """A rule's keys from the newest report of its bucket (a :class:`~.engine.Source`):
    the report's rows chosen as listed keys are (:func:`~.engine.select_page`), each confirmed
    just before it goes by a HEAD (:meth:`confirm`). ``seen`` tells the report read
    (``Manifest``) once it is located."""

    client: Any
    rule: Rule
    scope: Scope
    check: Check | None
    location: InventoryLocation
    seen: Any = None  # Callable[[Manifest], None] | None
    _expected: dict[str, tuple[dt.datetime, str | None]] = field(default_factory=dict)

    def batches(self) -> Iterator[list[tuple[str, int]]]:
        """Batches of ``(key, size)`` the rule may delete by the report, within the budget.

        Raises:
            InventoryRefused: no report, or one refused (too old, corrupt).
        """
        manifest = newest_manifest(self.client, self.location, self.rule.bucket)
        manifest.check(self.rule.bucket, self.scope.now, self.location.max_age)
        logger.info(
            "prune: %s: by inventory %s (taken %s)",
            self.rule.name,
            manifest.address,
            manifest.created.isoformat(),
        )
        if self.seen is not None:
            self.seen(manifest)
        page: list[Row] = []
        refused = 0
        for row in rows(self.client, manifest):
            if ambiguous_key(row.key):  # (before the prefix: "prefix/../x" starts with it)
                refused += 1
                if refused == 1:
                    logger.warning(
                        "prune: %s: the inventory %s lists %s, a key with a '.', '..' or empty "
                        "segment: "
                        "never deleted (a forged report?)",
                        self.rule.name,
                        manifest.address,
                        row.key,
                    )
                continue
            if row.key.startswith(self.rule.prefix):
                page.append(row)
            if len(page) == BATCH:
                yield from self._chosen(page)
                page = []
            if self.scope.budget.exhausted:
                return
        yield from self._chosen(page)

    def _chosen(self, page: list[Row]) -> Iterator[list[tuple[str, int]]]:
        chosen = select_page(
            self.rule, ((r.key, r.size, r.modified) for r in page), self.scope, self.check
        )
        by_key = {r.key: r for r in page}
        self._expected = {key: (by_key[key].modified, by_key[key].etag) for key, _ in chosen}
        if chosen:
            yield chosen

    def confirm(self, chunk: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """The keys of ``chunk`` still as the report saw them (HEAD, on ``threads``
        threads): same ``LastModified`` (to the second: HTTP's resolution), same ETag if the
        report has it. A key gone is left out (nothing to delete), one changed stays."""
        with concurrent.futures.ThreadPoolExecutor(self.scope.threads) as pool:
            same = list(pool.map(self._unchanged, [key for key, _ in chunk]))
        kept = [item for item, ok in zip(chunk, same) if ok]
        if len(kept) < len(chunk):
            logger.info(
                "prune: %s: %d of %d keys changed or gone since the inventory: kept",
                self.rule.name,
                len(chunk) - len(kept),
                len(chunk),
            )
        return kept

    def _unchanged(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        modified, etag = self._expected[key]
        try:
            head = self.client.head_object(Bucket=self.rule.bucket, Key=key)
        except ClientError as exc:
            if is_not_found(exc):
                return False
            raise
        if etag is not None and head.get("ETag", "").strip('"') != etag:
            return False
        return bool(head["LastModified"].replace(microsecond=0) == modified.replace(microsecond=0))
