"""The conflict checker in isolation: the current transaction's summary against one winning
commit's actions, over the matrix of what each side read and wrote (delta-spark's
ConflictChecker semantics)."""

from __future__ import annotations

import json

import pytest

from tahoe.errors import (
    ConcurrentAppendException, ConcurrentDeleteDeleteException, ConcurrentDeleteReadException,
    ConcurrentTransactionException, MetadataChangedException, ProtocolChangedException,
    UnsupportedFeatureError,
)
from tahoe.protocol.actions import Protocol
from tahoe.txn.conflicts import TransactionSummary, WinningCommit, check_conflicts, isolation_level_for_commit
from tahoe.txn.identity_columns import IDENTITY_UPDATE_TAG


def commit_info(op="WRITE", blind=False, **extra):
    return {"commitInfo": {"operation": op, "isBlindAppend": blind, **extra}}


def add(path, **pv):
    return {"add": {"path": path, "partitionValues": dict(pv), "size": 1, "modificationTime": 0,
                    "dataChange": True}}


def remove(path, **pv):
    return {"remove": {"path": path, "partitionValues": dict(pv), "dataChange": True}}


def winner(*actions, version=5):
    return WinningCommit.from_actions(version, list(actions))


BLIND_APPEND = winner(commit_info(blind=True), add("p=1/a.parquet", p="1"))
NON_BLIND_ADD = winner(commit_info("MERGE"), add("p=1/b.parquet", p="1"))
DELETE_X = winner(commit_info("DELETE"), remove("p=1/x.parquet", p="1"))
METADATA = winner(commit_info("SET TBLPROPERTIES"), {"metaData": {"id": "t", "schemaString": "{}"}})
PROTOCOL = winner(commit_info("UPGRADE PROTOCOL"), {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}})
TXN = winner(commit_info(blind=True), {"txn": {"appId": "stream-1", "version": 3}})

PARTITIONED = dict(partition_columns=("p",))


def p_equals(value):
    return lambda pv: pv.get("p") == value


class TestBlindAppends:
    @pytest.mark.parametrize("w", [BLIND_APPEND, NON_BLIND_ADD, DELETE_X, TXN], ids=lambda w: w.operation)
    def test_blind_append_never_conflicts_on_files(self, w):
        txn = TransactionSummary(is_blind_append=True, **PARTITIONED)
        check_conflicts(txn, w)

    @pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
    def test_blind_append_vs_blind_append(self, level):
        check_conflicts(TransactionSummary(isolation_level=level, is_blind_append=True), BLIND_APPEND)


class TestConcurrentAppend:
    def test_write_serializable_ignores_blind_appends(self):
        txn = TransactionSummary(read_predicates=(p_equals("1"),), **PARTITIONED)
        check_conflicts(txn, BLIND_APPEND)

    def test_serializable_sees_blind_appends(self):
        txn = TransactionSummary(isolation_level="Serializable", read_predicates=(p_equals("1"),),
                                 **PARTITIONED)
        with pytest.raises(ConcurrentAppendException, match=r"p=1"):
            check_conflicts(txn, BLIND_APPEND)

    def test_write_serializable_with_metadata_change_sees_blind_appends(self):
        txn = TransactionSummary(read_predicates=(p_equals("1"),), metadata_changed=True, **PARTITIONED)
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, BLIND_APPEND)

    def test_non_blind_add_into_read_partition(self):
        txn = TransactionSummary(read_predicates=(p_equals("1"),), **PARTITIONED)
        with pytest.raises(ConcurrentAppendException, match="version 5 \\(MERGE\\)"):
            check_conflicts(txn, NON_BLIND_ADD)

    def test_add_into_other_partition_is_fine(self):
        txn = TransactionSummary(isolation_level="Serializable", read_predicates=(p_equals("2"),),
                                 **PARTITIONED)
        check_conflicts(txn, NON_BLIND_ADD)
        check_conflicts(txn, BLIND_APPEND)

    def test_whole_table_read_conflicts_with_any_add(self):
        txn = TransactionSummary(read_whole_table=True, **PARTITIONED)
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, NON_BLIND_ADD)

    def test_unpartitioned_table_any_predicate_matches(self):
        txn = TransactionSummary(read_predicates=(lambda pv: False,))
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, NON_BLIND_ADD)

    def test_snapshot_isolation_ignores_adds(self):
        txn = TransactionSummary(isolation_level="SnapshotIsolation", read_whole_table=True, **PARTITIONED)
        check_conflicts(txn, NON_BLIND_ADD)

    def test_predicate_sees_logical_names_under_column_mapping(self):
        w = winner(commit_info("MERGE"), {"add": {"path": "a", "partitionValues": {"col-123": "x"},
                                                  "size": 1, "modificationTime": 0}})
        txn = TransactionSummary(read_predicates=(lambda pv: pv.get("p") == "x",),
                                 partition_columns=("p",), physical_to_logical={"col-123": "p"})
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, w)

    def test_failing_predicate_counts_as_match(self):
        txn = TransactionSummary(read_predicates=(lambda pv: 1 / 0,), **PARTITIONED)
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, NON_BLIND_ADD)

    def test_null_partition_value(self):
        w = winner(commit_info("MERGE"), add("p=__HIVE_DEFAULT_PARTITION__/a", p=""))
        txn = TransactionSummary(read_predicates=(lambda pv: pv["p"] is None,), **PARTITIONED)
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, w)


