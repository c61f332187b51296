"""S3LogStore (obstore) against moto's S3 server on 127.0.0.1; the 409 and lost-acknowledgement
paths moto does not produce by itself are injected by a real proxy / moto's intercept hook."""

from __future__ import annotations

import multiprocessing as mp
import time
import urllib.request

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe.errors import BucketNotFoundError, CommitFailedException
from tahoe.storage import FileStatus, S3LogStore, log_store_for
from tests.fixtures.moto import LOSE_ACK, TEST_CREDENTIALS, start_moto_server
from tests.fixtures.store_proxy import StoreProxy
from tests.storage import _workers


def commit(v: int) -> str:
    return f"{v:020d}.json"


def names(statuses) -> list[str]:
    return [s.path.rsplit("/", 1)[1] for s in statuses]


def test_moto_server_honours_if_none_match(s3_bucket, s3_env):
    """The premise of these tests: moto really answers 412 to a conditional PUT of an
    existing key (checked with plain boto3, not through the store)."""
    from botocore.exceptions import ClientError

    c = boto3.client("s3", endpoint_url=s3_env)
    c.put_object(Bucket=s3_bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as ei:
        c.put_object(Bucket=s3_bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert ei.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert ei.value.response["Error"]["Code"] == "PreconditionFailed"
    assert c.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"1"


def test_log_store_for_s3(s3_bucket):
    store, root = log_store_for(f"s3a://{s3_bucket}/a/b/")
    assert isinstance(store, S3LogStore) and root == f"s3://{s3_bucket}/a/b"
    assert store.join(root, "_delta_log", commit(0)) == f"s3://{s3_bucket}/a/b/_delta_log/{commit(0)}"
    assert log_store_for(f"s3://{s3_bucket}")[1] == f"s3://{s3_bucket}"


def test_options_override_environment(s3_bucket, s3_env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    store = S3LogStore({"endpoint_url": s3_env, "aws_access_key_id": "testing",
                        "aws_secret_access_key": "testing", "region": "us-east-1"})
    store.write(f"s3://{s3_bucket}/x", b"x")
    assert store.read(f"s3://{s3_bucket}/x") == b"x"
    # host:port without a scheme needs allow_http to mean http
    host = s3_env.split("://", 1)[1]
    store = S3LogStore({"endpoint_url": host, "allow_http": "true"})
    assert store.read(f"s3://{s3_bucket}/x") == b"x"
    with pytest.raises(ValueError, match="allow_http"):
        S3LogStore({"endpoint_url": s3_env, "allow_http": False})


def test_put_if_absent_and_overwrite(s3_store):
    store, root = s3_store
    p = store.join(root, "_delta_log", commit(0))
    store.write(p, b"first")
    with pytest.raises(FileExistsError) as ei:
        store.write(p, b"second")
    assert ei.value.filename == p
    assert store.read(p) == b"first"

    lc = store.join(root, "_delta_log", "_last_checkpoint")
    store.write(lc, b'{"version":1}', overwrite=True)
    store.write(lc, b'{"version":2}', overwrite=True)
    assert store.read(lc) == b'{"version":2}'


def test_list_from_with_start_key(s3_store):
    store, root = s3_store
    log = store.join(root, "_delta_log")
    for v in (3, 0, 10, 2, 1):
        store.write(store.join(log, commit(v)), b"{}")
    store.write(store.join(log, "00000000000000000002.checkpoint.parquet"), b"PAR1")
    store.write(store.join(log, ".00000000000000000003.json.crc"), b"c")
    store.write(store.join(log, "_sidecars", "a.parquet"), b"s")  # a "subdirectory"
    store.write(store.join(root, "_delta_log_other", "x"), b"x")   # a sibling sharing the prefix

    got = list(store.list_from(store.join(log, commit(2))))
    assert names(got) == [commit(2), commit(3), commit(10)]
    assert names(store.list_from(store.join(log, "00000000000000000002"))) == [
        "00000000000000000002.checkpoint.parquet", commit(2), commit(3), commit(10)]
    assert all(isinstance(s, FileStatus) and s.path.startswith("s3://") for s in got)
    assert got[0].size == 2 and abs(got[0].modification_time - time.time() * 1000) < 300_000
    assert names(store.list_from(store.join(log, "00000000000000000004"))) == [commit(10)]
    assert names(store.list_dir(log)) == [commit(0), commit(1),
                                          "00000000000000000002.checkpoint.parquet",
                                          commit(2), commit(3), commit(10)]
    assert names(store.list_from(store.join(log, "zzz"))) == []
    with pytest.raises(FileNotFoundError):
        store.list_from(store.join(root, "nope", commit(0)))
    with pytest.raises(BucketNotFoundError, match="tahoe-no-such-bucket-xyz"):
        store.list_dir("s3://tahoe-no-such-bucket-xyz/t/_delta_log")


def test_list_from_paginates(s3_store):
    """More keys than one S3 listing page (1000): all of them, from a start key."""
    from concurrent.futures import ThreadPoolExecutor

    store, root = s3_store
    log = store.join(root, "_delta_log")
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda v: store.write(store.join(log, commit(v)), b"{}"), range(1010)))
    assert names(store.list_from(store.join(log, commit(4)))) == [commit(v) for v in range(4, 1010)]
    assert len(list(store.walk(root))) == 1010


def test_read_range_and_missing(s3_store):
    store, root = s3_store
    p = store.join(root, "f.bin")
    store.write(p, b"0123456789")
    assert store.read_range(p, 0, 4) == b"0123"
    assert store.read_range(p, 6, 100) == b"6789"
    assert store.read_range(p, 10, 5) == b""
    assert store.read_range(p, 3, 0) == b""
    missing = store.join(root, "missing.bin")
    for call in (lambda: store.read(missing), lambda: store.read_range(missing, 0, 3),
                 lambda: store.read_range(missing, 0, 0)):
        with pytest.raises(FileNotFoundError):
            call()


def test_exists_delete_walk(s3_store):
    store, root = s3_store
    store.mkdirs(store.join(root, "p=1"))  # no-op
    store.write(store.join(root, "p=1", "a.parquet"), b"a")
    store.write(store.join(root, "b.parquet"), b"bb")
    assert store.exists(store.join(root, "b.parquet"))
    assert store.exists(store.join(root, "p=1"))       # a "directory"
    assert not store.exists(store.join(root, "p=2"))
    assert [s.path[len(root) + 1:] for s in store.walk(root)] == ["b.parquet", "p=1/a.parquet"]
    store.delete(store.join(root, "b.parquet"))
    store.delete(store.join(root, "b.parquet"))  # missing is fine
    assert not store.exists(store.join(root, "b.parquet"))
    with pytest.raises(FileNotFoundError):
        store.walk(store.join(root, "nope"))


def test_presign_get_is_fetchable(s3_store):
    store, root = s3_store
    p = store.join(root, "dir", "data file.parquet")
    store.write(p, b"hello presigned")
    url = store.presign(p, 60)
    assert url.startswith("http://127.0.0.1:")
    assert "X-Amz-Signature=" in url  # SigV4: what Delta Sharing clients accept as pre-signed
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.read() == b"hello presigned"


def test_parquet_roundtrip_through_the_store(s3_store, monkeypatch):
    """Data files: written with `write_data`, read with `open_input_file` — small (one GET),
    large (9 MB, beyond WHOLE_READ_BYTES: parts fetched at once), and very large (ranged GETs as
    the parquet reader asks, here by lowering PARALLEL_READ_BYTES)."""
    import numpy as np

    from tahoe.storage import object_store
    from tahoe.storage.object_store import WHOLE_READ_BYTES

    store, root = s3_store
    path = store.join(root, "part-00000.parquet")
    table = pa.table({"id": [1, 2, 3], "s": ["a", "b", None]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    store.write_data(path, sink.getvalue())
    assert pq.read_table(store.open_input_file(path)).equals(table)
    big = pa.table({"x": np.random.default_rng(0).random(1_200_000)})
    sink = pa.BufferOutputStream()
    pq.write_table(big, sink, compression="none", row_group_size=200_000)
    assert sink.getvalue().size > WHOLE_READ_BYTES
    store.write_data(store.join(root, "big.parquet"), sink.getvalue())
    pf = pq.ParquetFile(store.open_input_file(store.join(root, "big.parquet")))
    assert pf.metadata.num_row_groups == 6 and pf.read_row_group(5).equals(big.slice(1_000_000))
    monkeypatch.setattr(object_store, "PARALLEL_READ_BYTES", 0)
    pf = pq.ParquetFile(store.open_input_file(store.join(root, "big.parquet")))
    assert pf.read_row_group(2).equals(big.slice(400_000, 200_000)) and pf.read().equals(big)
    # and the log store sees what pyarrow wrote
    assert store.read(path)[:4] == b"PAR1"
    assert names(store.list_dir(root)) == ["big.parquet", "part-00000.parquet"]


def test_store_is_picklable(s3_store):
    import pickle

    store, root = s3_store
    store.write(store.join(root, "x"), b"x")
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read(store.join(root, "x")) == b"x"


@pytest.mark.slow
def test_concurrent_put_if_absent_processes(s3_store, s3_env):
    """4 processes race to create the same 30 keys: each key is won exactly once."""
    store, root = s3_store
    log = store.join(root, "_delta_log")
    writers, versions = 4, 30
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_workers.s3_writer,
                         args=(s3_env, log, w, versions, barrier, queue))
             for w in range(writers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0

    winner_of: dict[int, int] = {}
    for writer, wins, torn in results:
        assert torn == []
        for v in wins:
            assert v not in winner_of, f"key {v} won by {winner_of[v]} and {writer}"
            winner_of[v] = writer
    assert sorted(winner_of) == list(range(versions))
    listed = list(store.list_dir(log))
    assert names(listed) == [commit(v) for v in range(versions)]
    for v, st in enumerate(listed):
        assert _workers.parse_payload(store.read(st.path))["writer"] == winner_of[v]


# --- 409 and lost acknowledgements -------------------------------------------------------


def test_409_conflict_is_retried_then_fails(s3_bucket, moto_server):
    """S3 answers 409 ConditionalRequestConflict while another conditional write of the key is in
    flight: retried (2 conflicts, then the put lands), and a key that keeps conflicting is a
    CommitFailedException. The 409s come from a real proxy in front of moto."""
    port = int(moto_server.rsplit(":", 1)[1])
    left = [2]

    def conflicts(method, path, headers):
        if method == "PUT" and path.endswith("/k") and left[0] != 0:
            left[0] -= 1
            return 409
        return None

    proxy = StoreProxy(("127.0.0.1", port), kind="s3", fail=conflicts)
    try:
        store = S3LogStore({**TEST_CREDENTIALS, "endpoint_url": proxy.url})
        store.write(f"s3://{s3_bucket}/k", b"x")
        assert store.read(f"s3://{s3_bucket}/k") == b"x"
        assert len([r for r in proxy.requests("PUT") if r.fault]) == 2
        left[0] = -1
        with pytest.raises(CommitFailedException, match="409"):
            store.write(f"s3://{s3_bucket}/k2".replace("k2", "k"), b"y")
    finally:
        proxy.close()


def test_412_after_a_lost_acknowledgement_is_success():
    """moto stores the PUT, then the client gets 500 (its acknowledgement lost); the client
    retries and gets 412 — from its own first attempt: the object holds our bytes, so the write
    succeeded. A 412 over another writer's bytes stays a FileExistsError."""
    lost = [1]

    def lose_first(method, key, query):
        if method == "PUT" and key.endswith("ours") and lost[0]:
            lost[0] -= 1
            return LOSE_ACK
        return None

    url, stop = start_moto_server(intercept=lose_first)
    try:
        boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket="acks")
        store = S3LogStore({**TEST_CREDENTIALS, "endpoint_url": url, "backoff_config.init_backoff": "10ms"})
        store.write("s3://acks/ours", b"mine")
        assert lost == [0] and store.read("s3://acks/ours") == b"mine"
        store.write("s3://acks/theirs", b"theirs")
        with pytest.raises(FileExistsError):
            store.write("s3://acks/theirs", b"mine")
    finally:
        stop()


# keys a URL or a Hive path must escape: space, %, +, #, ?, &, =, :, a literal %20, non-ASCII
ODD_NAMES = ["a b.json", "100%.json", "x+y.json", "h#sh.json", "q?.json", "a&b=c.json", "c:d.json",
             "lit%20eral.json", "é 日本.json"]


def test_keys_that_need_escaping_list_read_and_presign(s3_store, s3_bucket, s3_env):
    """Oracle: plain boto3 — the object keys S3 holds are exactly the names given (no encoding
    added or lost), and the store lists, reads, ranges and pre-signs them under those names."""
    store, root = s3_store
    d = store.join(root, "odd dir%")
    for i, name in enumerate(ODD_NAMES):
        store.write(store.join(d, name), f"body {i}".encode())
    c = boto3.client("s3", endpoint_url=s3_env)
    keys = sorted(o["Key"] for o in c.list_objects_v2(Bucket=s3_bucket, Prefix="t/")["Contents"])
    assert keys == sorted(f"t/odd dir%/{n}" for n in ODD_NAMES)
    assert sorted(names(store.list_dir(d))) == sorted(ODD_NAMES)
    assert sorted(s.path for s in store.walk(root)) == sorted(store.join(d, n) for n in ODD_NAMES)
    assert names(store.list_from(store.join(d, "c"))) == sorted(n for n in ODD_NAMES if n >= "c")
    for i, name in enumerate(ODD_NAMES):
        p = store.join(d, name)
        assert store.exists(p)
        assert store.read(p) == f"body {i}".encode()
        assert store.read_range(p, 5, 10) == str(i).encode()
        with urllib.request.urlopen(store.presign(p, 60), timeout=10) as resp:
            assert resp.read() == f"body {i}".encode(), name
        with store.open_input_file(p) as f:
            assert f.read() == f"body {i}".encode()
        store.delete(p)
        assert not store.exists(p)


def test_table_with_escaped_partition_paths_on_s3(s3_store, s3_bucket, s3_env, tmp_path):
    """A partitioned table on S3 whose partition values need escaping: the object keys are the
    Hive-escaped directories (hand-derived), tahoe reads the rows written, and so does delta-rs."""
    import json
    import subprocess
    import sys
    import textwrap

    import tahoe

    store, root = s3_store
    values = ["a b", "50%", "x/y", "h#q?", "c:d=e", "é"]
    data = pa.table({"id": pa.array(range(len(values)), pa.int64()), "p": values})
    tahoe.write_table(root, data, partition_by="p")
    c = boto3.client("s3", endpoint_url=s3_env)
    dirs = {o["Key"].split("/")[1] for o in c.list_objects_v2(Bucket=s3_bucket, Prefix="t/")["Contents"]
            if not o["Key"].startswith("t/_delta_log/")}
    assert dirs == {"p=a b", "p=50%25", "p=x%2Fy", "p=h%23q%3F", "p=c%3Ad%3De", "p=é"}
    rows = sorted((r["id"], r["p"]) for r in tahoe.Table(root).to_arrow().to_pylist())
    assert rows == list(enumerate(values))
    code = textwrap.dedent(f"""
        import json, os
        from deltalake import DeltaTable
        t = DeltaTable({root!r}, storage_options={{"AWS_ENDPOINT_URL": {s3_env!r}, "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}})
        d = t.to_pyarrow_table().to_pydict()
        print(json.dumps(sorted(zip(d["id"], d["p"]))))
        os._exit(0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    assert lines, r.stderr[-2000:]
    assert [tuple(x) for x in json.loads(lines[-1])] == list(enumerate(values))
