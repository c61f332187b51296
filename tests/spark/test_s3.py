"""An s3:// table written and read through the `format("delta")` data source (executors use
pyarrow's S3 filesystem; commits use conditional puts), against moto's server on 127.0.0.1."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tahoe.table import Table
from tests.fixtures.moto import start_moto_server

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


@pytest.fixture(scope="module")
def s3_table():
    import boto3

    endpoint, stop = start_moto_server()
    bucket = f"tahoe-spark-{uuid.uuid4().hex[:12]}"
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region": "us-east-1",
             "endpoint_url": endpoint, "allow_http": "true"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    yield f"s3://{bucket}/orders", creds
    stop()


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
