"""Tables on S3 (moto's server on 127.0.0.1) shared by the server (a real process) and read by the
official client (in its own environment), in parquet and delta format.

File URLs of S3 tables are the server's own, bound to the recipient they were issued to, like
those of local tables; the server answers a valid one with a redirect to a 60-second S3
pre-signed URL, so revoking a recipient stops its downloads at once. Oracles: delta-rs reading
the local copy of the hand-built tables; rows written by hand; the objects' bytes as boto3 reads
them; the conformance table's expected rows."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pyarrow as pa
import pytest
import yaml

from tests.conftest import GOLDEN, HAVE_GOLDEN, conformance, manifest_entry
from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server
from tests.sharing.conftest import free_port, start_server, stop_server
from tests.sharing.helpers import assert_same_rows, delta_rs_rows, expected_rows
from tests.sharing.tablegen import TableBuilder
from tests.sharing.test_fail_closed import DELTA_CAPS, cli


def _upload(client, bucket: str, local: Path, prefix: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            client.upload_file(str(p), bucket, f"{prefix}/{p.relative_to(local).as_posix()}")


def _dv_table(path: Path) -> pa.Table:
    """A table with a deletion vector, written by tahoe: rows 0..9 with 2 and 5 deleted."""
    from tahoe import Table
    from tahoe.write.writer import write_table
    from tahoe.write.deletion_vectors import delete_rows

    write_table(str(path), pa.table({"id": list(range(10))}), properties={"delta.enableDeletionVectors": "true"})
    delete_rows(str(path), {Table(str(path)).files().column("path")[0].as_py(): [2, 5]})
    return pa.table({"id": [0, 1, 3, 4, 6, 7, 8, 9]})


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
    dv_rows = _dv_table(d / "dvt")
    _upload(s3, bucket, d / "dvt", "dvt")
    tables = [{"name": "plain", "location": f"s3://{bucket}/plain", "historyShared": True},
              {"name": "dvt", "location": f"s3://{bucket}/dvt"}]
    if HAVE_GOLDEN:
        shutil.copytree(GOLDEN / manifest_entry("dv-partitioned-with-checkpoint")["table"], d / "dv")
        _upload(s3, bucket, d / "dv", "dv")
        tables.append({"name": "dv", "location": f"s3://{bucket}/dv"})
    cfg = {"shares": [{"name": "s3share", "schemas": [{"name": "sc", "tables": tables}]}],
           "preSignedUrlTimeoutSeconds": 600}
    port = free_port()
    config = str(d / "server.yaml")
    Path(config).write_text(yaml.safe_dump(cfg))
    token = json.loads(cli(config, "recipient", "add", "reader", "--share", "s3share").stdout)["bearerToken"]
    proc = start_server(config, port, env)
    endpoint = f"http://127.0.0.1:{port}/delta-sharing"
    prof = d / "p.share"
    prof.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": token}))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield {"profile": str(prof), "dir": d, "moto": url, "bucket": bucket, "s3": s3, "config": config,
               "endpoint": endpoint, "token": token, "dv_rows": dv_rows}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        stop_server(proc)
        stop_moto()


def _object_bytes(srv: dict, url: str) -> bytes:
    """The bytes of the S3 object a file URL names, read with boto3."""
    return srv["s3"].get_object(Bucket=srv["bucket"], Key=_redirect_key(srv, url))["Body"].read()


def _redirect_key(srv: dict, url: str) -> str:
    r = httpx.get(url, follow_redirects=False)
    assert r.status_code == 302, r.text
    loc = urlsplit(r.headers["location"])
    assert loc.path.startswith(f"/{srv['bucket']}/")
    return loc.path[len(srv["bucket"]) + 2:]


def test_s3_parquet_format(s3_server, official):
    srv = s3_server
    r = httpx.post(f"{srv['endpoint']}/shares/s3share/schemas/sc/tables/plain/query", json={},
                   headers={"Authorization": f"Bearer {srv['token']}"})
    f = json.loads(r.text.splitlines()[2])["file"]
    # the server's own URL (the recipient never sees the bucket), shaped as a pre-signed URL
    assert f["url"].startswith(srv["endpoint"] + "/files/") and "X-Amz-Signature=" in f["url"]
    assert srv["bucket"] not in f["url"]
    t = official.load_as_pandas(srv["profile"] + "#s3share.sc.plain", use_delta_format=False)
    assert_same_rows(t, delta_rs_rows(srv["dir"] / "plain"), "s3 plain")
    assert_same_rows(t, pa.table({"id": [1, 2, 3, 4], "p": ["x", "y", "x", "z"]}), "s3 plain, by hand")
    t = official.load_as_pandas(srv["profile"] + "#s3share.sc.plain", version=1)
    assert_same_rows(t, pa.table({"id": [1, 2, 3], "p": ["x", "y", "x"]}), "s3 plain v1, by hand")


def test_s3_delta_format_with_a_deletion_vector(s3_server, official):
    """Delta format: the client's Delta kernel downloads the data file and the deletion vector
    through the server's URLs (following the redirects to S3)."""
    srv = s3_server
    t = official.load_as_pandas(srv["profile"] + "#s3share.sc.dvt", use_delta_format=True)
    assert_same_rows(t, srv["dv_rows"], "s3 dv table, by hand")
    assert_same_rows(t, delta_rs_rows(srv["dir"] / "dvt", sql=True), "s3 dv table, delta-rs")


