"""delta-spark's ConflictChecker rules, each shown with two real transactions on a real table:
both open on the same version, the winner commits first, then the loser's commit either raises
the exception delta-spark raises or commits on top of the winner the way delta-spark resolves it.

Oracles: the expected outcome of each rule as delta-spark's ConflictChecker /
OptimisticTransaction define it (exception class, or a commit whose actions are hand-derived from
the two transactions), and delta-rs reading the resolved table."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pyarrow as pa
import pytest

from tahoe.errors import (
    ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
    ConcurrentTransactionException, MetadataChangedException,
)
from tahoe.log import DeltaLog
from tahoe.protocol.actions import DomainMetadata
from tahoe.txn import Transaction, create_table, set_properties
from tests.txn._helpers import commit_actions, commit_info, fake_add


def _table(tmp_path, name="t", partitioned=False, properties=None) -> str:
    path = str(tmp_path / name)
    create_table(path, "id BIGINT, p STRING", ["p"] if partitioned else [], properties=properties)
    return path


def _append(path: str, *adds, operation="WRITE", reads=None) -> int:
    """One commit adding `adds`; `reads`: None (a blind append) or "all" (it read the table)."""
    txn = Transaction(DeltaLog.for_table(path), operation, {"mode": "Append"})
    if reads == "all":
        txn.read_whole_table()
    txn.add_files(adds)
    return txn.commit()


def _open(path: str, operation: str = "WRITE", **params) -> Transaction:
    return Transaction(DeltaLog.for_table(path), operation, params or {"mode": "Append"})


def _files(path: str) -> list[str]:
    return sorted(DeltaLog.for_table(path).snapshot().files_table(["path"]).column("path").to_pylist())


def _add_of(path: str, file: str):
    return next(a for a in DeltaLog.for_table(path).snapshot().add_files() if a.path == file)


# --- checkForAddedFilesThatShouldHaveBeenReadByCurrentTxn ----------------------------------

class TestAddedFiles:
    def test_unpartitioned_table_any_added_file_conflicts_with_a_non_blind_append(self, tmp_path):
        """A transaction that removes a file it read (no partition predicate) on an unpartitioned
        table: delta-spark checks every file a non-blind winner added (the table is
        unpartitioned) → ConcurrentAppendException."""
        path = _table(tmp_path)
        _append(path, fake_add("a.parquet"))
        loser = _open(path, "DELETE", predicate="[]")
        a = _add_of(path, "a.parquet")
        loser.read_files([a])
        loser.remove_files([a])
        _append(path, fake_add("b.parquet"), operation="MERGE", reads="all")   # not a blind append
        with pytest.raises(ConcurrentAppendException, match="b.parquet"):
            loser.commit()
        assert _files(path) == ["a.parquet", "b.parquet"]

    @pytest.mark.parametrize("level, conflicts", [("WriteSerializable", False), ("Serializable", True)])
    def test_blind_append_winner_counts_only_at_serializable(self, tmp_path, level, conflicts):
        path = _table(tmp_path, properties={"delta.isolationLevel": level})
        _append(path, fake_add("a.parquet"))
        loser = _open(path, "DELETE", predicate="[]")
        a = _add_of(path, "a.parquet")
        loser.read_files([a])
        loser.remove_files([a])
        _append(path, fake_add("b.parquet"))                                    # blind append
        if conflicts:
            with pytest.raises(ConcurrentAppendException):
                loser.commit()
        else:
            loser.commit()
            assert _files(path) == ["b.parquet"]

    def test_partitioned_table_only_read_partitions_count(self, tmp_path):
        path = _table(tmp_path, partitioned=True)
        ok = _open(path, "DELETE", predicate="p = '1'")
        ok.read_predicate(lambda pv: pv.get("p") == "1")
        bad = _open(path, "DELETE", predicate="p = '2'")
        bad.read_predicate(lambda pv: pv.get("p") == "2")
        _append(path, fake_add("p=2/x.parquet", p="2"), operation="MERGE", reads="all")
        ok.add_files([fake_add("p=1/y.parquet", p="1")])
        ok.commit()
        bad.add_files([fake_add("p=2/z.parquet", p="2")])
        with pytest.raises(ConcurrentAppendException, match=r"p=2"):
            bad.commit()

    def test_metadata_change_is_never_snapshot_isolation(self, tmp_path):
        """ADD CONSTRAINT reads the whole table and changes only metadata: it is checked at the
        table's level (WriteSerializable, with a metadata change: blind appends count too), not
        downgraded to SnapshotIsolation — a concurrent append of rows it never checked fails it."""
        path = _table(tmp_path)
        log = DeltaLog.for_table(path)
        snap = log.snapshot()
        loser = Transaction(log, "ADD CONSTRAINT", {"name": "pos", "expr": "id > 0"}, snapshot=snap)
        loser.read_whole_table()
        md = snap.metadata
        conf = dict(md.configuration, **{"delta.constraints.pos": "id > 0"})
        loser.update_metadata(dataclasses.replace(md, configuration=conf))
        _append(path, fake_add("a.parquet"))                                   # blind append
        with pytest.raises(ConcurrentAppendException):
            loser.commit()
        assert "delta.constraints.pos" not in log.snapshot().configuration

    @pytest.mark.parametrize("operation, level, conflicts", [
        ("WRITE", "WriteSerializable", True),      # a data-changing operation: not downgraded
        ("OPTIMIZE", "WriteSerializable", False),  # compaction: SnapshotIsolation
        ("WRITE", "Serializable", False),          # Serializable downgrades any no-data-change commit
    ])
    def test_no_data_change_downgrade(self, tmp_path, operation, level, conflicts):
        path = _table(tmp_path, partitioned=True, properties={"delta.isolationLevel": level})
        _append(path, fake_add("p=1/a.parquet", p="1"))
        loser = _open(path, operation)
        a = _add_of(path, "p=1/a.parquet")
        loser.read_predicate(lambda pv: pv.get("p") == "1")
        loser.read_files([a])
        loser.remove_files([a.remove(1, data_change=False)])
        loser.add_files([fake_add("p=1/compacted.parquet", p="1", data_change=False)])
        _append(path, fake_add("p=1/b.parquet", p="1"), operation="MERGE", reads="all")
        if conflicts:
            with pytest.raises(ConcurrentAppendException):
                loser.commit()
        else:
            v = loser.commit()
            assert commit_info(path, v)["isolationLevel"] == "SnapshotIsolation"
            assert _files(path) == ["p=1/b.parquet", "p=1/compacted.parquet"]

    def test_cdc_files_make_a_commit_not_blind(self, tmp_path):
        from tahoe.protocol.actions import AddCDCFile

        path = _table(tmp_path, properties={"delta.enableChangeDataFeed": "true"})
        loser = _open(path)
        loser.add_files([fake_add("a.parquet")])
        loser.add_cdc_files([AddCDCFile("_change_data/c.parquet", {}, 10, False)])
        _append(path, fake_add("b.parquet"), operation="MERGE", reads="all")
        with pytest.raises(ConcurrentAppendException):
            loser.commit()


# --- deletes ------------------------------------------------------------------------------

class TestDeletes:
    def test_deleted_file_the_loser_read(self, tmp_path):
        path = _table(tmp_path)
        _append(path, fake_add("a.parquet"), fake_add("b.parquet"))
        loser = _open(path, "UPDATE")
        loser.read_files([_add_of(path, "a.parquet")])
        loser.add_files([fake_add("c.parquet")])
        winner = _open(path, "DELETE")
        winner.remove_files([_add_of(path, "a.parquet")])
        winner.commit()
        with pytest.raises(ConcurrentDeleteReadException, match="a.parquet"):
            loser.commit()

    def test_deleted_by_both(self, tmp_path):
        path = _table(tmp_path)
        _append(path, fake_add("a.parquet"), fake_add("b.parquet"))
        txns = [_open(path, "DELETE") for _ in range(2)]
        for t in txns:
            t.remove_files([_add_of(path, "a.parquet")])
        txns[0].commit()
        with pytest.raises(ConcurrentDeleteDeleteException, match="a.parquet"):
            txns[1].commit()


# --- application transactions and domains ----------------------------------------------------

def test_same_application_transaction_id(tmp_path):
    path = _table(tmp_path)
    a, b = _open(path), _open(path)
    for t, f in ((a, "a.parquet"), (b, "b.parquet")):
        t.set_txn("stream-1", 7)
        t.add_files([fake_add(f)])
    a.commit()
    with pytest.raises(ConcurrentTransactionException, match="stream-1"):
        b.commit()


def test_domain_metadata(tmp_path):
    path = _table(tmp_path, properties={"delta.feature.domainMetadata": "supported"})
    a, b, c = _open(path), _open(path), _open(path)
    a.set_domain_metadata(DomainMetadata("app.x", '{"v":1}'))
    b.set_domain_metadata(DomainMetadata("app.x", '{"v":2}'))
    c.set_domain_metadata(DomainMetadata("app.y", '{"v":3}'))
    a.commit()
    with pytest.raises(ConcurrentTransactionException, match="app.x"):
        b.commit()
    c.commit()
    domains = DeltaLog.for_table(path).snapshot().domain_metadata
    assert domains["app.x"].configuration == '{"v":1}' and domains["app.y"].configuration == '{"v":3}'


# --- row tracking -------------------------------------------------------------------------

def _base_row_ids(path: str) -> dict[str, tuple[int, int]]:
    t = DeltaLog.for_table(path).snapshot().files_table(["path", "baseRowId", "defaultRowCommitVersion"])
    return {p: (b, d) for p, b, d in zip(*(t.column(c).to_pylist() for c in t.column_names))}


def test_row_ids_of_the_loser_are_reassigned_after_the_winners(tmp_path):
    path = _table(tmp_path, properties={"delta.enableRowTracking": "true"})
    a, b = _open(path), _open(path)
    a.add_files([fake_add("a.parquet", n=10)])
    b.add_files([fake_add("b.parquet", n=5)])
    va = a.commit()
    vb = b.commit()
    # a: rows 0..9 at version va; b: rows 10..14 at version vb (hand-derived)
    assert _base_row_ids(path) == {"a.parquet": (0, va), "b.parquet": (10, vb)}
    hwm = [x for x in commit_actions(path, vb) if "domainMetadata" in x][0]["domainMetadata"]
    assert json.loads(hwm["configuration"]) == {"rowIdHighWaterMark": 14}


def _enable_row_tracking_txn(path: str) -> Transaction:
    """What table_ops.set_properties does to enable row tracking, opened but not committed:
    every file re-added with row ids (dataChange=false) and the property set, in one commit."""
    log = DeltaLog.for_table(path)
    snap = log.snapshot()
    txn = Transaction(log, "SET TBLPROPERTIES", {"properties": {"delta.enableRowTracking": "true"}},
                      snapshot=snap)
    missing = [a for a in snap.add_files() if a.base_row_id is None]
    txn.read_files(missing)
    txn.add_files(dataclasses.replace(a, data_change=False) for a in missing)
    txn.update_metadata(dataclasses.replace(
        snap.metadata, configuration=dict(snap.metadata.configuration, **{"delta.enableRowTracking": "true"})))
    return txn


def test_enabling_row_tracking_conflicts_with_append_of_files_without_row_ids(tmp_path):
    path = _table(tmp_path, partitioned=True)
    _append(path, fake_add("p=1/a.parquet", p="1"))
    enabling = _enable_row_tracking_txn(path)
    _append(path, fake_add("p=2/b.parquet", p="2"))            # blind append, no baseRowId
    with pytest.raises(ConcurrentAppendException, match="row ids"):
        enabling.commit()
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.configuration.get("delta.enableRowTracking") is None


def test_append_after_row_tracking_was_enabled_concurrently(tmp_path):
    """The winner enables row tracking (protocol + property); the loser's blind append is
    resolved as delta-spark resolves it: it commits with row ids after the winner's, tagged
    delta.rowTracking.preserved=false."""
    path = _table(tmp_path)
    _append(path, fake_add("a.parquet", n=4))
    loser = _open(path)
    loser.add_files([fake_add("b.parquet", n=3)])
    set_properties(path, {"delta.enableRowTracking": "true"})   # re-adds a.parquet: rows 0..3
    v = loser.commit()
    ids = _base_row_ids(path)
    assert ids["a.parquet"][0] == 0 and ids["b.parquet"] == (4, v)
    assert commit_info(path, v)["tags"]["delta.rowTracking.preserved"] == "false"


# --- metadata conflicts ---------------------------------------------------------------------

def test_winner_enabling_deletion_vectors_is_resolved(tmp_path):
    path = _table(tmp_path)
    _append(path, fake_add("a.parquet"), fake_add("b.parquet"))
    loser = _open(path, "DELETE", predicate="[]")
    loser.read_whole_table()
    loser.remove_files([_add_of(path, "a.parquet")])
    set_properties(path, {"delta.enableDeletionVectors": "true"})
    loser.commit()
    snap = DeltaLog.for_table(path).snapshot()
    assert snap.configuration["delta.enableDeletionVectors"] == "true"
    assert _files(path) == ["b.parquet"]


@pytest.mark.parametrize("winner_props", [
    {"delta.logRetentionDuration": "interval 2 days"},      # not on delta-spark's allow list
    {"delta.enableDeletionVectors": "false"},                # only enabling is resolved
    {"delta.appendOnly": "true"},
])
def test_other_winner_metadata_changes_conflict(tmp_path, winner_props):
    path = _table(tmp_path)
    loser = _open(path)
    loser.add_files([fake_add("a.parquet")])
    set_properties(path, winner_props)
    with pytest.raises(MetadataChangedException):
        loser.commit()


def test_winner_unsetting_a_property_conflicts(tmp_path):
    from tahoe.txn import unset_properties

    path = _table(tmp_path, properties={"delta.enableDeletionVectors": "true", "owner": "x"})
    loser = _open(path)
    loser.add_files([fake_add("a.parquet")])
    unset_properties(path, ["owner"])
    with pytest.raises(MetadataChangedException):
        loser.commit()


def test_both_changing_metadata_conflicts(tmp_path):
    path = _table(tmp_path)
    snap = DeltaLog.for_table(path).snapshot()
    loser = Transaction(DeltaLog.for_table(path), "SET TBLPROPERTIES", {}, snapshot=snap)
    loser.update_metadata(dataclasses.replace(snap.metadata, configuration={"owner": "me"}))
    set_properties(path, {"delta.enableDeletionVectors": "true"})
    with pytest.raises(MetadataChangedException):
        loser.commit()


def test_concurrent_identity_updates_conflict(tmp_path):
    """Two inserts into an identity column both generated values from the same high-water mark:
    the second must not commit (delta-spark: both have metadata updates → conflict)."""
    from tahoe.protocol.schema import StructField, StructType, PrimitiveType

    path = str(tmp_path / "t")
    schema = StructType([StructField("id", PrimitiveType("long"), True,
                                     {"delta.identity.start": 1, "delta.identity.step": 1,
                                      "delta.identity.allowExplicitInsert": False}),
                         StructField("v", PrimitiveType("string"))])
    create_table(path, schema)
    a, b, c = _open(path), _open(path), _open(path)
    for t, f in ((a, "a.parquet"), (b, "b.parquet")):
        t.add_files([fake_add(f)])
        t.update_identity_high_water_mark("id", 10)           # both generated ids 1..10
    c.add_files([fake_add("c.parquet")])                       # no identity values
    a.commit()
    with pytest.raises(MetadataChangedException):
        b.commit()
    c.commit()                                                 # identity-only winner: tolerated
    assert _files(path) == ["a.parquet", "c.parquet"]


_READ_ROWS = r"""
import json, sys, os
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
dt = DeltaTable(sys.argv[1])
t = pa.table(QueryBuilder().register("t", dt).execute("select id, p from t order by id").read_all())
sys.stdout.write(json.dumps({"rows": t.to_pylist(), "mode": dt.metadata().configuration.get("delta.columnMapping.mode")}) + "\n")
sys.stdout.flush()
os._exit(0)
"""


def test_winner_enabling_column_mapping_is_resolved_and_delta_rs_reads_it(tmp_path):
    """An append racing `delta.columnMapping.mode=name`: delta-spark accepts the winner (name
    mapping, ids and physical names added to the same columns) and the append commits on top;
    delta-rs reads every row of both."""
    from tahoe.write import write_data_files, write_table

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}))
    log = DeltaLog.for_table(path)
    snap = log.snapshot()
    loser = Transaction(log, "WRITE", {"mode": "Append"}, snapshot=snap)
    loser.add_files(write_data_files(log.store, log.table_root,
                                     pa.table({"id": pa.array([3], pa.int64()), "p": ["c"]}),
                                     snap.schema, configuration=snap.configuration))
    set_properties(path, {"delta.columnMapping.mode": "name"})
    loser.commit()
    proc = subprocess.run([sys.executable, "-c", _READ_ROWS, path], capture_output=True, text=True, timeout=120)
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert out["mode"] == "name"
    assert out["rows"] == [{"id": 1, "p": "a"}, {"id": 2, "p": "b"}, {"id": 3, "p": "c"}]
