"""jobs/search_index.py's pure part: where index-new-uploads starts reading."""

import datetime as dt

from jobs.search_index import Watermark, starting_point
from search.indexer import LiveIndex


def test_the_incremental_job_starts_from_the_watermark_of_the_same_index_only():
    t = dt.datetime(2026, 11, 23, 12, tzinfo=dt.timezone.utc)
    overlap = dt.timedelta(minutes=10)
    built = LiveIndex("symbols-20261123110000000000", t - dt.timedelta(hours=1))
    assert starting_point(Watermark(built.name, t), built, "symbols", overlap)[0] == t - overlap
    # the alias moved since the watermark: the new index's source time
    assert starting_point(Watermark("symbols-old", t), built, "symbols", overlap)[0] == (
        t - dt.timedelta(hours=1) - overlap
    )
    assert starting_point(None, built, "symbols", overlap)[0] == t - dt.timedelta(hours=1) - overlap
    # an index without _meta: an hour before the time in its name; a foreign name: everything
    old = LiveIndex("symbols-20261123110000000000", None)
    assert starting_point(None, old, "symbols", overlap)[0] == (
        dt.datetime(2026, 11, 23, 10, tzinfo=dt.timezone.utc) - overlap
    )
    assert starting_point(None, LiveIndex("handmade", None), "symbols", overlap)[0] is None
