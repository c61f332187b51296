"""A failed commit never deletes files a version may reference; a lost race deletes the loser's
files; a writer that meant to create a table never overwrites the table another writer created.

Failures are injected at the store boundary: real `LocalLogStore` / `S3LogStore` subclasses whose
`write` does the real write and then raises (the acknowledgement is lost), or that let another
writer commit first. Oracles: the rows written (hand-made), the raw `_delta_log` JSON and the data
files on disk, delta-rs reading the table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

import tahoe
from tahoe import DeltaLog, Table
from tahoe.errors import (
    CommitOutcomeUnknownError, ConcurrentModificationException, ProtocolChangedException,
)
from tahoe.storage import LocalLogStore
from tahoe.txn import Transaction
from tahoe.txn.transaction import CommitOutcome
from tests.write.test_writer import data_files, read_back, same_rows


class AckLostError(ConnectionError):
    """The store did the write, then the connection dropped before the answer."""


class AckLosingLocalStore(LocalLogStore):
    """Commits land, then the first `failures` acknowledgements of commit files are lost. With
    `unreadable`, reading a commit file back fails too (the store is unreachable after the put)."""

    def __init__(self, failures: int = 1, unreadable: bool = False):
        super().__init__()
        self.failures = failures
        self.unreadable = unreadable
        self.lost = 0

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        super().write(path, data, overwrite)
        if not overwrite and path.endswith(".json") and self.lost < self.failures:
            self.lost += 1
            raise AckLostError(f"connection reset after writing {path}")

    def read(self, path: str) -> bytes:
        if self.unreadable and path.endswith(".json") and "_delta_log" in path and self.lost:
            raise AckLostError(f"store unreachable reading {path}")
        return super().read(path)


class RacingLocalStore(LocalLogStore):
    """Before this writer's put of commit `version`, `rival()` commits that version first (a
    lost put-if-absent race, deterministically)."""

    def __init__(self, version: int, rival):
        super().__init__()
        self.target = f"{version:020d}.json"
        self.rival = rival

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        if not overwrite and os.path.basename(path) == self.target and self.rival is not None:
            rival, self.rival = self.rival, None
            rival()
        super().write(path, data, overwrite)


def _log(store, path: str) -> DeltaLog:
    return DeltaLog(store, os.path.abspath(path))


def _version_zero_id(path: str) -> str:
    lines = Path(path, "_delta_log", f"{0:020d}.json").read_text().splitlines()
    return next(json.loads(x)["metaData"]["id"] for x in lines if '"metaData"' in x)


def _versions(path: str) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(Path(path, "_delta_log"))
                  if n.endswith(".json") and not n.startswith("."))


# --- the put landed, its acknowledgement did not ----------------------------------------------------

def test_a_commit_whose_acknowledgement_is_lost_is_a_success_and_keeps_its_files(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by="p")
    store = AckLosingLocalStore()
    rows = pa.table({"id": [3, 4], "p": ["a", "c"]})
    v = tahoe.write_table(_log(store, path), rows)
    assert store.lost == 1 and v == 1 and _versions(path) == [0, 1]
    expected = pa.table({"id": [1, 2, 3, 4], "p": ["a", "b", "a", "c"]})
    read_back(path, tmp_path, expected)          # tahoe and delta-rs
    assert len(data_files(path)) == 4            # nothing deleted


def test_an_overwrite_whose_acknowledgement_is_lost_keeps_its_files(tmp_path):
    """A non-blind commit (it removes files): the same — the version landed, so it is the
    write's result, and its new files stay."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1, 2]}))
    new = pa.table({"id": [7]})
    v = tahoe.write_table(_log(AckLosingLocalStore(), path), new, mode="overwrite")
    assert v == 1
    read_back(path, tmp_path, new)


