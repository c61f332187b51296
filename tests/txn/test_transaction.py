"""Transaction commits in one process: the commit file's content, writer rules enforced before
anything is written, and the races of two transactions opened on the same version (the loser
rebases or fails with delta-spark's exception)."""

from __future__ import annotations

import json
import logging
import os

import pytest

from tahoe import Table
from tahoe.errors import (
    CommitFailedException, ConcurrentAppendException, ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException, ConcurrentTransactionException, InvalidTableOperationError,
    MetadataChangedException, ProtocolChangedException, UnsupportedFeatureError,
)
from tahoe.log import DeltaLog
from tahoe.protocol.actions import DomainMetadata, Protocol, RemoveFile
from tahoe.protocol.deletion_vectors import DeletionVectorDescriptor
from tahoe.txn import Transaction, create_table, set_properties
from tahoe.txn import in_commit_timestamps
from tests.txn._helpers import commit_actions, commit_info, fake_add, latest_version


def append(log, *adds, op="WRITE", **kw) -> int:
    t = Transaction(log, op, {"mode": "Append"}, **kw)
    t.add_files(adds)
    return t.commit()


# --- the commit file ---------------------------------------------------------------------------

def test_commit_info_first_and_complete(log, table):
    t = Transaction(log, "WRITE", {"mode": "Append", "partitionBy": ["p"], "n": 3, "skip": None},
                    engine_info="myapp/1.0")
    t.add_files([fake_add("p=a/1.parquet", "a")])
    v = t.commit({"numFiles": 1, "numOutputRows": 10}, user_metadata="batch 7")
    assert v == 1
    ci = commit_info(table, 1)
    assert list(ci)[:3] == ["timestamp", "operation", "operationParameters"]
    assert ci["operation"] == "WRITE"
    assert ci["operationParameters"] == {"mode": "Append", "partitionBy": '["p"]', "n": "3"}
    assert ci["operationMetrics"] == {"numFiles": "1", "numOutputRows": "10"}
    assert ci["readVersion"] == 0 and ci["isBlindAppend"] is True
    assert ci["isolationLevel"] == "WriteSerializable"
    assert ci["userMetadata"] == "batch 7"
    assert ci["engineInfo"].startswith("myapp/1.0 tahoe/")
    assert ci["txnId"] == t.txn_id and isinstance(ci["timestamp"], int)
    assert "inCommitTimestamp" not in ci


def test_new_table_commit_has_no_read_version(table):
    ci = commit_info(table, 0)
    assert ci["operation"] == "CREATE TABLE" and "readVersion" not in ci


def test_removes_get_timestamp_and_extended_metadata(log, table):
    append(log, fake_add("p=a/1.parquet", "a"))
    t = Transaction(log, "DELETE")
    t.read_whole_table()
    t.remove_files([RemoveFile("p=a/1.parquet", partition_values={"p": "a"}, size=110)])
    t.commit()
    r = [a["remove"] for a in commit_actions(table, 2) if "remove" in a][0]
    assert isinstance(r["deletionTimestamp"], int) and r["extendedFileMetadata"] is True
    ci = commit_info(table, 2)
    assert ci["isBlindAppend"] is False
    assert Table(table).files().num_rows == 0


def test_remove_from_add_carries_everything(log, table):
    append(log, fake_add("p=a/1.parquet", "a"))
    add = DeltaLog.for_table(table).snapshot().add_files()[0]
    t = Transaction(log, "DELETE")
    t.remove_files([add])
    t.commit()
    r = [a["remove"] for a in commit_actions(table, 2) if "remove" in a][0]
    assert r["partitionValues"] == {"p": "a"} and r["size"] == add.size and r["dataChange"] is True


# --- writer rules: nothing is written ------------------------------------------------------------

def _unchanged(table, before):
    assert latest_version(table) == before


@pytest.mark.parametrize("build, match", [
    (lambda t: t.add_files([fake_add("p=a/1.parquet", "a"), fake_add("p=a/1.parquet", "a")]), "added twice"),
    (lambda t: t.remove_files([RemoveFile("x"), RemoveFile("x")]), "removed twice"),
    (lambda t: t.add_files([fake_add("p=a/1.parquet")]), "partitionValues"),
    (lambda t: t.add_files([fake_add("p=a/1.parquet", "a", deletion_vector=DeletionVectorDescriptor.from_dict(
        {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
         "sizeInBytes": 40, "cardinality": 6}))]), "deletionVectors"),
    (lambda t: t.set_domain_metadata(DomainMetadata("app.x", "{}")), "domainMetadata"),
    (lambda t: t.update_protocol(Protocol(1, 1)), "drops table features"),
])
def test_invalid_commits_write_nothing(log, table, build, match):
    t = Transaction(log, "WRITE")
    build(t)
    with pytest.raises(InvalidTableOperationError, match=match):
        t.commit()
    _unchanged(table, 0)


