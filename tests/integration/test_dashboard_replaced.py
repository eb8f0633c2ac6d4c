"""The dashboard's uploads panel lists the symbol files replaced in the last day, with what
each replaced (issue #33: the overwrite rule's record), read from the real database."""

from __future__ import annotations

from tests.fixtures.dashboard_data import dashboard, pipeline_fleet  # noqa: F401 - fixtures

KEY = "v1/xul.pdb/44E4EC8C2F41492B9369D6B9A059577C2/xul.sym"


def test_the_files_replaced_today_and_what_they_replaced(dashboard, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    sql = dashboard.crontab.sql
    ids = [
        sql(
            "INSERT INTO upload (inbox_key, filename, size, status) VALUES (%s, %s, 1, 'done') "
            "RETURNING id",
            (f"inbox/{name}", name),
        )[0]["id"]
        for name in ("e.zip", "m.zip")
    ]
    for key, upload, replaced, age, previous in [
        (KEY, ids[1], True, "1 hour", (ids[0], "9e107d9d372bb6826bd81d3542a419d6", 4321)),
        ("v1/old.pdb/" + "A" * 33 + "/old.sym", ids[1], True, "2 days", (None, None, None)),
        ("v1/new.pdb/" + "B" * 33 + "/new.sym", ids[1], False, "1 hour", (None, None, None)),
    ]:
        sql(
            "INSERT INTO file_upload (upload_id, key, size, original_size, original_md5,"
            ' compressed, "update", created_at, previous_upload_id, previous_md5, previous_size)'
            " VALUES (%s, %s, 10, 20, 'x', true, %s, clock_timestamp() - %s::interval, %s, %s, %s)",
            (upload, key, replaced, age, *previous),
        )
    dashboard.start()
    status, _, doc = dashboard.get("/api/pipeline")
    assert status == 200
    uploads = doc["uploads"]
    assert uploads["replaced_total"] == 1  # the one of 2 days ago is outside the day
    (row,) = uploads["replaced"]
    assert (row["key"], row["upload_id"]) == (KEY, ids[1])
    assert row["previous"] == {
        "upload_id": ids[0],
        "md5": "9e107d9d372bb6826bd81d3542a419d6",
        "size": 4321,
    }
    _, _, page = dashboard.get("/")
    assert KEY in page and f"upload {ids[0]}, 4321 bytes, MD5 9e107d9d" in page
