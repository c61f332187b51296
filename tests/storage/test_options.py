"""`storage_options` as delta-rs users write them (no store is reached here): keys in any case and
under object_store's aliases, keys of another store kept for it, delta-rs's own keys, unknown keys
refused by name, retry settings, secrets kept out of messages; URIs of every store."""

from __future__ import annotations

import pickle
from datetime import timedelta

import pytest

from tahoe.errors import StorageConfigError, UnsupportedFeatureError
from tahoe.storage import ObjectStoreLogStore, S3LogStore, store_for
from tahoe.storage.options import parse_location, redact, store_config


def test_keys_in_any_case_and_alias():
    """delta-rs's README keys (upper case) and object_store's names (lower case, with or without
    the store's prefix) all reach the store; two spellings of one setting with one value are one."""
    c = store_config("s3", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "aws_allow_http": "true",
                            "allow_http": "true", "AWS_ACCESS_KEY_ID": "AKIA", "aws_secret_access_key": "s",
                            "REGION": "eu-west-1", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"})
    assert c.config == {"aws_endpoint_url": "http://127.0.0.1:9000", "aws_allow_http": "true",
                        "aws_access_key_id": "AKIA", "aws_secret_access_key": "s", "region": "eu-west-1"}
    with pytest.raises(StorageConfigError, match="different values"):
        store_config("s3", {"AWS_ENDPOINT_URL": "http://a:1", "endpoint": "http://b:2"})
    a = store_config("azure", {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "azure_storage_account_key": "k",
                               "azure_storage_use_emulator": "true", "AWS_REGION": "us-east-1"})
    assert a.config == {"azure_storage_account_name": "acct", "azure_storage_account_key": "k",
                        "azure_storage_use_emulator": "true"}     # the AWS key is left for S3 paths
    g = store_config("gcs", {"GOOGLE_SERVICE_ACCOUNT": "/sa.json", "use_emulator": "true"})
    assert g.config == {"google_service_account": "/sa.json"}


def test_unknown_keys_are_refused_by_name():
    for bad in ("aws_acess_key_id", "AZURE_STORAGE_ACOUNT_NAME", "foo"):
        with pytest.raises(StorageConfigError, match=bad):
            store_config("s3", {bad: "x"})


def test_delta_rs_own_keys():
    """delta-rs's keys that object_store does not take: the unsafe-rename switch is accepted and
    unused (tahoe commits with conditional puts), the addressing style becomes object_store's,
    DynamoDB locking and role assumption are refused by name; retry keys set the retry policy."""
    c = store_config("s3", {"AWS_S3_ADDRESSING_STYLE": "virtual", "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
                            "AWS_EC2_METADATA_DISABLED": "true", "max_retries": "3", "retry_timeout": "20s",
                            "backoff_config.init_backoff": "50ms", "AWS_S3_POOL_IDLE_TIMEOUT_SECONDS": "10"})
    assert c.config == {"virtual_hosted_style_request": "true", "pool_idle_timeout": "10s"}
    assert c.retry["max_retries"] == 3 and c.retry["retry_timeout"] == timedelta(seconds=20)
    assert c.retry["backoff"]["init_backoff"] == timedelta(milliseconds=50)
    with pytest.raises(UnsupportedFeatureError, match="DynamoDB"):
        store_config("s3", {"AWS_S3_LOCKING_PROVIDER": "dynamodb"})
    with pytest.raises(UnsupportedFeatureError, match="AWS_IAM_ROLE_ARN"):
        store_config("s3", {"AWS_IAM_ROLE_ARN": "arn:aws:iam::1:role/x"})
    assert store_config("azure", {"AWS_S3_LOCKING_PROVIDER": "dynamodb"}).config == {}   # S3's business


def test_http_endpoints():
    """An http:// endpoint is allowed unless allow_http is false; a bare host:port gets https, or
    http with allow_http (object_store itself would fail on a URL without a scheme)."""
    s = S3LogStore({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    assert s.endpoint == "http://127.0.0.1:9000"
    with pytest.raises(StorageConfigError, match="allow_http is false"):
        S3LogStore({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "allow_http": "false"})
    assert ObjectStoreLogStore("azure", {"use_emulator": "true"}).endpoint.startswith("http://127.0.0.1:")


def test_locations():
    assert parse_location("abfss://c@acct.dfs.core.windows.net/a/b").account == "acct"
    assert parse_location("az://c/a").bucket == "c" and parse_location("az://c/a").account is None
    w = parse_location("wasbs://c@acct.blob.core.windows.net/a/b")
    assert (w.kind, w.bucket, w.account, w.key) == ("azure", "c", "acct", "a/b")
    assert parse_location("s3a://b/k/").root == "s3://b/k"
    with pytest.raises(StorageConfigError, match="names no bucket"):
        parse_location("s3:///k")
    with pytest.raises(StorageConfigError, match="names no container"):
        parse_location("az:///k")


def test_stores_pickle_as_their_options():
    """A store travels (to Spark tasks) as its kind and options and is rebuilt from them."""
    opts = {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "a2V5"}
    store, root = store_for("az://c/t", opts)
    clone = pickle.loads(pickle.dumps(store))
    assert type(clone) is type(store) and clone.kind == "azure" and clone.options == opts and root == "az://c/t"
    s3 = pickle.loads(pickle.dumps(store_for("s3://b/t", {"region": "us-east-1"})[0]))
    assert isinstance(s3, S3LogStore) and s3.region == "us-east-1"


def test_secrets_are_redacted():
    text = ("GET http://h/c/b?sv=2023&se=2026&sig=abc%2Bdef%3D&sp=r failed; "
            "https://b.s3/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=deadbeef key=supersecretvalue")
    out = redact(text, ("supersecretvalue",))
    for s in ("abc%2Bdef", "deadbeef", "AKIA%2F1", "supersecretvalue"):
        assert s not in out
    assert "sv=2023" in out and "se=2026" in out


def test_one_dict_for_two_stores_with_aliases():
    """A dict for S3 and Azure at once where a key has two spellings (`AWS_ALLOW_HTTP` and
    `allow_http`, which both stores take): each store gets its own keys only."""
    o = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "a",
         "AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "a2V5", "allow_http": "true"}
    assert set(store_config("s3", o).config) == {"aws_endpoint_url", "aws_allow_http", "aws_access_key_id"}
    assert set(store_config("azure", o).config) == {"azure_storage_account_name", "azure_storage_account_key",
                                                   "allow_http"}