def test_metadata_and_protocol_once(log):
    t = Transaction(log, "X")
    t.update_protocol(Protocol(1, 2))
    with pytest.raises(InvalidTableOperationError):
        t.update_protocol(Protocol(1, 3))
    t.update_metadata(log.snapshot().metadata)
    with pytest.raises(InvalidTableOperationError):
        t.update_metadata(log.snapshot().metadata)


def test_commit_once(log):
    t = Transaction(log, "WRITE")
    t.add_files([fake_add("p=a/1.parquet", "a")])
    t.commit()
    with pytest.raises(InvalidTableOperationError, match="already committed"):
        t.commit()


def test_append_only(tmp_path):
    path = str(tmp_path / "ao")
    create_table(path, "id BIGINT", properties={"delta.appendOnly": "true"})
    log = DeltaLog.for_table(path)
    append(log, fake_add("1.parquet"))
    t = Transaction(log, "DELETE")
    t.remove_files([RemoveFile("1.parquet")])
    with pytest.raises(InvalidTableOperationError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY.*only allow appends"):
        t.commit()
    _unchanged(path, 1)
    # rearranging data (dataChange=false) is allowed
    t = Transaction(log, "OPTIMIZE")
    t.remove_files([RemoveFile("1.parquet", data_change=False)])
    t.add_files([fake_add("2.parquet", data_change=False)])
    assert t.commit() == 2
    assert commit_info(path, 2)["isolationLevel"] == "SnapshotIsolation"


def test_unsupported_writer_feature_refused(tmp_path):
    path = tmp_path / "future"
    (path / "_delta_log").mkdir(parents=True)
    (path / "_delta_log" / f"{0:020d}.json").write_text("\n".join([
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                 "writerFeatures": ["appendOnly", "someFutureWriterFeature"]}}),
        json.dumps({"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}},
                                 "schemaString": '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}',
                                 "partitionColumns": [], "configuration": {}}}),
    ]) + "\n")
    log = DeltaLog.for_table(str(path))
    assert log.snapshot().version == 0  # readable
    with pytest.raises(UnsupportedFeatureError, match="someFutureWriterFeature"):
        Transaction(log, "WRITE")
    assert sorted(os.listdir(path / "_delta_log")) == [f"{0:020d}.json"]


def test_protocol_cannot_be_lowered(tmp_path):
    path = str(tmp_path / "cdf")
    create_table(path, "id BIGINT", properties={"delta.enableChangeDataFeed": "true"})
    log = DeltaLog.for_table(path)
    t = Transaction(log, "UPGRADE PROTOCOL")
    t.update_protocol(Protocol(1, 3))
    with pytest.raises(InvalidTableOperationError):
        t.commit()
    _unchanged(path, 0)


# --- races between two transactions ---------------------------------------------------------------

def test_blind_appends_rebase(log, table):
    t1, t2 = Transaction(log, "WRITE"), Transaction(log, "WRITE")
    t1.add_files([fake_add("p=a/1.parquet", "a")])
    t2.add_files([fake_add("p=a/2.parquet", "a")])
    assert t1.commit() == 1
    assert t2.commit() == 2
    assert t2.attempts == 2
    assert commit_info(table, 2)["readVersion"] == 0
    assert sorted(Table(table).files(["path"]).column("path").to_pylist()) == ["p=a/1.parquet", "p=a/2.parquet"]


def test_delete_delete(log, table):
    append(log, fake_add("p=a/1.parquet", "a"), fake_add("p=a/2.parquet", "a"))
    t1, t2 = Transaction(log, "DELETE"), Transaction(log, "DELETE")
    for t in (t1, t2):
        t.read_predicate(lambda pv: pv["p"] == "a")
        t.read_files([a for a in log.snapshot().add_files() if a.path == "p=a/1.parquet"])
        t.remove_files([RemoveFile("p=a/1.parquet")])
    assert t1.commit() == 2
    with pytest.raises(ConcurrentDeleteReadException):
        t2.commit()
    # without having read it (a blind delete), the loser sees delete-delete
    append(log, fake_add("p=b/3.parquet", "b"))
    t1, t2 = Transaction(log, "DELETE"), Transaction(log, "DELETE")
    for t in (t1, t2):
        t.remove_files([RemoveFile("p=b/3.parquet")])
    t1.commit()
    with pytest.raises(ConcurrentDeleteDeleteException, match="3.parquet"):
        t2.commit()
    assert latest_version(table) == 4
    assert Table(table).files(["path"]).column("path").to_pylist() == ["p=a/2.parquet"]


