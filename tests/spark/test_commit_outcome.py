"""`df.write.format("delta").save` when the commit's acknowledgement is lost: the data-source
writer never deletes files a version may reference.

The failures are injected at the S3 server (moto on 127.0.0.1, `start_moto_server(intercept=...)`):
the commit's PUT lands and the client is told 500; then, in the second case, the store stops
answering about `_delta_log` and refuses writes (an outage), so the writer cannot find out what
happened and the commit marker cannot be written after the fact. Spark then calls the writer's
abort in another Python worker. Oracles: the rows written (hand-made), the objects in the bucket
(boto3), delta-rs reading the table once the store answers again."""

from __future__ import annotations

import uuid
from urllib.parse import unquote

import boto3
import pyarrow as pa
import pytest

from tests.fixtures.moto import LOSE_ACK, start_moto_server
from tests.write.test_writer import same_rows

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


class Faults:
    """What the server does with the next requests: `lose_ack_of` names the commit file whose PUT
    lands unacknowledged; `outage` (set once that happened, when `then_outage`) refuses every
    request about `_delta_log` and every PUT with 403 — other reads, listings and deletes still
    work (a store abort can still ask, and delete through)."""

    def __init__(self):
        self.lose_ack_of: str | None = None
        self.then_outage = False
        self.outage = False
        self.lost = 0

    def __call__(self, method: str, key: str, query: str):
        if self.outage and ("_delta_log" in key or "_delta_log" in unquote(query) or method == "PUT"):
            return 403
        if method == "PUT" and self.lose_ack_of is not None and key == self.lose_ack_of:
            self.lose_ack_of = None
            self.lost += 1
            self.outage = self.then_outage
            return LOSE_ACK
        return None


@pytest.fixture(scope="module")
def faulty_s3():
    faults = Faults()
    endpoint, stop = start_moto_server(intercept=faults)
    bucket = f"tahoe-ack-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region": "us-east-1",
             "endpoint_url": endpoint, "allow_http": "true"}
    yield faults, client, bucket, creds
    stop()


def _save(df, uri: str, creds: dict) -> None:
    w = df.write.format("delta").mode("append")
    for k, v in creds.items():
        w = w.option(f"storage.{k}", v)
    w.save(uri)


def _keys(client, bucket: str, prefix: str) -> list[str]:
    got = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents") or []
    return sorted(o["Key"][len(prefix) + 1:] for o in got)


def _data_files(client, bucket: str, prefix: str) -> list[str]:
    return [k for k in _keys(client, bucket, prefix) if k.endswith(".parquet") and not k.startswith("_delta_log/")]


def _delta_rs_rows(uri: str, creds: dict) -> pa.Table:
    from deltalake import DeltaTable

    opts = {"AWS_ACCESS_KEY_ID": creds["aws_access_key_id"], "AWS_SECRET_ACCESS_KEY": creds["aws_secret_access_key"],
            "AWS_REGION": creds["region"], "AWS_ENDPOINT_URL": creds["endpoint_url"], "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    return DeltaTable(uri, storage_options=opts).to_pyarrow_table()


@pytest.mark.parametrize("outage", [False, True], ids=["ack-lost", "ack-lost-then-outage"])
def test_datasource_save_whose_commit_acknowledgement_is_lost_keeps_its_files(spark, faulty_s3, outage):
    """The put of version 1 lands, its answer is lost. Without an outage the writer reads the
    version back, finds its own bytes and the save succeeds. With an outage the outcome cannot be
    found out: the save fails with CommitOutcomeUnknownError — and abort, which can still list and
    delete data files, must keep them: version 1 references them. Once the store answers again,
    the table holds every row of both writes."""
    faults, client, bucket, creds = faulty_s3
    prefix = f"t-{outage}"
    uri = f"s3://{bucket}/{prefix}"
    first = spark.createDataFrame([(1, "a"), (2, "b")], "id long, p string")
    _save(first, uri, creds)
    second = spark.createDataFrame([(10 + i, "c") for i in range(6)], "id long, p string").repartition(3)
    faults.lost = 0
    faults.lose_ack_of, faults.then_outage = f"{prefix}/_delta_log/{1:020d}.json", outage
    try:
        if outage:
            with pytest.raises(Exception, match="CommitOutcomeUnknownError|may or may not exist"):
                _save(second, uri, creds)
        else:
            _save(second, uri, creds)
    finally:
        faults.outage = faults.then_outage = False
        faults.lose_ack_of = None
    assert faults.lost == 1
    keys = _keys(client, bucket, prefix)
    assert f"_delta_log/{1:020d}.json" in keys and f"_delta_log/{2:020d}.json" not in keys
    expected = pa.table({"id": [1, 2] + [10 + i for i in range(6)], "p": ["a", "b"] + ["c"] * 6})
    same_rows(_delta_rs_rows(uri, creds), expected)
    from tahoe import Table

    same_rows(Table(uri, storage_options=creds).to_arrow(), expected)
    # every data file the log references is there, and no marker is left behind
    assert len(_data_files(client, bucket, prefix)) == len(Table(uri, storage_options=creds).files())
    assert not [k for k in keys if k.startswith("_tahoe_commit")]