def test_an_unresolvable_outcome_raises_and_deletes_nothing(tmp_path):
    """The put landed, then the store became unreachable (reading the version back fails): the
    writer cannot know, raises CommitOutcomeUnknownError and keeps every file — the version is
    there and reads right once the store is back."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}))
    before = set(data_files(path))
    with pytest.raises(CommitOutcomeUnknownError, match="may or may not exist"):
        tahoe.write_table(_log(AckLosingLocalStore(unreadable=True), path), pa.table({"id": [2, 3]}))
    assert len(set(data_files(path)) - before) == 1   # the new file is kept
    read_back(path, tmp_path, pa.table({"id": [1, 2, 3]}))


def test_transaction_outcome_states(tmp_path):
    from tests.txn._helpers import fake_add

    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}))
    ok = Transaction(DeltaLog.for_table(path), "WRITE")
    assert ok.outcome is CommitOutcome.NOT_COMMITTED
    ok.add_files([fake_add("a.parquet")])
    ok.commit()
    assert ok.outcome is CommitOutcome.COMMITTED
    resolved = Transaction(_log(AckLosingLocalStore(), path), "WRITE")
    resolved.add_files([fake_add("b.parquet")])
    assert resolved.commit() == 2 and resolved.outcome is CommitOutcome.COMMITTED
    unknown = Transaction(_log(AckLosingLocalStore(unreadable=True), path), "WRITE")
    unknown.add_files([fake_add("c.parquet")])
    with pytest.raises(CommitOutcomeUnknownError):
        unknown.commit()
    assert unknown.outcome is CommitOutcome.UNKNOWN and unknown.committed_version is None


def test_s3_commit_whose_acknowledgement_is_lost(tmp_path):
    """The same through the S3 store (moto on 127.0.0.1, conditional puts): the PUT lands, the
    client sees a read timeout; the writer reads the version back, finds its own bytes, and the
    write succeeds with its files in place."""
    import uuid

    import boto3
    from botocore.exceptions import ReadTimeoutError

    from tahoe.storage.s3 import S3LogStore
    from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server

    class AckLosingS3Store(S3LogStore):
        lost = 0

        def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
            super().write(path, data, overwrite)
            if not overwrite and path.endswith(".json") and not self.lost:
                self.lost += 1
                raise ReadTimeoutError(endpoint_url=path)

    url, stop = start_moto_server()
    try:
        bucket = f"tahoe-ack-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=url, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        opts = {**TEST_CREDENTIALS, "endpoint_url": url, "allow_http": "true"}
        root = f"s3://{bucket}/t"
        tahoe.write_table(root, pa.table({"id": [1]}), storage_options=opts)
        store = AckLosingS3Store(opts)
        v = tahoe.write_table(DeltaLog(store, root), pa.table({"id": [2, 3]}))
        assert store.lost == 1 and v == 1
        same_rows(Table(root, storage_options=opts).to_arrow(), pa.table({"id": [1, 2, 3]}))
        keys = [o["Key"] for o in boto3.client("s3", endpoint_url=url, aws_access_key_id="testing",
                                                aws_secret_access_key="testing", region_name="us-east-1")
                .list_objects_v2(Bucket=bucket, Prefix="t/")["Contents"]]
        assert len([k for k in keys if k.endswith(".parquet") and "_delta_log" not in k]) == 2
    finally:
        stop()


def test_s3_put_that_never_landed_is_sent_again(tmp_path):
    """S3 puts may land late (`S3LogStore.puts_may_land_late`): after a put that failed before
    reaching S3 (a connection error), the writer cannot take "absent" for "not committed" — a put
    in flight could still land. It reads the version (absent), puts it again (put-if-absent settles
    it) and the write lands as version 1 with its files. When another writer took the version in
    between, reading it back finds *their* commit: a conflict check, then this write commits as
    version 2. Oracles: the rows written; the commit files' own JSON; the objects in the bucket."""
    import uuid

    import boto3
    from botocore.exceptions import EndpointConnectionError

    from tahoe.storage.s3 import S3LogStore
    from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server

    class NeverSentS3Store(S3LogStore):
        """The first put of a commit file fails before it is sent; `rival()` runs then."""
        failed: list = []
        rival = None

        def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
            if not overwrite and path.endswith(".json") and not self.failed:
                self.failed.append(path)
                if self.rival is not None:
                    self.rival()
                raise EndpointConnectionError(endpoint_url=path)
            super().write(path, data, overwrite)

    url, stop = start_moto_server()
    try:
        s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
        bucket = f"tahoe-late-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=bucket)
        opts = {**TEST_CREDENTIALS, "endpoint_url": url, "allow_http": "true"}

        def parquet_keys(prefix: str) -> list[str]:
            return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"]
                    if o["Key"].endswith(".parquet")]

        def commit_rows(prefix: str, version: int) -> int:
            body = s3.get_object(Bucket=bucket, Key=f"{prefix}/_delta_log/{version:020d}.json")["Body"].read()
            return sum(json.loads(json.loads(x)["add"]["stats"])["numRecords"]
                       for x in body.decode().splitlines() if '"add"' in x)

        root = f"s3://{bucket}/alone"
        tahoe.write_table(root, pa.table({"id": [1]}), storage_options=opts)
        store = NeverSentS3Store(opts)
        store.failed = []
        assert tahoe.write_table(DeltaLog(store, root), pa.table({"id": [2, 3]})) == 1
        assert store.failed == [f"{root}/_delta_log/{1:020d}.json"]
        same_rows(Table(root, storage_options=opts).to_arrow(), pa.table({"id": [1, 2, 3]}))
        assert commit_rows("alone", 1) == 2 and len(parquet_keys("alone")) == 2

        root = f"s3://{bucket}/raced"
        tahoe.write_table(root, pa.table({"id": [1]}), storage_options=opts)
        store = NeverSentS3Store(opts)
        store.failed = []
        store.rival = lambda: tahoe.write_table(root, pa.table({"id": [50, 51, 52]}), storage_options=opts)
        assert tahoe.write_table(DeltaLog(store, root), pa.table({"id": [2, 3]})) == 2
        assert commit_rows("raced", 1) == 3 and commit_rows("raced", 2) == 2
        same_rows(Table(root, storage_options=opts).to_arrow(), pa.table({"id": [1, 50, 51, 52, 2, 3]}))
        assert len(parquet_keys("raced")) == 3
    finally:
        stop()