class TestDeletes:
    def test_delete_of_read_file(self):
        txn = TransactionSummary(read_paths=frozenset({"p=1/x.parquet"}), read_predicates=(p_equals("1"),),
                                 **PARTITIONED)
        with pytest.raises(ConcurrentDeleteReadException, match="x.parquet"):
            check_conflicts(txn, DELETE_X)

    def test_delete_of_unread_file(self):
        txn = TransactionSummary(read_paths=frozenset({"p=1/y.parquet"}), read_predicates=(p_equals("1"),),
                                 **PARTITIONED)
        check_conflicts(txn, DELETE_X)

    def test_whole_table_read_vs_any_delete(self):
        txn = TransactionSummary(read_whole_table=True, **PARTITIONED)
        with pytest.raises(ConcurrentDeleteReadException):
            check_conflicts(txn, DELETE_X)

    def test_delete_delete(self):
        txn = TransactionSummary(removed_paths=frozenset({"p=1/x.parquet"}), **PARTITIONED)
        with pytest.raises(ConcurrentDeleteDeleteException, match="x.parquet"):
            check_conflicts(txn, DELETE_X)

    def test_delete_delete_under_snapshot_isolation(self):
        # compaction (dataChange=false) still may not remove what another writer removed
        txn = TransactionSummary(isolation_level="SnapshotIsolation",
                                 removed_paths=frozenset({"p=1/x.parquet"}), **PARTITIONED)
        with pytest.raises(ConcurrentDeleteDeleteException):
            check_conflicts(txn, DELETE_X)

    def test_compaction_vs_append(self):
        txn = TransactionSummary(isolation_level="SnapshotIsolation",
                                 read_paths=frozenset({"p=1/old.parquet"}),
                                 read_predicates=(p_equals("1"),),
                                 removed_paths=frozenset({"p=1/old.parquet"}), **PARTITIONED)
        check_conflicts(txn, BLIND_APPEND)
        check_conflicts(txn, NON_BLIND_ADD)

    def test_path_key_normalizes_both_sides(self):
        txn = TransactionSummary(read_paths=frozenset({"/t/p=1/x.parquet"}),
                                 path_key=lambda p: p if p.startswith("/") else "/t/" + p, **PARTITIONED)
        with pytest.raises(ConcurrentDeleteReadException):
            check_conflicts(txn, DELETE_X)


