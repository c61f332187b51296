"""A table on S3 (moto's server on 127.0.0.1) served with S3 pre-signed URLs and read by the
official client (in its own environment), in parquet and delta format. Oracles: delta-rs reading
the local copy of the hand-built table; the conformance table's expected rows."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
import yaml

from tests.conftest import GOLDEN, HAVE_GOLDEN, conformance, manifest_entry
from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server
from tests.sharing.conftest import free_port, start_server, stop_server
from tests.sharing.helpers import assert_same_rows, delta_rs_rows, expected_rows
from tests.sharing.tablegen import TableBuilder


def _upload(client, bucket: str, local: Path, prefix: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            client.upload_file(str(p), bucket, f"{prefix}/{p.relative_to(local).as_posix()}")


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    url, stop_moto = start_moto_server()
    env = {"AWS_ACCESS_KEY_ID": TEST_CREDENTIALS["aws_access_key_id"],
           "AWS_SECRET_ACCESS_KEY": TEST_CREDENTIALS["aws_secret_access_key"],
           "AWS_DEFAULT_REGION": TEST_CREDENTIALS["region"], "AWS_ENDPOINT_URL": url,
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
           "AWS_EC2_METADATA_DISABLED": "true"}
    d = tmp_path_factory.mktemp("s3sharing")
    bucket = f"tahoe-share-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    tb = TableBuilder(d / "plain", pa.schema([("id", pa.int64()), ("p", pa.string())]), ["p"])
    tb.append(pa.table({"id": [1, 2, 3], "p": ["x", "y", "x"]}))
    tb.append(pa.table({"id": [4], "p": ["z"]}))
    _upload(s3, bucket, d / "plain", "plain")
    tables = [{"name": "plain", "location": f"s3://{bucket}/plain", "historyShared": True}]
    if HAVE_GOLDEN:
        shutil.copytree(GOLDEN / manifest_entry("dv-partitioned-with-checkpoint")["table"], d / "dv")
        _upload(s3, bucket, d / "dv", "dv")
        tables.append({"name": "dv", "location": f"s3://{bucket}/dv"})
    cfg = {"shares": [{"name": "s3share", "schemas": [{"name": "sc", "tables": tables}]}],
        "authorization": {"bearerToken": "s3-test-token"}, "preSignedUrlTimeoutSeconds": 600}
    port = free_port()
    (d / "server.yaml").write_text(yaml.safe_dump(cfg))
    proc = start_server(str(d / "server.yaml"), port, env)
    prof = d / "p.share"
    prof.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": f"http://127.0.0.1:{port}/delta-sharing",
                                "bearerToken": "s3-test-token"}))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield str(prof), d, url, bucket
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        stop_server(proc)
        stop_moto()


def test_s3_parquet_format(s3_server, official):
    prof, d, url, bucket = s3_server
    import httpx

    r = httpx.post(f"{json.load(open(prof))['endpoint']}/shares/s3share/schemas/sc/tables/plain/query", json={},
                   headers={"Authorization": "Bearer s3-test-token"})
    f = json.loads(r.text.splitlines()[2])["file"]
    assert f["url"].startswith(url) and "X-Amz-Signature=" in f["url"]
    t = official.load_as_pandas(prof + "#s3share.sc.plain", use_delta_format=False)
    assert_same_rows(t, delta_rs_rows(d / "plain"), "s3 plain")
    assert_same_rows(t, pa.table({"id": [1, 2, 3, 4], "p": ["x", "y", "x", "z"]}), "s3 plain, by hand")
    t = official.load_as_pandas(prof + "#s3share.sc.plain", version=1)
    assert_same_rows(t, pa.table({"id": [1, 2, 3], "p": ["x", "y", "x"]}), "s3 plain v1, by hand")


@conformance
def test_s3_delta_format_with_dv(s3_server, official):
    prof, d, url, bucket = s3_server
    t = official.load_as_pandas(prof + "#s3share.sc.dv", use_delta_format=True)
    assert_same_rows(t, expected_rows("dv-partitioned-with-checkpoint"), "s3 dv")