# --- lost races ---------------------------------------------------------------------------------------

def test_a_lost_race_deletes_the_losers_files(tmp_path):
    """Two overwrites planned on the same version: the rival commits first; this writer's
    put-if-absent is refused, the conflict check fails it (it read the whole table) — surely not
    committed, so its new file is deleted."""
    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}))
    rival_rows = pa.table({"id": [50]})
    store = RacingLocalStore(1, lambda: tahoe.write_table(path, rival_rows, mode="overwrite"))
    with pytest.raises(ConcurrentModificationException):   # ConcurrentAppendException, as delta-spark orders the checks
        tahoe.write_table(_log(store, path), pa.table({"id": [99]}), mode="overwrite")
    assert _versions(path) == [0, 1]
    assert len(data_files(path)) == 2        # v0's file and the rival's; the loser's is gone
    read_back(path, tmp_path, rival_rows)


def test_two_writers_creating_the_same_table(tmp_path):
    """Both plan on no table; the rival creates it first (its version 0 lands before this
    writer's put). This writer fails with delta-spark's ProtocolChangedException and deletes its
    files; the rival's table — its id, schema and rows — survives untouched."""
    path = str(tmp_path / "t")
    rival_rows = pa.table({"id": [1, 2], "name": ["x", "y"]})
    store = RacingLocalStore(0, lambda: tahoe.write_table(path, rival_rows, partition_by="name"))
    with pytest.raises(ProtocolChangedException, match="multiple writers are writing to an empty directory"):
        tahoe.write_table(_log(store, path), pa.table({"id": [7], "other": [1.5]}))
    assert _versions(path) == [0]
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.metadata.id == _version_zero_id(path) and snap.schema.names == ["id", "name"]
    assert len(data_files(path)) == 2
    read_back(path, tmp_path, rival_rows)


def test_many_writers_creating_the_same_table_in_threads(tmp_path):
    """Four writers planned on no table (a barrier holds them after their files are written):
    exactly one creates version 0, the others fail with ProtocolChangedException and leave no
    file; the table is the winner's."""
    import threading

    import tahoe.write.writer as arrow

    path = str(tmp_path / "t")
    barrier = threading.Barrier(4)
    original = arrow.write_data_files
    results, errors = {}, []

    def held(*a, **kw):
        out = original(*a, **kw)
        barrier.wait(timeout=60)
        return out

    def go(i):
        try:
            results[i] = tahoe.write_table(path, pa.table({"id": [i]}))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    arrow.write_data_files = held
    try:
        threads = [threading.Thread(target=go, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        arrow.write_data_files = original
    assert list(results.values()) == [0] and len(errors) == 3
    assert all(isinstance(e, ProtocolChangedException) for e in errors)
    winner = next(iter(results))
    assert _versions(path) == [0] and len(data_files(path)) == 1
    read_back(path, tmp_path, pa.table({"id": [winner]}))


def test_a_transaction_planned_on_no_table_refuses_an_existing_one(tmp_path):
    """`Transaction(new_table=True)` never reads the table that appeared: it fails before
    sending anything."""
    from tahoe.protocol.actions import Metadata

    path = str(tmp_path / "t")
    tahoe.write_table(path, pa.table({"id": [1]}))
    txn = Transaction(DeltaLog.for_table(path), "CREATE TABLE", new_table=True)
    assert txn.read_version == -1
    txn.update_metadata(Metadata("mine", '{"type":"struct","fields":[]}'))
    with pytest.raises(ProtocolChangedException):
        txn.commit()
    assert txn.outcome is CommitOutcome.NOT_COMMITTED and _versions(path) == [0]
    assert DeltaLog.for_table(path).snapshot().metadata.id == _version_zero_id(path) != "mine"
