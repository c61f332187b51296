"""Bad input and faults on object stores, for real: a missing bucket / container, missing and
wrong credentials, a 403, a stopped emulator (network failure), a dropped connection, a store
that throttles (503 SlowDown for the first requests: retried with backoff; for every request:
a clear error). Each is a `StorageError` naming the store and the cause — never CorruptLogError
— with nothing committed and no secret in the message. Faults are answered by a real HTTP proxy
in front of the emulator (tests/fixtures/store_proxy.py)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

import tahoe
from tahoe.errors import (BucketNotFoundError, CommitOutcomeUnknownError, CorruptLogError, StorageAccessDeniedError, StorageConfigError,
                          StorageCredentialsError, StorageError, StorageThrottledError, StorageUnreachableError,
                          TableNotFoundError, UnsupportedStorageError)
from tahoe.storage import store_for
from tests.fixtures.emulators import AZURITE_KEY
from tests.fixtures.store_proxy import StoreProxy
from tests.storage.conftest import new_bucket

pytestmark = pytest.mark.xdist_group("object-stores")

FAST = {"max_retries": "2", "retry_timeout": "5s", "backoff_config.init_backoff": "20ms"}


def _through(em, proxy: StoreProxy) -> dict:
    """The emulator's options, pointed at `proxy` instead."""
    o = dict(em.options)
    if em.kind == "s3":
        o["AWS_ENDPOINT_URL"] = proxy.url
    elif em.kind == "azure":
        o["AZURE_STORAGE_ENDPOINT"] = proxy.url + "/devstoreaccount1"
    return o


def test_unknown_scheme_and_option():
    with pytest.raises(UnsupportedStorageError, match="'hdfs'"):
        tahoe.Table("hdfs://nn/t")
    with pytest.raises(StorageConfigError, match="aws_acess_key_id"):
        tahoe.Table("s3://b/t", storage_options={"aws_acess_key_id": "x"})
    with pytest.raises(StorageConfigError, match="allow_http is false"):
        tahoe.Table("s3://b/t", storage_options={"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ALLOW_HTTP": "false"})


@pytest.mark.parametrize("kind", ["s3", "azure", "gcs"])
def test_missing_bucket(emulators, kind):
    """Opening, and writing into, a bucket / container that does not exist: BucketNotFoundError
    (also a TableNotFoundError) naming it; nothing is created."""
    em = emulators.get(kind)
    missing = f"tahoe-missing-{uuid.uuid4().hex[:8]}"
    uri = em.uri(missing, "t")
    # fake-gcs-server answers a listing of a missing bucket with 500 (GCS: 404), which the client
    # retries: fewer retries here
    o = {**em.options, **FAST} if kind == "gcs" else em.options
    with pytest.raises(BucketNotFoundError, match=missing) as ei:
        tahoe.Table(uri, storage_options=o)
    assert isinstance(ei.value, TableNotFoundError)
    with pytest.raises(BucketNotFoundError, match=missing):
        tahoe.write_table(uri, pa.table({"id": [1]}), storage_options=o)


def test_missing_credentials(monkeypatch):
    """No credentials anywhere (options, environment; instance metadata unreachable here):
    StorageCredentialsError naming the store — for S3, Azure (no account) and GCS."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL",
                "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "GOOGLE_SERVICE_ACCOUNT",
                "GOOGLE_APPLICATION_CREDENTIALS", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(StorageCredentialsError, match="S3"):
        tahoe.Table("s3://b/t", storage_options={"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1",
                                                  "AWS_ACCESS_KEY_ID": "only-the-id", **FAST})
    with pytest.raises(StorageCredentialsError, match="Azure"):
        tahoe.Table("az://c/t", storage_options=FAST)


def test_wrong_credentials_azure(emulators):
    """Azurite checks the shared-key signature: a wrong key is refused (403) —
    StorageCredentialsError naming the container, the key nowhere in the message."""
    em = emulators.get("azure")
    b = new_bucket(em)
    tahoe.write_table(em.uri(b, "t"), pa.table({"id": [1]}), storage_options=em.options)
    import base64
    import os

    wrong = {**em.options, "AZURE_STORAGE_ACCOUNT_KEY": base64.b64encode(os.urandom(64)).decode()}
    with pytest.raises(StorageCredentialsError, match=b) as ei:
        tahoe.Table(em.uri(b, "t"), storage_options=wrong)
    assert AZURITE_KEY not in str(ei.value) and wrong["AZURE_STORAGE_ACCOUNT_KEY"] not in str(ei.value)


@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_403_on_commit_commits_nothing(emulators, kind):
    """The store answers 403 to the commit's PUT: StorageAccessDeniedError; the table stays at
    its version, no commit file appears and the write's data files are deleted again."""
    em = emulators.get(kind)
    b = new_bucket(em)
    uri = em.uri(b, "t")
    tahoe.write_table(uri, pa.table({"id": [1]}), storage_options=em.options)
    proxy = StoreProxy(("127.0.0.1", int(em.endpoint.split(":")[2].split("/")[0])), kind=kind,
                       fail=lambda m, p, h: 403 if m == "PUT" and "_delta_log" in p and ".json" in p else None)
    try:
        with pytest.raises(StorageAccessDeniedError, match="403"):
            tahoe.write_table(uri, pa.table({"id": [2]}), mode="append", storage_options=_through(em, proxy))
    finally:
        proxy.close()
    t = tahoe.Table(uri, storage_options=em.options)
    assert t.version == 0 and t.to_arrow().column("id").to_pylist() == [1]
    store, root = store_for(uri, em.options)
    data = [s for s in store.walk(root) if s.name.endswith(".parquet")]
    assert len(data) == 1