def test_delete_of_read_file(log, table):
    append(log, fake_add("p=a/1.parquet", "a"), fake_add("p=b/2.parquet", "b"))
    snap = log.snapshot()
    reader = Transaction(log, "UPDATE", snapshot=snap)
    reader.read_predicate(lambda pv: pv["p"] == "b")
    reader.read_files(snap.files_table().filter([p == "p=b/2.parquet" for p in snap.files_table(["path"]).column("path").to_pylist()]))
    reader.remove_files([RemoveFile("p=b/2.parquet")])
    reader.add_files([fake_add("p=b/2b.parquet", "b")])
    deleter = Transaction(log, "DELETE", snapshot=snap)
    deleter.remove_files([RemoveFile("p=b/2.parquet")])
    deleter.commit()
    with pytest.raises(ConcurrentDeleteReadException, match="2.parquet"):
        reader.commit()
    assert latest_version(table) == 2


@pytest.mark.parametrize("level, blind_winner, conflicts", [
    ("WriteSerializable", True, False),
    ("Serializable", True, True),
    ("WriteSerializable", False, True),
])
def test_append_into_read_partition(log, table, level, blind_winner, conflicts):
    append(log, fake_add("p=a/1.parquet", "a"))
    snap = log.snapshot()
    deleter = Transaction(log, "DELETE", snapshot=snap, isolation_level=level)
    deleter.read_predicate(lambda pv: pv["p"] == "a")
    deleter.read_files(snap.add_files())
    deleter.remove_files([RemoveFile("p=a/1.parquet")])
    writer = Transaction(log, "MERGE" if not blind_winner else "WRITE", snapshot=snap)
    if not blind_winner:
        writer.read_predicate(lambda pv: pv["p"] == "z")
    writer.add_files([fake_add("p=a/new.parquet", "a")])
    writer.commit()
    if conflicts:
        with pytest.raises(ConcurrentAppendException, match="p=a"):
            deleter.commit()
    else:
        assert deleter.commit() == 3


def test_append_into_other_partition_is_fine(log, table):
    append(log, fake_add("p=a/1.parquet", "a"))
    snap = log.snapshot()
    deleter = Transaction(log, "DELETE", snapshot=snap, isolation_level="Serializable")
    deleter.read_predicate(lambda pv: pv["p"] == "a")
    deleter.remove_files([RemoveFile("p=a/1.parquet")])
    writer = Transaction(log, "MERGE", snapshot=snap)
    writer.read_predicate(lambda pv: pv["p"] == "b")
    writer.add_files([fake_add("p=b/new.parquet", "b")])
    writer.commit()
    assert deleter.commit() == 3


def test_table_isolation_level_property(tmp_path):
    path = str(tmp_path / "ser")
    create_table(path, "id BIGINT, p STRING", ["p"], {"delta.isolationLevel": "serializable"})
    log = DeltaLog.for_table(path)
    assert log.snapshot().configuration["delta.isolationLevel"] == "Serializable"
    reader = Transaction(log, "UPDATE")
    reader.read_predicate(lambda pv: pv["p"] == "a")
    reader.add_files([fake_add("p=a/x.parquet", "a")])
    append(log, fake_add("p=a/1.parquet", "a"))
    with pytest.raises(ConcurrentAppendException):
        reader.commit()


def test_compaction_does_not_conflict_with_appends(log, table):
    append(log, fake_add("p=a/1.parquet", "a"), fake_add("p=a/2.parquet", "a"))
    snap = log.snapshot()
    compact = Transaction(log, "OPTIMIZE", snapshot=snap)
    compact.read_predicate(lambda pv: pv["p"] == "a")
    compact.read_files(snap.add_files())
    compact.remove_files([a.remove(1, data_change=False) for a in snap.add_files()])
    compact.add_files([fake_add("p=a/big.parquet", "a", n=20, data_change=False)])
    other = Transaction(log, "MERGE", snapshot=snap)
    other.read_predicate(lambda pv: pv["p"] == "b")
    other.add_files([fake_add("p=a/3.parquet", "a")])
    other.commit()
    append(log, fake_add("p=a/4.parquet", "a"))
    assert compact.commit() == 4
    assert commit_info(table, 4)["isolationLevel"] == "SnapshotIsolation"
    assert sorted(Table(table).files(["path"]).column("path").to_pylist()) == \
        ["p=a/3.parquet", "p=a/4.parquet", "p=a/big.parquet"]