def test_s3_file_urls_redirect_to_short_lived_presigned_urls(s3_server):
    """A verified URL answers 302 to a pre-signed S3 URL of that object, valid 60 s (GET, and a
    HEAD-signed one for HEAD); Range requests get the range of the object's bytes."""
    srv = s3_server
    r = httpx.post(f"{srv['endpoint']}/shares/s3share/schemas/sc/tables/dvt/query", json={},
                   headers={"Authorization": f"Bearer {srv['token']}", "delta-sharing-capabilities": DELTA_CAPS})
    add = json.loads(r.text.splitlines()[2])["file"]["deltaSingleAction"]["add"]
    urls = [add["path"], add["deletionVector"]["pathOrInlineDv"]]
    for url in urls:
        r = httpx.get(url)
        assert r.status_code == 302 and r.headers["cache-control"] == "no-store"
        q = parse_qs(urlsplit(r.headers["location"]).query)
        assert q["X-Amz-Expires"] == ["60"]
        data = _object_bytes(srv, url)
        assert httpx.get(url, follow_redirects=True).content == data
        part = httpx.get(url, follow_redirects=True, headers={"Range": "bytes=4-11"})
        assert part.status_code == 206 and part.content == data[4:12]
        head = httpx.head(url, follow_redirects=True)
        assert head.status_code == 200 and int(head.headers["content-length"]) == len(data)


def test_revoking_a_recipient_stops_its_s3_downloads(s3_server):
    """URLs issued to a recipient of an S3 table answer 403 once it is revoked (no redirect, no
    bytes), data files and deletion vectors alike; another recipient's URLs keep working."""
    srv = s3_server
    config = srv["config"]

    def token_of(name: str) -> str:
        return json.loads(cli(config, "recipient", "add", name, "--share", "s3share").stdout)["bearerToken"]

    def urls_of(token: str) -> list[str]:
        r = httpx.post(f"{srv['endpoint']}/shares/s3share/schemas/sc/tables/dvt/query", json={},
                       headers={"Authorization": f"Bearer {token}", "delta-sharing-capabilities": DELTA_CAPS})
        assert r.status_code == 200, r.text
        add = json.loads(r.text.splitlines()[2])["file"]["deltaSingleAction"]["add"]
        return [add["path"], add["deletionVector"]["pathOrInlineDv"]]

    gone, stays = token_of("to-revoke"), token_of("stays")
    revoked_urls, kept_urls = urls_of(gone), urls_of(stays)
    for u in revoked_urls + kept_urls:
        assert httpx.get(u, follow_redirects=True).status_code == 200
    cli(config, "recipient", "revoke", "to-revoke")
    for u in revoked_urls:
        for method in ("GET", "HEAD"):
            r = httpx.request(method, u)
            assert r.status_code == 403 and "location" not in r.headers, (method, u)
        assert httpx.get(u).json()["errorCode"] == "PERMISSION_DENIED"
    for u in kept_urls:
        assert httpx.get(u, follow_redirects=True).content == _object_bytes(srv, u)


@conformance
def test_s3_delta_format_with_dv(s3_server, official):
    srv = s3_server
    t = official.load_as_pandas(srv["profile"] + "#s3share.sc.dv", use_delta_format=True)
    assert_same_rows(t, expected_rows("dv-partitioned-with-checkpoint"), "s3 dv")
