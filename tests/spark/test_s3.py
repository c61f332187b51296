"""s3:// tables written and read through the `format("delta")` data source and written by
`write_delta` (executors use pyarrow's S3 filesystem; commits use conditional puts), against moto's
server on 127.0.0.1."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

from tahoe.table import Table
from tests.fixtures.moto import start_moto_server

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture(scope="module")
def s3_bucket():
    import boto3

    endpoint, stop = start_moto_server()
    bucket = f"tahoe-spark-{uuid.uuid4().hex[:12]}"
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region": "us-east-1",
             "endpoint_url": endpoint, "allow_http": "true"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    yield f"s3://{bucket}", creds
    stop()


@pytest.fixture(scope="module")
def s3_table(s3_bucket):
    root, creds = s3_bucket
    return f"{root}/orders", creds


def _options(writer_or_reader, creds):
    for k, v in creds.items():
        writer_or_reader = writer_or_reader.option(f"storage.{k}", v)
    return writer_or_reader


def test_write_and_read_s3_table_through_the_data_source(spark, s3_table):
    uri, creds = s3_table
    df = spark.createDataFrame([(i, f"c{i % 3}", float(i) / 2) for i in range(30)], "id long, cat string, x double")
    _options(df.write.format("delta").mode("append"), creds).save(uri)
    more = spark.createDataFrame([(100 + i, "c9", 1.0) for i in range(5)], "id long, cat string, x double")
    _options(more.write.format("delta").mode("append"), creds).save(uri)

    t = Table(uri, storage_options=creds)
    assert t.version == 1
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(30)) + list(range(100, 105))

    back = _options(spark.read.format("delta"), creds).load(uri)
    rows = sorted((r.id, r.cat, r.x) for r in back.collect())
    assert rows == sorted([(i, f"c{i % 3}", float(i) / 2) for i in range(30)] + [(100 + i, "c9", 1.0) for i in range(5)])
    v0 = _options(spark.read.format("delta").option("versionAsOf", 0), creds).load(uri)
    assert v0.count() == 30
    assert pa.table(back.where("cat = 'c9'").toArrow()).num_rows == 5


def test_write_delta_to_s3(spark, s3_bucket):
    """write_delta on an object store: executors write with pyarrow, one commit per call through
    the S3 log store; partitions, float stats, overwrite and a refused write."""
    from tahoe.errors import ConstraintViolationError
    from tahoe.spark import write_delta

    root, creds = s3_bucket
    uri = f"{root}/events"
    df = spark.sql("select id, cast(id % 3 as string) as cat, case when id = 7 then double('NaN') "
                   "else id / 4 end as x from range(40)").repartition(3)
    assert write_delta(df, uri, partition_by="cat", storage_options=creds) == 0
    assert write_delta(df.limit(5), uri, storage_options=creds) == 1
    t = Table(uri, storage_options=creds)
    assert t.partition_columns == ["cat"]
    rows = t.to_arrow()
    assert rows.num_rows == 45
    assert sorted(rows.column("id").to_pylist()) == sorted(list(range(40)) + [r.id for r in df.limit(5).collect()])
    files = t.files(["path", "partitionValues", "stats"])
    assert all(p.startswith("cat=") for p in files.column("path").to_pylist())
    stats = [json.loads(s) for s in files.column("stats").to_pylist()]
    assert sum(s["numRecords"] for s in stats) == 45
    assert all("x" in s["minValues"] and "x" in s["maxValues"] for s in stats)
    nan_files = [s for s in stats if s["maxValues"]["x"] == "NaN"]
    assert nan_files and all(s["minValues"]["x"] != "NaN" for s in nan_files)
    back = _options(spark.read.format("delta"), creds).load(uri)
    assert back.count() == 45

    # a constraint violation commits nothing
    t.add_constraint("x_small", "x < 100")
    v = Table(uri, storage_options=creds).version
    with pytest.raises(ConstraintViolationError, match="x_small"):
        write_delta(spark.sql("select 1000L as id, '0' as cat, 500.0d as x"), uri, storage_options=creds)
    assert Table(uri, storage_options=creds).version == v

    assert write_delta(df.limit(3), uri, mode="overwrite", storage_options=creds) == v + 1
    assert Table(uri, storage_options=creds).to_arrow().num_rows == 3