def test_metadata_changed(log, table):
    t = Transaction(log, "WRITE")
    t.add_files([fake_add("p=a/1.parquet", "a")])
    set_properties(log, {"delta.appendOnly": "true"})
    with pytest.raises(MetadataChangedException, match="SET TBLPROPERTIES"):
        t.commit()
    assert latest_version(table) == 1


def test_same_app_id(log, table):
    t1, t2 = Transaction(log, "STREAMING UPDATE"), Transaction(log, "STREAMING UPDATE")
    assert t1.txn_version("stream-1") is None
    for i, t in enumerate((t1, t2)):
        t.set_txn("stream-1", 7)
        t.add_files([fake_add(f"p=a/{i}.parquet", "a")])
    t1.commit()
    assert log.snapshot().txn_version("stream-1") == 7
    with pytest.raises(ConcurrentTransactionException, match="stream-1"):
        t2.commit()
    # a different appId rebases fine
    t3, t4 = Transaction(log, "W"), Transaction(log, "W")
    t3.set_txn("a", 1)
    t4.set_txn("b", 1)
    t3.commit()
    assert t4.commit() == 3


def test_concurrent_create(tmp_path):
    path = str(tmp_path / "new")
    from tahoe.protocol.actions import Metadata

    log = DeltaLog.for_table(path)
    t1, t2 = Transaction(log, "CREATE TABLE"), Transaction(log, "CREATE TABLE")
    assert t1.read_version == -1
    schema = '{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}'
    for t in (t1, t2):
        t.update_metadata(Metadata("id-" + t.txn_id, schema))
    assert t1.commit() == 0
    with pytest.raises(ProtocolChangedException):
        t2.commit()
    assert latest_version(path) == 0


def test_retries_exhausted(log, table):
    t = Transaction(log, "WRITE", max_retries=0)
    t.add_files([fake_add("p=a/1.parquet", "a")])
    append(log, fake_add("p=a/2.parquet", "a"))
    with pytest.raises(CommitFailedException):
        t.commit()


# --- row tracking, in-commit timestamps, identity -------------------------------------------------

def _row_tracked(tmp_path) -> DeltaLog:
    path = str(tmp_path / "rt")
    create_table(path, "id BIGINT, p STRING", ["p"], {"delta.enableRowTracking": "true"})
    return DeltaLog.for_table(path)


