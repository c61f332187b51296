"""Directory-based access (`accessModes: [url, dir]`, Generate Temporary Table Credential) for a
table on S3 — moto's S3 and STS on 127.0.0.1 — served by tahoe's server as a process: the metadata
and listings announce `dir` and the location, the server vends STS credentials (AssumeRole of the
configured role) whose session policy reaches only the table's prefix, and tahoe's client reads
the table directly with them (snapshot, time travel, predicate, change data). Refused: credentials
for a table shared for URL access only (a local table), a location that is not the table's, a
`dir` configuration on a non-S3 table. The official client still reads the table by URL.

Oracles: rows written down by hand; delta-rs reading the local copy; the session policy as moto's
STS recorded it for the access key handed out, evaluated by moto's own IAM policy evaluator."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import boto3
import httpx
import pyarrow as pa
import pytest
import yaml

import tahoe.sharing as tds
from tahoe.sharing.config import ConfigError, parse_config
from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server
from tests.sharing.conftest import free_port, start_server, stop_server
from tests.sharing.helpers import assert_same_rows, delta_rs_rows
from tests.sharing.tablegen import TableBuilder

ROLE = "arn:aws:iam::123456789012:role/tahoe-sharing-reader"
V1 = [(1, "x"), (2, "y"), (3, "x")]
V2 = V1 + [(4, "z")]


def _rows(pairs) -> pa.Table:
    return pa.table({"id": pa.array([i for i, _ in pairs], pa.int64()), "p": [p for _, p in pairs]})


def _upload(client, bucket: str, local: Path, prefix: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            client.upload_file(str(p), bucket, f"{prefix}/{p.relative_to(local).as_posix()}")


@pytest.fixture(scope="module")
def dir_server(tmp_path_factory):
    url, stop_moto = start_moto_server()
    env = {"AWS_ACCESS_KEY_ID": TEST_CREDENTIALS["aws_access_key_id"],
           "AWS_SECRET_ACCESS_KEY": TEST_CREDENTIALS["aws_secret_access_key"],
           "AWS_DEFAULT_REGION": TEST_CREDENTIALS["region"], "AWS_ENDPOINT_URL": url,
           "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
           "AWS_EC2_METADATA_DISABLED": "true"}
    d = tmp_path_factory.mktemp("dirsharing")
    bucket = f"tahoe-dir-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    tb = TableBuilder(d / "plain", pa.schema([("id", pa.int64()), ("p", pa.string())]), ["p"],
                      {"delta.enableChangeDataFeed": "true"})
    tb.append(_rows(V1))
    tb.append(_rows(V2[3:]))
    _upload(s3, bucket, d / "plain", "tables/plain")
    # a sibling prefix the credentials must not reach
    s3.put_object(Bucket=bucket, Key="tables/plainly-private/secret.txt", Body=b"no")
    local = TableBuilder(d / "local", pa.schema([("id", pa.int64())]))
    local.append(pa.table({"id": [7]}))
    cfg = {"shares": [{"name": "s3share", "schemas": [{"name": "sc", "tables": [
        {"name": "plain", "location": f"s3://{bucket}/tables/plain/", "historyShared": True,
         "accessModes": ["url", "dir"]},
        {"name": "local", "location": str(d / "local"), "historyShared": True}]}]}],
        "authorization": {"bearerToken": "dir-test-token"}, "preSignedUrlTimeoutSeconds": 600,
        "temporaryCredentials": {"roleArn": ROLE, "durationSeconds": 900}}
    port = free_port()
    (d / "server.yaml").write_text(yaml.safe_dump(cfg))
    proc = start_server(str(d / "server.yaml"), port, env)
    prof = d / "p.share"
    endpoint = f"http://127.0.0.1:{port}/delta-sharing"
    prof.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": "dir-test-token"}))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield {"profile": str(prof), "dir": d, "moto": url, "bucket": bucket, "endpoint": endpoint}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        stop_server(proc)
        stop_moto()


def _post(srv, table: str, path: str, body=None) -> httpx.Response:
    return httpx.post(f"{srv['endpoint']}/shares/s3share/schemas/sc/tables/{table}{path}", json=body or {},
                      headers={"Authorization": "Bearer dir-test-token"}, timeout=60)


def test_temporary_credentials_are_scoped_to_the_table(dir_server):
    from moto.iam.access_control import IAMPolicy, PermissionResult
    from moto.sts.models import sts_backends

    srv, bucket = dir_server, dir_server["bucket"]
    location = f"s3://{bucket}/tables/plain"
    before = int(time.time() * 1000)
    r = _post(srv, "plain", "/temporary-table-credentials")
    assert r.status_code == 200, r.text
    c = r.json()["credentials"]
    assert c["location"] == location and c["expirationTime"] > before
    aws = c["awsTempCredentials"]
    assert set(aws) == {"accessKeyId", "secretAccessKey", "sessionToken"} and all(aws.values())
    # what STS was asked, as moto's STS recorded it for this access key
    role = sts_backends["123456789012"]["aws"].get_assumed_role_from_access_key(aws["accessKeyId"])
    assert role is not None and role.role_arn == ROLE
    policy = IAMPolicy(role.policy)
    allowed = lambda action, res, cond=None: policy.is_action_permitted(action, res, None, cond) \
        == PermissionResult.PERMITTED
    assert allowed("s3:GetObject", f"arn:aws:s3:::{bucket}/tables/plain/_delta_log/00000000000000000000.json")
    assert allowed("s3:GetObject", f"arn:aws:s3:::{bucket}/tables/plain/p=x/part-0.parquet")
    assert not allowed("s3:GetObject", f"arn:aws:s3:::{bucket}/tables/plainly-private/secret.txt")
    assert not allowed("s3:GetObject", f"arn:aws:s3:::{bucket}/tables/other/x.parquet")
    assert not allowed("s3:PutObject", f"arn:aws:s3:::{bucket}/tables/plain/x.parquet")
    assert not allowed("s3:DeleteObject", f"arn:aws:s3:::{bucket}/tables/plain/x.parquet")
    assert allowed("s3:ListBucket", f"arn:aws:s3:::{bucket}")
    # listing is conditioned on the table's prefix (moto's evaluator skips StringLike: checked as written)
    listing = [st for st in json.loads(role.policy)["Statement"] if "s3:ListBucket" in st["Action"]]
    assert [st["Condition"] for st in listing] == [{"StringLike": {"s3:prefix": ["tables/plain/*"]}}]
    # the table's own location may be named (any s3 spelling); another one may not
    r = _post(srv, "plain", "/temporary-table-credentials", {"location": f"s3a://{bucket}/tables/plain/"})
    assert r.status_code == 200 and r.json()["credentials"]["location"] == location
    r = _post(srv, "plain", "/temporary-table-credentials", {"location": f"s3://{bucket}/tables/plainly-private"})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    # a table shared for URL access only (not on S3): no credentials
    r = _post(srv, "local", "/temporary-table-credentials")
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"
    assert str(srv["dir"]) not in r.text


def test_access_modes_announced(dir_server):
    srv, bucket = dir_server, dir_server["bucket"]
    h = {"Authorization": "Bearer dir-test-token"}
    base = f"{srv['endpoint']}/shares/s3share/schemas/sc/tables"
    md = json.loads(httpx.get(f"{base}/plain/metadata", headers=h).text.splitlines()[1])["metaData"]
    assert md["accessModes"] == ["url", "dir"] and md["location"] == f"s3://{bucket}/tables/plain"
    md = json.loads(httpx.get(f"{base}/local/metadata", headers=h).text.splitlines()[1])["metaData"]
    assert md["accessModes"] == ["url"] and "location" not in md
    items = {i["name"]: i for i in httpx.get(f"{base}", headers=h).json()["items"]}
    assert items["plain"]["accessModes"] == ["url", "dir"] and items["plain"]["location"].endswith("/tables/plain")
    assert "location" not in items["local"]


def test_tahoe_client_reads_directly(dir_server):
    srv = dir_server
    url = srv["profile"] + "#s3share.sc.plain"
    opts = {"endpoint_url": srv["moto"], "region": "us-east-1"}
    t = tds.load_as_arrow(url, access_mode="dir", storage_options=opts)
    assert_same_rows(t, _rows(V2), "dir, latest")
    assert_same_rows(t, delta_rs_rows(srv["dir"] / "plain"), "dir vs delta-rs")
    assert_same_rows(tds.load_as_arrow(url, version=1, access_mode="dir", storage_options=opts), _rows(V1), "dir, v1")
    hint = {"op": "equal", "children": [{"op": "column", "name": "p", "valueType": "string"},
                                        {"op": "literal", "value": "x", "valueType": "string"}]}
    t = tds.load_as_pandas(url, jsonPredicateHints=hint, access_mode="dir", storage_options=opts)
    assert sorted(zip(t["id"], t["p"])) == [(1, "x"), (3, "x")]
    ch = tds.load_table_changes_as_arrow(url, starting_version=1, access_mode="dir", storage_options=opts)
    assert sorted((r["id"], r["p"], r["_change_type"], r["_commit_version"]) for r in ch.to_pylist()) == \
        [(1, "x", "insert", 1), (2, "y", "insert", 1), (3, "x", "insert", 1), (4, "z", "insert", 2)]
    # the same rows by URL
    assert_same_rows(tds.load_as_arrow(url), _rows(V2), "url, latest")


def test_official_client_still_reads_by_url(dir_server, official):
    t = official.load_as_pandas(dir_server["profile"] + "#s3share.sc.plain")
    assert_same_rows(t, _rows(V2), "official, parquet")


def test_dir_configuration_is_checked():
    base = {"name": "t", "historyShared": True, "accessModes": ["url", "dir"]}
    for table, words in (({**base, "location": "/data/t"}, "needs a table on S3"),
                         ({**base, "location": "s3://b/t", "historyShared": False}, "historyShared"),
                         ({**base, "location": "s3://b/t", "accessModes": ["dir"]}, "must include url"),
                         ({**base, "location": "s3://b/t", "accessModes": ["url", "ftp"]}, "unknown access mode")):
        with pytest.raises(ConfigError, match=words):
            parse_config({"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [table]}]}]})
    with pytest.raises(ConfigError, match="durationSeconds"):
        parse_config({"shares": [], "temporaryCredentials": {"durationSeconds": 60}})
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config({"shares": [], "temporaryCredentials": {"roleARN": ROLE}})
