"""log_store_for (URI → store + normalized root) and resolve_data_path (action path → location)."""

from __future__ import annotations

import os

import pytest

from tahoe.storage import LocalLogStore, log_store_for, resolve_data_path


@pytest.mark.parametrize("uri", ["/tmp/tbl", "/tmp/tbl/", "file:/tmp/tbl", "file:///tmp/tbl",
                                 "file://localhost/tmp/tbl/", "FILE:///tmp/tbl"])
def test_log_store_for_local(uri):
    store, root = log_store_for(uri)
    assert isinstance(store, LocalLogStore)
    assert root == "/tmp/tbl"


def test_log_store_for_relative_and_escaped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert log_store_for("rel/tbl")[1] == os.path.join(str(tmp_path), "rel", "tbl")
    assert log_store_for("file:///tmp/a%20b")[1] == "/tmp/a b"


@pytest.mark.parametrize("uri", ["hdfs://nn/t", "http://x/t", "ftp://h/t"])
def test_log_store_for_unknown_scheme(uri):
    """A scheme no store takes: UnsupportedStorageError (a StorageError) naming it."""
    from tahoe.errors import StorageError, UnsupportedStorageError

    scheme = uri.split(":", 1)[0]
    with pytest.raises(UnsupportedStorageError, match=repr(scheme)) as ei:
        log_store_for(uri)
    assert isinstance(ei.value, StorageError) and "s3://" in str(ei.value) and "gs://" in str(ei.value)


@pytest.mark.parametrize("uri, kind, root", [
    ("gs://b/t/", "gcs", "gs://b/t"),
    ("abfss://c@acct.dfs.core.windows.net/t", "azure", "abfss://c@acct.dfs.core.windows.net/t"),
    ("abfs://c@acct.dfs.core.windows.net/t/", "azure", "abfs://c@acct.dfs.core.windows.net/t"),
    ("wasbs://c@acct.blob.core.windows.net/t", "azure", "wasbs://c@acct.blob.core.windows.net/t"),
    ("wasb://c@acct.blob.core.windows.net/t", "azure", "wasb://c@acct.blob.core.windows.net/t"),
    ("az://c/a/b", "azure", "az://c/a/b"), ("azure://c/a", "azure", "azure://c/a"), ("adl://c/a", "azure", "adl://c/a"),
    ("s3a://b/t/", "s3", "s3://b/t"), ("S3://b", "s3", "s3://b"),
])
def test_store_for_object_stores(uri, kind, root):
    """The schemes delta-rs takes for each store (its `register_handlers`: s3, s3a; az, adl,
    azure, abfs, abfss; gs) and Hadoop's wasb[s] (the Delta Sharing reference server's config
    template names one), each to the store of its kind; no request is made."""
    from tahoe.storage import ObjectStoreLogStore, store_for

    store, got = store_for(uri)
    assert isinstance(store, ObjectStoreLogStore) and store.kind == kind and got == root


def test_log_store_for_s3_root_needs_a_bucket():
    with pytest.raises(ValueError):
        log_store_for("s3:///no-bucket")


@pytest.mark.parametrize("root, path, expected", [
    # relative, percent-decoded, joined to the root
    ("/tmp/t", "a%20b/part-0.parquet", "/tmp/t/a b/part-0.parquet"),
    ("/tmp/t/", "part-0.parquet", "/tmp/t/part-0.parquet"),
    ("/tmp/t", "%C3%A9t%C3%A9/x.parquet", "/tmp/t/été/x.parquet"),
    ("/tmp/t", "a+b/x.parquet", "/tmp/t/a+b/x.parquet"),          # "+" is not a space in URIs
    ("/tmp/t", "date=2024-01-01/x.parquet", "/tmp/t/date=2024-01-01/x.parquet"),
    # Hive-escaped partition dir on disk (p=a%3Ab) is URI-encoded again in the log
    ("/tmp/t", "p=a%253Ab/part-0.parquet", "/tmp/t/p=a%3Ab/part-0.parquet"),
    ("s3://b/t", "p=a%253Ab/part-0.parquet", "s3://b/t/p=a%3Ab/part-0.parquet"),
    ("s3://b/t", "a%20b/part-0.parquet", "s3://b/t/a b/part-0.parquet"),
    ("s3://b", "x.parquet", "s3://b/x.parquet"),
    # absolute: as is after decoding; file URIs become OS paths
    ("/tmp/t", "file:/tmp/t/x%3Ay.parquet", "/tmp/t/x:y.parquet"),
    ("/tmp/t", "file:///tmp/other/x.parquet", "/tmp/other/x.parquet"),
    ("/tmp/t", "/abs/x%20y.parquet", "/abs/x y.parquet"),
    ("s3://b/t", "s3://b/t/x.parquet", "s3://b/t/x.parquet"),
    ("s3://b/t", "s3://other/t/x%20y.parquet", "s3://other/t/x y.parquet"),
    ("/tmp/t", "s3a://b/t/x.parquet", "s3a://b/t/x.parquet"),
    # a path-absolute reference under an s3 root stays in the bucket
    ("s3://b/t", "/elsewhere/x.parquet", "s3://b/elsewhere/x.parquet"),
    # a file: URI root is taken as the OS path it names
    ("file:///tmp/t", "a%20b/x.parquet", "/tmp/t/a b/x.parquet"),
])
def test_resolve_data_path(root, path, expected):
    assert resolve_data_path(root, path) == expected


def test_resolve_data_path_decodes_exactly_once():
    once = resolve_data_path("/t", "x%2520y.parquet")
    assert once == "/t/x%20y.parquet"