def test_row_tracking_assigns_and_rebases(tmp_path):
    log = _row_tracked(tmp_path)
    snap = log.snapshot()
    assert snap.supports_feature("rowTracking") and snap.supports_feature("domainMetadata")
    assert snap.configuration["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    t1, t2 = Transaction(log, "WRITE"), Transaction(log, "WRITE")
    t1.add_files([fake_add("p=a/1.parquet", "a", n=10), fake_add("p=a/2.parquet", "a", n=5)])
    t2.add_files([fake_add("p=a/3.parquet", "a", n=7)])
    assert t1.commit() == 1
    assert t2.commit() == 2
    snap = log.snapshot()
    rows = {a.path: (a.base_row_id, a.default_row_commit_version) for a in snap.add_files()}
    assert rows == {"p=a/1.parquet": (0, 1), "p=a/2.parquet": (10, 1), "p=a/3.parquet": (15, 2)}
    assert snap.row_id_high_water_mark == 21
    dm = [a["domainMetadata"] for a in commit_actions(log.table_root, 2) if "domainMetadata" in a]
    assert dm == [{"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":21}', "removed": False}]
    # removes carry their add's baseRowId, even when built without it
    t = Transaction(log, "DELETE")
    t.remove_files([RemoveFile("p=a/3.parquet")])
    t.commit()
    r = [a["remove"] for a in commit_actions(log.table_root, 3) if "remove" in a][0]
    assert r["baseRowId"] == 15 and r["defaultRowCommitVersion"] == 2


def test_row_tracking_needs_num_records(tmp_path):
    from tahoe.protocol.actions import AddFile

    log = _row_tracked(tmp_path)
    t = Transaction(log, "WRITE")
    t.add_files([AddFile("p=a/1.parquet", {"p": "a"}, 1, 1, True, None)])
    with pytest.raises(InvalidTableOperationError, match="numRecords"):
        t.commit()
    _unchanged(log.table_root, 0)


def test_row_tracking_keeps_existing_ids_on_readd(tmp_path):
    log = _row_tracked(tmp_path)
    append(log, fake_add("p=a/1.parquet", "a", n=10))
    add = log.snapshot().add_files()[0]
    import dataclasses

    t = Transaction(log, "COMPUTE STATS")
    t.read_files([add])
    t.add_files([dataclasses.replace(add, data_change=False)])
    t.commit()
    again = log.snapshot().add_files()[0]
    assert (again.base_row_id, again.default_row_commit_version) == (0, 1)


def test_enable_row_tracking_backfills(log, table):
    append(log, fake_add("p=a/1.parquet", "a", n=4), fake_add("p=b/2.parquet", "b", n=6))
    snap = set_properties(log, {"delta.enableRowTracking": "true"})
    assert snap.supports_feature("rowTracking")
    ids = sorted((a.base_row_id, a.base_row_id + a.num_records) for a in snap.add_files())
    assert ids[0][0] == 0 and ids[0][1] == ids[1][0] and snap.row_id_high_water_mark == 9
    actions = commit_actions(table, snap.version)
    assert all(a["add"]["dataChange"] is False for a in actions if "add" in a)


def test_in_commit_timestamps_are_monotonic(tmp_path, monkeypatch):
    path = str(tmp_path / "ict")
    create_table(path, "id BIGINT", properties={"delta.enableInCommitTimestamps": "true"})
    log = DeltaLog.for_table(path)
    t0 = commit_info(path, 0)["inCommitTimestamp"]
    monkeypatch.setattr(in_commit_timestamps, "now_ms", lambda: 1000)  # the clock went backwards
    t1, t2 = Transaction(log, "WRITE"), Transaction(log, "WRITE")
    t1.add_files([fake_add("1.parquet")])
    t2.add_files([fake_add("2.parquet")])
    t1.commit()
    t2.commit()
    stamps = [commit_info(path, v)["inCommitTimestamp"] for v in range(3)]
    assert stamps == [t0, t0 + 1, t0 + 2]
    assert commit_info(path, 2)["timestamp"] == t0 + 2
    assert log.snapshot().timestamp == t0 + 2


def test_enabling_in_commit_timestamps_later(log, table):
    append(log, fake_add("p=a/1.parquet", "a"))
    snap = set_properties(log, {"delta.enableInCommitTimestamps": "true"})
    conf = snap.configuration
    assert conf["delta.inCommitTimestampEnablementVersion"] == "2"
    assert int(conf["delta.inCommitTimestampEnablementTimestamp"]) == commit_info(table, 2)["inCommitTimestamp"]
    assert snap.supports_feature("inCommitTimestamp")


def test_identity_high_water_mark(tmp_path):
    from tahoe.protocol.schema import LONG, STRING, StructField, StructType

    schema = StructType([
        StructField("id", LONG, False, {"delta.identity.start": 1, "delta.identity.step": 1,
                                        "delta.identity.allowExplicitInsert": False}),
        StructField("v", STRING),
    ])
    path = str(tmp_path / "ident")
    snap = create_table(path, schema)
    assert snap.supports_feature("identityColumns")
    log = DeltaLog.for_table(path)
    writer = Transaction(log, "WRITE")
    writer.add_files([fake_add("x.parquet")])
    t = Transaction(log, "WRITE")
    t.add_files([fake_add("1.parquet")])
    t.update_identity_high_water_mark("id", 10)
    t.commit()
    assert log.snapshot().schema.field("id").metadata["delta.identity.highWaterMark"] == 10
    assert commit_info(path, 1)["tags"] == {"delta.identity.schemaUpdate": "true"}
    # a concurrent writer that changes no metadata is not failed by an identity-only update
    assert writer.commit() == 2
    # never backwards
    t = Transaction(log, "WRITE")
    t.update_identity_high_water_mark("id", 5)
    t.commit()
    assert log.snapshot().schema.field("id").metadata["delta.identity.highWaterMark"] == 10
    assert not any("metaData" in a for a in commit_actions(path, 3))


# --- post-commit hook ---------------------------------------------------------------------------

def test_checkpoint_written_every_interval(log, table):
    for i in range(10):
        append(log, fake_add(f"p=a/{i}.parquet", "a"))
    assert os.path.exists(os.path.join(table, "_delta_log", "_last_checkpoint"))
    assert Table(table).files().num_rows == 10


def test_failing_checkpoint_never_fails_the_commit(log, table, monkeypatch, caplog):
    import tahoe.log.checkpoint_policy as cp

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(cp, "checkpoint_if_needed", boom)
    with caplog.at_level(logging.WARNING):
        assert append(log, fake_add("p=a/1.parquet", "a")) == 1
    assert "disk on fire" in caplog.text


def test_read_files_accepts_arrow(log, table):
    append(log, fake_add("p=a/1.parquet", "a"))
    snap = log.snapshot()
    t = Transaction(log, "DELETE", snapshot=snap)
    t.read_files(snap.files_table(["path"]))
    t.remove_files([RemoveFile("p=a/1.parquet")])
    other = Transaction(log, "DELETE", snapshot=snap)
    other.remove_files([RemoveFile("p=a/1.parquet")])
    other.commit()
    with pytest.raises(ConcurrentDeleteReadException):
        t.commit()


def test_facade_transaction(table):
    t = Table(table)
    txn = t.transaction("WRITE", {"mode": "Append"})
    txn.add_files([fake_add("p=a/1.parquet", "a")])
    assert txn.commit() == 1
    assert t.refresh().files().num_rows == 1


def test_partitioning_changes_only_with_overwrite(log, table):
    import dataclasses

    append(log, fake_add("p=a/1.parquet", "a"))
    snap = log.snapshot()
    md = dataclasses.replace(snap.metadata, partition_columns=("id",))
    t = Transaction(log, "WRITE")
    t.update_metadata(md)
    with pytest.raises(InvalidTableOperationError, match="partition columns"):
        t.commit()
    _unchanged(table, 1)
    t = Transaction(log, "WRITE", {"mode": "Overwrite"})
    t.read_whole_table()
    t.update_metadata(md)
    t.remove_files(snap.add_files())
    t.add_files([dataclasses.replace(fake_add("id=1/x.parquet"), partition_values={"id": "1"})])
    assert t.commit() == 2
    assert log.snapshot().partition_columns == ["id"]


def test_in_commit_timestamp_enablement_across_replace_and_file_times(log, table):
    """The enabling commit's timestamp is after the previous commit's file time (even one in the
    future), is the first action's first field, and the enablement properties survive a CREATE OR
    REPLACE that keeps the feature on (delta-spark's InCommitTimestampUtils); the version
    checksum records each version's inCommitTimestamp."""
    append(log, fake_add("p=a/1.parquet", "a"))
    future = os.stat(os.path.join(table, "_delta_log", f"{1:020d}.json")).st_mtime + 3600
    os.utime(os.path.join(table, "_delta_log", f"{1:020d}.json"), (future, future))
    set_properties(log, {"delta.enableInCommitTimestamps": "true"})
    first = commit_actions(table, 2)[0]
    assert list(first) == ["commitInfo"] and list(first["commitInfo"])[0] == "inCommitTimestamp"
    ict2 = first["commitInfo"]["inCommitTimestamp"]
    assert ict2 > int(future * 1000)
    create_table(table, "id BIGINT, p STRING", ["p"], mode="overwrite",
                 properties={"delta.enableInCommitTimestamps": "true"})
    conf = DeltaLog.for_table(table).snapshot().configuration
    assert conf["delta.inCommitTimestampEnablementVersion"] == "2"
    assert conf["delta.inCommitTimestampEnablementTimestamp"] == str(ict2)
    ict3 = commit_info(table, 3)["inCommitTimestamp"]
    assert ict3 > ict2
    with open(os.path.join(table, "_delta_log", f"{3:020d}.crc")) as f:
        assert json.load(f)["inCommitTimestampOpt"] == ict3
    assert [e.timestamp for e in DeltaLog.for_table(table).history()][:2] == [ict3, ict2]


def test_in_commit_timestamp_enablement_properties_come_together(log, table):
    from tahoe.errors import CorruptLogError

    append(log, fake_add("p=a/1.parquet", "a"))
    snap = set_properties(log, {"delta.enableInCommitTimestamps": "true"})
    md = snap.metadata.to_dict()
    del md["configuration"]["delta.inCommitTimestampEnablementTimestamp"]
    with open(os.path.join(table, "_delta_log", f"{3:020d}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {"inCommitTimestamp": 1, "operation": "MANUAL"}}) + "\n")
        f.write(json.dumps({"metaData": md}) + "\n")
    with pytest.raises(CorruptLogError, match="both set or both absent"):
        DeltaLog.for_table(table).history()