class TestMetadataProtocolTxn:
    def test_metadata_change_fails_everyone(self):
        for txn in (TransactionSummary(is_blind_append=True), TransactionSummary(read_whole_table=True)):
            with pytest.raises(MetadataChangedException, match="SET TBLPROPERTIES"):
                check_conflicts(txn, METADATA)

    def test_identity_only_metadata_update_is_tolerated(self):
        w = winner(commit_info(tags={IDENTITY_UPDATE_TAG: "true"}),
                   {"metaData": {"id": "t", "schemaString": "{}"}})
        check_conflicts(TransactionSummary(is_blind_append=True), w)
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(metadata_changed=True), w)

    def test_protocol_change_only_conflicts_with_protocol_change(self):
        check_conflicts(TransactionSummary(is_blind_append=True), PROTOCOL)
        with pytest.raises(ProtocolChangedException):
            check_conflicts(TransactionSummary(protocol_changed=True), PROTOCOL)

    def test_winner_dropping_features(self):
        read = Protocol(1, 4)
        w = winner(commit_info(), {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
        with pytest.raises(ProtocolChangedException, match="removed table features"):
            check_conflicts(TransactionSummary(read_protocol=read), w)

    def test_winner_protocol_unsupported(self):
        w = winner(commit_info(), {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                                                "writerFeatures": ["someFutureFeature"]}})
        with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
            check_conflicts(TransactionSummary(is_blind_append=True), w)

    def test_same_app_id(self):
        with pytest.raises(ConcurrentTransactionException, match="stream-1"):
            check_conflicts(TransactionSummary(read_app_ids=frozenset({"stream-1"})), TXN)
        check_conflicts(TransactionSummary(read_app_ids=frozenset({"stream-2"})), TXN)

    def test_domain_clash(self):
        w = winner(commit_info(), {"domainMetadata": {"domain": "app.x", "configuration": "{}"}},
                   {"domainMetadata": {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":9}'}})
        with pytest.raises(ConcurrentTransactionException, match="app.x"):
            check_conflicts(TransactionSummary(domains=frozenset({"app.x"})), w)
        # the row tracking domain is rebased, not a conflict
        check_conflicts(TransactionSummary(domains=frozenset({"delta.rowTracking"})), w)
        assert w.row_id_high_water_mark == 9

    def test_check_order_protocol_first(self):
        w = winner(commit_info(), {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
                   {"metaData": {"id": "t", "schemaString": "{}"}})
        with pytest.raises(ProtocolChangedException):
            check_conflicts(TransactionSummary(protocol_changed=True, metadata_changed=True), w)


def test_isolation_level_for_commit():
    assert isolation_level_for_commit(False, "Serializable", "WriteSerializable") == "SnapshotIsolation"
    assert isolation_level_for_commit(True, None, "WriteSerializable") == "WriteSerializable"
    assert isolation_level_for_commit(True, "Serializable", "WriteSerializable") == "Serializable"
    # delta-spark's canDowngradeToSnapshotIsolation: non-file actions (metaData, protocol, txn,
    # domains) never downgrade; at WriteSerializable an operation that changes data does not
    assert isolation_level_for_commit(False, None, "WriteSerializable", only_file_actions=False) == "WriteSerializable"
    assert isolation_level_for_commit(False, None, "Serializable", only_file_actions=False) == "Serializable"
    assert isolation_level_for_commit(False, None, "WriteSerializable", operation="OPTIMIZE") == "SnapshotIsolation"
    assert isolation_level_for_commit(False, None, "WriteSerializable", operation="DELETE") == "WriteSerializable"
    assert isolation_level_for_commit(False, None, "Serializable", operation="DELETE") == "SnapshotIsolation"


class TestNonBlindAppendOnUnpartitionedTable:
    """delta-spark checks a non-blind-append's winners' added files whenever the table (as read)
    is unpartitioned, whatever it read — not only when it recorded a read predicate."""

    def test_remove_without_read_predicate(self):
        txn = TransactionSummary(removed_paths=frozenset({"x.parquet"}))
        with pytest.raises(ConcurrentAppendException):
            check_conflicts(txn, NON_BLIND_ADD)
        check_conflicts(txn, BLIND_APPEND)          # WriteSerializable: blind appends ignored

    def test_partitioned_table_without_read_predicate(self):
        txn = TransactionSummary(removed_paths=frozenset({"p=1/x.parquet"}), **PARTITIONED)
        check_conflicts(txn, NON_BLIND_ADD)


def md(conf=None, schema=None, **kw):
    from tahoe.protocol.actions import Metadata

    schema = schema or {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "s", "type": {"type": "struct", "fields": [
            {"name": "x", "type": "integer", "nullable": True, "metadata": {}}]}, "nullable": True,
         "metadata": {}}]}
    return Metadata(kw.pop("id", "t"), json.dumps(schema), (), dict(conf or {}), **kw)


def md_winner(m):
    return winner(commit_info("SET TBLPROPERTIES"), {"metaData": m.to_dict()})


FULL_PROTOCOL = Protocol(3, 7, ("deletionVectors", "columnMapping"),
                         ("deletionVectors", "columnMapping", "rowTracking", "domainMetadata"))


class TestMetadataResolution:
    """delta-spark's attemptToResolveMetadataConflicts: only enabling DVs / row tracking / name
    column mapping (and the keys that go with them) is accepted from a winner."""

    @pytest.mark.parametrize("change", [
        {"delta.enableDeletionVectors": "true"},
        {"delta.enableRowTracking": "true",
         "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-1",
         "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-1"},
    ])
    def test_allowed_enablement(self, change):
        current = md({"a": "1"})
        res = check_conflicts(TransactionSummary(is_blind_append=True), md_winner(md({"a": "1", **change})),
                              current_metadata=current, current_protocol=FULL_PROTOCOL)
        assert res.row_tracking_enabled == ("delta.enableRowTracking" in change)

    @pytest.mark.parametrize("change", [
        {"delta.enableDeletionVectors": "false"},
        {"delta.appendOnly": "true"},
        {"a": "2"},
        {"delta.rowTracking.materializedRowIdColumnName": "_x"},   # without enabling row tracking
    ])
    def test_other_configuration_changes(self, change):
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(is_blind_append=True), md_winner(md({"a": "1", **change})),
                            current_metadata=md({"a": "1"}), current_protocol=FULL_PROTOCOL)

    def test_enablement_needs_the_feature_in_the_protocol(self):
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(is_blind_append=True),
                            md_winner(md({"delta.enableDeletionVectors": "true"})),
                            current_metadata=md(), current_protocol=Protocol(1, 2))

    def test_removed_key(self):
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(is_blind_append=True), md_winner(md({})),
                            current_metadata=md({"a": "1"}), current_protocol=FULL_PROTOCOL)

    def test_other_fields(self):
        for w in (md(description="new"), md(id="other"),
                  md(schema={"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True,
                                                           "metadata": {}}]})):
            with pytest.raises(MetadataChangedException):
                check_conflicts(TransactionSummary(is_blind_append=True), md_winner(w),
                                current_metadata=md(), current_protocol=FULL_PROTOCOL)

    def test_column_mapping_enablement(self):
        def cm(name, i):
            return {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": name}

        flat = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                             {"name": "v", "type": "string", "nullable": True, "metadata": {}}]}
        mapped = {"type": "struct", "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": cm("id", 1)},
            {"name": "v", "type": "string", "nullable": True, "metadata": cm("v", 2)}]}
        conf = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
        check_conflicts(TransactionSummary(is_blind_append=True), md_winner(md(conf, mapped)),
                        current_metadata=md({}, flat), current_protocol=FULL_PROTOCOL)
        # a nested struct gets ids in its fields too: the column's type differs → conflict
        nested = md({}, None)
        nested_mapped = json.loads(nested.schema_string)
        for i, f in enumerate(nested_mapped["fields"]):
            f["metadata"] = cm(f["name"], i + 1)
        nested_mapped["fields"][1]["type"]["fields"][0]["metadata"] = cm("x", 3)
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(is_blind_append=True), md_winner(md(conf, nested_mapped)),
                            current_metadata=nested, current_protocol=FULL_PROTOCOL)
        # id mode is never resolved
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(is_blind_append=True),
                            md_winner(md({**conf, "delta.columnMapping.mode": "id"}, mapped)),
                            current_metadata=md({}, flat), current_protocol=FULL_PROTOCOL)

    def test_current_metadata_change_always_conflicts(self):
        with pytest.raises(MetadataChangedException):
            check_conflicts(TransactionSummary(metadata_changed=True),
                            md_winner(md({"delta.enableDeletionVectors": "true"})),
                            current_metadata=md(), current_protocol=FULL_PROTOCOL)


def test_enabling_row_tracking_vs_added_files_without_row_ids():
    txn = TransactionSummary(enables_row_tracking=True, metadata_changed=True,
                             read_paths=frozenset({"a"}))
    with pytest.raises(ConcurrentAppendException, match="row ids"):
        check_conflicts(txn, BLIND_APPEND)
    with_ids = winner(commit_info(blind=True), {"add": {**add("b")["add"], "baseRowId": 7}})
    check_conflicts(TransactionSummary(enables_row_tracking=True, metadata_changed=True,
                                       is_blind_append=False, isolation_level="SnapshotIsolation"), with_ids)


def test_summary_invariants():
    with pytest.raises(ValueError):
        TransactionSummary(isolation_level="ReadCommitted")
    with pytest.raises(ValueError):
        TransactionSummary(is_blind_append=True, read_whole_table=True)
