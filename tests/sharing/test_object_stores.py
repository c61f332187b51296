"""Delta Sharing of tables on every object store: S3 (moto, custom endpoint), Azure Blob (Azurite)
and GCS (fake-gcs-server), started once per module; the sharing server is a real process; the
recipient is the official `delta-sharing` client in its own environment.

- the official client reads a table of each store in both response formats (parquet, and delta
  with a deletion vector), partition values holding a space, `%` and non-ASCII characters — in the
  default mode (the server's own URLs, redirected to a short-lived URL the store signed) and with
  `fileUrls: store` (the store's signed URLs in the response, as the reference server);
- a revoked recipient's URLs answer 403 on every store; redirects count against byte quotas;
- directory access on Azure: the vended SAS (`azureUserDelegationSas`) reads the table with tahoe's
  log core; a directory SAS of a prefix is what Azure honours on ADLS Gen2 accounts only, which
  Azurite refuses — shown;
- a config naming a location tahoe cannot serve stops the server at start, naming the table.

Oracles: rows written by hand, and delta-rs reading the same tables with the same options."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pytest
import yaml

import tahoe
from tests.sharing.conftest import REPO, free_port, start_server, stop_server
from tests.sharing.helpers import assert_same_rows
from tests.sharing.test_fail_closed import DELTA_CAPS, cli
from tests.storage.conftest import Emulators, new_bucket

pytestmark = pytest.mark.xdist_group("object-stores")

KINDS = ["s3", "azure", "gcs"]
# partition values as tables hold them: a space, '%', non-ASCII — names that need escaping in URLs
DAYS = ["mon day", "50% off", "été"]
ROWS = pa.table({"id": pa.array(range(9), pa.int64()), "day": [DAYS[i % 3] for i in range(9)]})
AFTER_DELETE = ROWS.filter(pa.array([i not in (1, 4) for i in range(9)]))


def _write_tables(em, bucket: str) -> dict[str, str]:
    """A plain partitioned table and one with deletion vectors, on the store."""
    plain, dv = em.uri(bucket, "plain"), em.uri(bucket, "dv")
    tahoe.write_table(plain, ROWS, partition_by=["day"], storage_options=em.options)
    tahoe.write_table(dv, ROWS, partition_by=["day"], storage_options=em.options,
                      properties={"delta.enableDeletionVectors": "true"})
    tahoe.delete(dv, "id = 1 OR id = 4", storage_options=em.options)
    assert any(tahoe.Table(dv, storage_options=em.options).files(["deletionVector"]).column(0).is_valid())
    return {"plain": plain, "dv": dv}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    ems = Emulators()
    d = tmp_path_factory.mktemp("store-sharing")
    tables, locations = [], {}
    for kind in KINDS:
        em = ems.get(kind)
        bucket = new_bucket(em)
        for name, uri in _write_tables(em, bucket).items():
            tables.append({"name": f"{kind}_{name}", "location": uri, "storageOptions": em.options,
                           "historyShared": True})
            locations[f"{kind}_{name}"] = uri
    # an Azure table at a container's root, shared for directory access (a container SAS)
    az = ems.get("azure")
    root_container = new_bucket(az)
    tahoe.write_table(az.uri(root_container, ""), ROWS, storage_options=az.options)
    tables.append({"name": "azure_root", "location": az.uri(root_container, ""), "storageOptions": az.options,
                   "historyShared": True, "accessModes": ["url", "dir"]})
    # an Azure table under a prefix, shared for directory access (a directory SAS)
    tables.append({"name": "azure_prefix", "location": locations["azure_plain"], "storageOptions": az.options,
                   "historyShared": True, "accessModes": ["url", "dir"]})
    servers = {}
    try:
        for mode in ("server", "store"):
            cfg = {"shares": [{"name": "lake", "schemas": [{"name": "sc", "tables": tables}]}],
                   "fileUrls": mode, "preSignedUrlTimeoutSeconds": 900}
            (d / mode).mkdir()
            config = str(d / mode / "sharing.yaml")   # a state store of its own beside it
            Path(config).write_text(yaml.safe_dump(cfg))
            token = json.loads(cli(config, "recipient", "add", "reader", "--share", "lake").stdout)["bearerToken"]
            port = free_port()
            proc = start_server(config, port)
            endpoint = f"http://127.0.0.1:{port}/delta-sharing"
            prof = d / f"{mode}.share"
            prof.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": token}))
            servers[mode] = {"proc": proc, "config": config, "endpoint": endpoint, "token": token,
                             "profile": str(prof)}
        yield {"ems": ems, "servers": servers, "locations": locations, "dir": d, "root_container": root_container}
    finally:
        for s in servers.values():
            stop_server(s["proc"])
        ems.stop()


def _query(srv: dict, table: str, caps: str | None = None) -> list[dict]:
    headers = {"Authorization": f"Bearer {srv['token']}"}
    if caps:
        headers["delta-sharing-capabilities"] = caps
    r = httpx.post(f"{srv['endpoint']}/shares/lake/schemas/sc/tables/{table}/query", json={}, headers=headers,
                   timeout=60)
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines()]


@pytest.mark.parametrize("mode", ["server", "store"])
@pytest.mark.parametrize("kind", KINDS)
def test_official_client_reads_every_store(stores, official, kind, mode):
    """Both response formats, the official client: the plain table as parquet, the DV table as
    delta (its Delta kernel downloads data files and the deletion vector through the URLs)."""
    srv = stores["servers"][mode]
    got = official.load_as_pandas(f"{srv['profile']}#lake.sc.{kind}_plain", use_delta_format=False)
    assert_same_rows(got, ROWS, f"{kind} parquet ({mode} URLs)")
    got = official.load_as_pandas(f"{srv['profile']}#lake.sc.{kind}_dv", use_delta_format=True)
    assert_same_rows(got, AFTER_DELETE, f"{kind} delta with a DV ({mode} URLs)")

    em = stores["ems"].get(kind)
    lines = _query(srv, f"{kind}_plain")
    urls = [ln["file"]["url"] for ln in lines if "file" in ln]
    assert len(urls) == 3
    store_host = urlsplit(em.endpoint).netloc
    if mode == "server":
        # the server's own URLs, never the store's; each redirects to a URL the store signed
        assert all(u.startswith(srv["endpoint"] + "/files/") for u in urls)
        for u in urls:
            r = httpx.get(u, follow_redirects=False)
            assert r.status_code == 302 and urlsplit(r.headers["location"]).netloc == store_host
            assert httpx.get(u, follow_redirects=True).content[:4] == b"PAR1"
    else:
        # the store's signed URLs, fetched from the store itself
        assert all(urlsplit(u).netloc == store_host for u in urls)
        assert all(httpx.get(u).content[:4] == b"PAR1" for u in urls)


def test_revoked_recipient_gets_no_bytes_from_any_store(stores):
    srv = stores["servers"]["server"]
    token = json.loads(cli(srv["config"], "recipient", "add", "leaver", "--share", "lake").stdout)["bearerToken"]
    urls = []
    for kind in KINDS:
        for ln in _query({**srv, "token": token}, f"{kind}_dv", DELTA_CAPS):
            add = ln.get("file", {}).get("deltaSingleAction", {}).get("add")
            if add:
                urls.append(add["path"])
                if add.get("deletionVector"):
                    urls.append(add["deletionVector"]["pathOrInlineDv"])
    assert len(urls) >= 9
    assert all(httpx.get(u, follow_redirects=True).status_code == 200 for u in urls)
    cli(srv["config"], "recipient", "revoke", "leaver")
    for u in urls:
        r = httpx.get(u)
        assert r.status_code == 403 and "location" not in r.headers


@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_redirects_count_against_the_byte_quota(stores, kind):
    """The store serves a redirected file's bytes, so the redirect counts what it grants: a
    range naming both ends by its length, an open range or a whole file by the object's size.
    Oracle: the sizes the store itself reports for the objects."""
    srv = stores["servers"]["server"]
    name = f"quota_{kind}"
    token = json.loads(cli(srv["config"], "recipient", "add", name, "--share", "lake").stdout)["bearerToken"]
    cli(srv["config"], "recipient", "set", name, "--bytes-per-day", "250")
    lines = _query({**srv, "token": token}, f"{kind}_plain")
    files = [ln["file"] for ln in lines if "file" in ln]
    size = files[0]["size"]
    assert size > 250   # a parquet file: one whole file uses the quota up
    for _ in range(2):    # 2 × 100 bytes: 200 < 250, still allowed
        r = httpx.get(files[0]["url"], headers={"Range": "bytes=0-99"}, follow_redirects=True)
        assert r.status_code == 206 and len(r.content) == 100
    time.sleep(0.3)       # the count is taken when the response ends
    r = httpx.get(files[1]["url"], follow_redirects=False)
    assert r.status_code == 302                         # 200 used of 250: the whole file granted
    time.sleep(0.3)
    r = httpx.get(files[2]["url"], headers={"Range": "bytes=0-9"}, follow_redirects=False)
    assert r.status_code == 429 and r.json()["errorCode"] == "RESOURCE_EXHAUSTED", r.text


def test_azure_directory_access(stores):
    """The vended SAS has the protocol's shape; a container-root table's container SAS reads the
    table (tahoe's log core on the SAS alone, delta-rs-free: rows by hand) and lists nothing of
    other containers; a prefix's directory SAS (sr=d) is signed for the prefix, read + list only —
    Azurite has no hierarchical namespace and refuses it, as Azure Blob accounts without one do."""
    from tahoe.sharing.client import load_as_arrow

    srv = stores["servers"]["server"]
    az = stores["ems"].get("azure")
    headers = {"Authorization": f"Bearer {srv['token']}"}
    base = f"{srv['endpoint']}/shares/lake/schemas/sc/tables"
    r = httpx.post(f"{base}/azure_root/temporary-table-credentials", json={}, headers=headers)
    assert r.status_code == 200, r.text
    creds = r.json()["credentials"]
    assert set(creds) == {"location", "azureUserDelegationSas", "expirationTime"}
    assert creds["location"] == f"abfss://{stores['root_container']}@devstoreaccount1.dfs.core.windows.net"
    sas = creds["azureUserDelegationSas"]["sasToken"]
    assert "sr=c" in sas and "sp=rl" in sas and az.options["AZURE_STORAGE_ACCOUNT_KEY"] not in sas

    # the recipient's side: tahoe's client reads the table directly with the SAS (the emulator's
    # endpoint is the recipient's own storage option; no account key given)
    got = load_as_arrow(f"{srv['profile']}#lake.sc.azure_root", access_mode="dir",
                        storage_options={"azure_storage_endpoint": az.options["AZURE_STORAGE_ENDPOINT"],
                                         "allow_http": "true"})
    assert_same_rows(got, ROWS, "azure, directory access with the vended SAS")

    r = httpx.post(f"{base}/azure_prefix/temporary-table-credentials", json={}, headers=headers)
    assert r.status_code == 200, r.text
    sas = r.json()["credentials"]["azureUserDelegationSas"]["sasToken"]
    assert "sr=d" in sas and "sdd=1" in sas and "sp=rl" in sas
    blob = az.endpoint + "/" + urlsplit(stores["locations"]["azure_plain"]).netloc + \
        "/plain/_delta_log/00000000000000000000.json"
    assert httpx.get(f"{blob}?{sas}").status_code == 403     # Azurite: no hierarchical namespace
    # a url-only table offers no credentials
    r = httpx.post(f"{base}/azure_plain/temporary-table-credentials", json={}, headers=headers)
    assert r.status_code == 400 and r.json()["errorCode"] == "UNSUPPORTED_OPERATION"


def test_config_naming_an_unservable_location_stops_the_server(tmp_path):
    """Refused when the server starts (not at query time), naming the table and the cause."""
    cfg = {"shares": [{"name": "s", "schemas": [{"name": "sc", "tables": [
        {"name": "ok", "location": str(tmp_path / "t")},
        {"name": "on_hdfs", "location": "hdfs://namenode/t"},
        {"name": "typo", "location": "s3://b/t", "storageOptions": {"AWS_SECRET_ACESS_KEY": "x"}},
        {"name": "gcs_dir", "location": "gs://b/t", "historyShared": True, "accessModes": ["url", "dir"]}]}]}],
        "allowAnonymous": True}
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(cfg))
    r = subprocess.run([sys.executable, "-m", "tahoe", "sharing", "serve", "--config", str(config), "--port",
                        str(free_port())], cwd=str(REPO), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "s.sc.on_hdfs" in r.stderr and "'hdfs'" in r.stderr
    assert "s.sc.typo" in r.stderr and "AWS_SECRET_ACESS_KEY" in r.stderr
    assert "s.sc.gcs_dir" in r.stderr and "accessModes dir on gs://" in r.stderr
    assert "s.sc.ok" not in r.stderr