def test_network_failure_is_not_a_corrupt_log(tmp_path):
    """A store that stops answering (its emulator stopped): opening the table, and reading a
    table opened before, fail with StorageUnreachableError naming the endpoint — not
    CorruptLogError; a write fails the same way with nothing committed."""
    from tests.fixtures.emulators import start_s3

    em = start_s3()
    b = new_bucket(em)
    uri = em.uri(b, "t")
    o = {**em.options, **FAST}
    tahoe.write_table(uri, pa.table({"id": [1, 2]}), storage_options=o)
    opened = tahoe.Table(uri, storage_options=o)
    em.stop()
    for call in (lambda: tahoe.Table(uri, storage_options=o), opened.to_arrow,
                 lambda: tahoe.write_table(uri, pa.table({"id": [3]}), mode="append", storage_options=o)):
        with pytest.raises(StorageUnreachableError, match=em.endpoint) as ei:
            call()
        assert not isinstance(ei.value, CorruptLogError)
        assert "testing" not in str(ei.value).replace(em.endpoint, "")


def test_dropped_connection_on_data_file(emulators):
    """Every GET of a data file has its connection closed: the read fails with a StorageError
    after the client's retries, never CorruptLogError."""
    em = emulators.get("s3")
    b = new_bucket(em)
    uri = em.uri(b, "t")
    tahoe.write_table(uri, pa.table({"id": [1, 2]}), storage_options=em.options)
    port = int(em.endpoint.rsplit(":", 1)[1])
    proxy = StoreProxy(("127.0.0.1", port), kind="s3",
                       fail=lambda m, p, h: "drop" if m in ("GET", "HEAD") and p.split("?")[0].endswith(".parquet") else None)
    try:
        t = tahoe.Table(uri, storage_options={**_through(em, proxy), **FAST})
        with pytest.raises(StorageError) as ei:
            t.to_arrow()
        assert not isinstance(ei.value, CorruptLogError)
        assert "S3 bucket" in str(ei.value)
    finally:
        proxy.close()


@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_throttling_is_retried_then_reported(emulators, kind):
    """The first 3 requests answered 503 (S3 SlowDown / Azure ServerBusy): retried with backoff,
    the write and the read succeed (the proxy saw the 503s, then the same requests again). A
    store that throttles every commit PUT: the write fails naming the throttling and the store;
    nothing committed."""
    em = emulators.get(kind)
    b = new_bucket(em)
    uri = em.uri(b, "t")
    port = int(em.endpoint.split(":")[2].split("/")[0])
    left = [3]

    def first_three(method, path, headers):
        if left[0] > 0:
            left[0] -= 1
            return 503
        return None

    proxy = StoreProxy(("127.0.0.1", port), kind=kind, fail=first_three)
    try:
        o = {**_through(em, proxy), "backoff_config.init_backoff": "20ms"}
        tahoe.write_table(uri, pa.table({"id": [1, 2]}), storage_options=o)
        assert sorted(tahoe.Table(uri, storage_options=o).to_arrow().column("id").to_pylist()) == [1, 2]
        faults = [r for r in proxy.log if r.fault]
        assert len(faults) == 3 and proxy.log[3].path == proxy.log[0].path   # the same request, retried
    finally:
        proxy.close()

    always = StoreProxy(("127.0.0.1", port), kind=kind,
                        fail=lambda m, p, h: 503 if m == "PUT" and "_delta_log" in p and ".json" in p else None)
    try:
        # the client sent the commit several times: as far as it can know, one attempt may have
        # landed (a 5xx does not say), so the writer reads the version back, tries again, and
        # reports the outcome as unknown — caused by the throttling, which it names
        with pytest.raises(CommitOutcomeUnknownError, match="StorageThrottledError") as ei:
            tahoe.write_table(uri, pa.table({"id": [3]}), mode="append",
                              storage_options={**_through(em, always), **FAST})
        assert isinstance(ei.value.__cause__, StorageThrottledError)
        assert ("S3 bucket" if kind == "s3" else "Azure Blob Storage container") in str(ei.value)
    finally:
        always.close()
    assert tahoe.Table(uri, storage_options=em.options).version == 0
