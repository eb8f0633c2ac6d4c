"""The local S3 and Elasticsearch the later jobs use: the per-test fixtures work and clean up."""

from tests.helpers import es_client, s3_client


def test_s3_bucket_fixture_round_trip(s3_bucket):
    client = s3_client()
    client.put_object(
        Bucket=s3_bucket,
        Key="v1/xul.pdb/ABC/xul.sym",
        Body=b"MODULE x",
        Metadata={"original-md5": "0" * 32},
    )
    head = client.head_object(Bucket=s3_bucket, Key="v1/xul.pdb/ABC/xul.sym")
    assert head["ContentLength"] == 8 and head["Metadata"]["original-md5"] == "0" * 32
    listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="v1/")
    assert [obj["Key"] for obj in listed["Contents"]] == ["v1/xul.pdb/ABC/xul.sym"]


def test_es_index_fixture_and_alias_swap(es_index):
    es = es_client()
    assert es.cluster.health(wait_for_status="yellow", timeout="30s")["status"] in (
        "green",
        "yellow",
    )
    for version in ("1", "2"):
        es.indices.create(
            index=f"{es_index}-{version}", settings={"number_of_shards": 1, "number_of_replicas": 0}
        )
    es.indices.update_aliases(actions=[{"add": {"index": f"{es_index}-1", "alias": es_index}}])
    es.indices.update_aliases(
        actions=[
            {"remove": {"index": f"{es_index}-1", "alias": es_index}},
            {"add": {"index": f"{es_index}-2", "alias": es_index}},
        ]
    )
    assert list(es.indices.get_alias(name=es_index)) == [f"{es_index}-2"]
