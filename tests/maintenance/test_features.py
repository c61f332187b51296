"""DROP FEATURE (tahoe.maintenance.features, `Table.drop_feature`) and checkpoint protection in log
cleanup (tahoe.log.metadata_cleanup.cleanup_expired_logs).

Oracles: the commits' JSON and the checkpoint parquet files read with pyarrow (what an older
reader would see), the rows written (hand-derived), delta-rs reading the table after the drop,
the parquet footers of rewritten files (pyarrow), the `_delta_log` listing before and after a
cleanup."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import DropFeatureError
from tahoe.log.checkpoints import write_checkpoint
from tahoe.log.metadata_cleanup import cleanup_expired_logs
from tahoe.write import delete_rows
from tests.maintenance.helpers import delta_rs_read, rows


def _log(root: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, "_delta_log")))


def _commit(root: str, v: int) -> list[dict]:
    with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _protocol(root: str):
    p = tahoe.Table(root).protocol
    return p.min_reader_version, p.min_writer_version, set(p.reader_features or ()), set(p.writer_features or ())


def test_drop_deletion_vectors_protects_history_instead_of_truncating_it(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"]}), partition_by=["p"],
                      properties={"delta.enableDeletionVectors": "true"})
    files = tahoe.Table(root).files(["path"])["path"].to_pylist()
    delete_rows(root, {files[0]: [0]})                                        # v1: a deletion vector
    v1_rows = rows(tahoe.Table(root).to_arrow(), ["id", "p"])
    t = tahoe.Table(root).drop_feature("deletionVectors")
    v = t.version
    assert _protocol(root) == (1, 7, set(), {"appendOnly", "invariants", "checkpointProtection"})
    assert t.metadata.configuration == {"delta.requireCheckpointProtectionBeforeVersion": str(v)}
    ops = [_commit(root, i)[0]["commitInfo"]["operation"] for i in range(2, v + 1)]
    assert ops == ["UNSET TBLPROPERTIES", "REORG", "Deletion Vector Tombstones", "DROP FEATURE"]
    assert _commit(root, v)[0]["commitInfo"]["operationParameters"] == {"featureName": "deletionVectors",
                                                                        "truncateHistory": "false"}
    # the protected checkpoints around the downgrade; the one at the downgrade holds no DV and no DV feature
    assert {f"{v - 1:020d}.checkpoint.parquet", f"{v:020d}.checkpoint.parquet"} <= set(_log(root))
    cp = pq.read_table(os.path.join(root, "_delta_log", f"{v:020d}.checkpoint.parquet")).to_pylist()
    assert not any(r["add"] and r["add"].get("deletionVector") for r in cp)
    assert [r["protocol"] for r in cp if r["protocol"]][0]["readerFeatures"] in (None, [])
    # a DV tombstone keeps the purged DV file alive for clients that do not know deletion vectors
    dv_tomb = [a["remove"] for a in _commit(root, v - 1) if "remove" in a]
    assert len(dv_tomb) == 1 and dv_tomb[0]["path"].endswith(".bin") and dv_tomb[0]["dataChange"] is False
    assert os.path.exists(os.path.join(root, *dv_tomb[0]["path"].split("/")))
    # nothing lost: every version reads as before, in tahoe and delta-rs
    assert rows(t.to_arrow(), ["id", "p"]) == v1_rows == [(2, "a"), (3, "b"), (4, "b")]
    assert rows(tahoe.Table(root, version=1).to_arrow(), ["id", "p"]) == v1_rows
    theirs = delta_rs_read([(root, None), (root, 1)], tmp_path)
    assert rows(theirs[0], ["id", "p"]) == rows(theirs[1], ["id", "p"]) == v1_rows
    with pytest.raises(DropFeatureError, match="DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"):
        t.drop_feature("deletionVectors")
    # RESTORE to before the drop: version 1's metaData and deletion vector come back, the protocol is
    # the union of both (delta-spark's merge), and the history stays protected
    t.restore(1)
    assert t.metadata.configuration == {"delta.enableDeletionVectors": "true",
                                        "delta.requireCheckpointProtectionBeforeVersion": str(v)}
    assert _protocol(root) == (3, 7, {"deletionVectors"},
                               {"appendOnly", "invariants", "deletionVectors", "checkpointProtection"})
    assert rows(delta_rs_read([(root, None)], tmp_path)[0], ["id", "p"]) == v1_rows


def test_log_cleanup_never_removes_part_of_the_protected_history(tmp_path):
    def build(root: str, protect: bool) -> None:
        tahoe.write_table(root, pa.table({"id": [0]}), properties={"delta.enableDeletionVectors": "true"})
        for i in range(1, 4):
            tahoe.write_table(root, pa.table({"id": [i]}))
        write_checkpoint(tahoe.DeltaLog.for_table(root), 2)
        if protect:
            tahoe.Table(root).drop_feature("deletionVectors")   # protects everything before its version
        else:
            tahoe.Table(root).unset_properties(["delta.enableDeletionVectors"])
        old = time.time() - 60 * 86400
        for name in _log(root):       # versions <= 2 expire; the retention boundary falls at version 3
            v = int(name.split(".")[0]) if name[0].isdigit() else None
            if v is not None and v <= 2:
                os.utime(os.path.join(root, "_delta_log", name), (old, old))

    guarded, plain = str(tmp_path / "guarded"), str(tmp_path / "plain")
    build(guarded, True)
    build(plain, False)
    before = _log(guarded)
    assert cleanup_expired_logs(tahoe.DeltaLog.for_table(guarded)) == []      # would cut the history in two
    assert _log(guarded) == before
    deleted = cleanup_expired_logs(tahoe.DeltaLog.for_table(plain))           # the same log, unprotected
    # the commits and their version checksums (delta-spark's cleanup deletes both)
    assert sorted(os.path.basename(p) for p in deleted) == [f"{v:020d}.{x}" for v in (0, 1) for x in ("crc", "json")]
    # once the cleanup can reach the protected version in one go, it goes ahead
    prot = int(tahoe.Table(guarded).metadata.configuration["delta.requireCheckpointProtectionBeforeVersion"])
    old = time.time() - 60 * 86400
    for name in _log(guarded):
        if name[0].isdigit() and int(name.split(".")[0]) < prot + 1:
            os.utime(os.path.join(root := guarded, "_delta_log", name), (old, old))
    deleted = {os.path.basename(p) for p in cleanup_expired_logs(tahoe.DeltaLog.for_table(guarded))}
    assert {f"{v:020d}.json" for v in range(prot)} <= deleted
    assert not any(n.endswith(".json") and n[0].isdigit() and int(n[:20]) < prot for n in _log(guarded))
    assert rows(tahoe.Table(guarded).to_arrow()) == [(0,), (1,), (2,), (3,)]


def test_drop_writer_features_and_refusals(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2]}), properties={
        "delta.enableInCommitTimestamps": "true", "delta.enableRowTracking": "true"})
    t = tahoe.Table(root)
    t.add_constraint("pos", "id > 0")
    t.add_feature("vacuumProtocolCheck")
    for name, cls in (("appendOnly", "NONREMOVABLE_FEATURE"), ("deletionVectors", "FEATURE_NOT_PRESENT"),
                      ("nope", "UNSUPPORTED_CLIENT_FEATURE"), ("domainMetadata", "DEPENDENT_FEATURE")):
        with pytest.raises(DropFeatureError, match=f"DELTA_FEATURE_DROP_{cls}"):
            t.drop_feature(name)
    with pytest.raises(DropFeatureError, match="DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE"):
        t.drop_feature("checkConstraints")
    with pytest.raises(DropFeatureError, match="HISTORY_TRUNCATION_NOT_ALLOWED"):
        t.drop_feature("inCommitTimestamp", truncate_history=True)
    t.drop_constraint("pos")
    for name in ("checkConstraints", "inCommitTimestamp", "rowTracking", "domainMetadata"):
        t.drop_feature(name)
        assert name not in _protocol(root)[3]
        assert _commit(root, t.version)[0]["commitInfo"]["operation"] == "DROP FEATURE"
    conf = t.metadata.configuration
    assert conf == {"delta.enableInCommitTimestamps": "false"}          # as delta-spark leaves it
    assert t.snapshot.domain_metadata == {}
    assert t.files(["baseRowId"])["baseRowId"].null_count == 1           # row ids unbackfilled
    assert "checkpointProtection" not in _protocol(root)[3]                # writer features: no history protection
    # a reader-writer feature with TRUNCATE HISTORY: nothing to clean, so it goes at once, unprotected
    t.drop_feature("vacuumProtocolCheck", truncate_history=True)
    assert _protocol(root) == (1, 2, set(), set()) or "vacuumProtocolCheck" not in _protocol(root)[3]
    assert rows(t.to_arrow()) == [(1,), (2,)]
    assert rows(delta_rs_read([(root, None)], tmp_path)[0]) == [(1,), (2,)]


def test_drop_type_widening_and_column_mapping_rewrite_files(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": pa.array([1, 2], pa.int32()), "p": ["a", "b"]}), partition_by=["p"],
                      properties={"delta.enableTypeWidening": "true", "delta.columnMapping.mode": "name"})
    tahoe.write_table(root, pa.table({"id": pa.array([2 ** 40], pa.int64()), "p": ["a"]}), schema_mode="merge")
    t = tahoe.Table(root)
    assert t.schema.field("id").type.simple_string() == "long" and "delta.typeChanges" in t.schema.field("id").metadata
    t.drop_feature("typeWidening")
    assert "delta.typeChanges" not in t.schema.field("id").metadata
    for f in t.file_uris():                       # every file now holds the widened type
        assert pq.read_schema(f).field(0).type == pa.int64()
    t.drop_feature("columnMapping")
    assert t.metadata.configuration.get("delta.columnMapping.mode") is None
    assert not any(k.startswith("delta.columnMapping") for f in t.schema.fields for k in f.metadata)
    for f in t.file_uris():                       # logical names in the files
        assert pq.read_schema(f).names == ["id"]
    want = sorted([(1, "a"), (2, "b"), (2 ** 40, "a")], key=repr)
    assert rows(t.to_arrow(), ["id", "p"]) == want
    assert rows(delta_rs_read([(root, None)], tmp_path)[0], ["id", "p"]) == want
    assert "checkpointProtection" in _protocol(root)[3] and "columnMapping" not in _protocol(root)[3]


def test_drop_checkpoint_protection_needs_the_history_truncated(tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1]}), properties={"delta.enableDeletionVectors": "true"})
    t = tahoe.Table(root).drop_feature("deletionVectors")
    with pytest.raises(DropFeatureError, match="REQUIRES_TRUNCATE_HISTORY"):
        t.drop_feature("checkpointProtection")
    with pytest.raises(DropFeatureError, match="WAIT_FOR_RETENTION_PERIOD"):
        t.drop_feature("checkpointProtection", truncate_history=True)     # the history is younger than 24 h
    old = time.time() - 2 * 86400
    for name in _log(root):
        os.utime(os.path.join(root, "_delta_log", name), (old, old))
    t.drop_feature("checkpointProtection", truncate_history=True)
    assert "checkpointProtection" not in _protocol(root)[3]
    assert "delta.requireCheckpointProtectionBeforeVersion" not in t.metadata.configuration
    assert min(int(n[:20]) for n in _log(root) if n.endswith(".json")) > 1     # history truncated
    assert rows(t.to_arrow()) == [(1,)]


def test_drop_v2_checkpoint_goes_back_to_classic_checkpoints(tmp_path):
    from tahoe.log.checkpoints import write_checkpoint

    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1]}), properties={"delta.checkpointPolicy": "v2"})
    tahoe.write_table(root, pa.table({"id": [2]}))
    write_checkpoint(tahoe.DeltaLog.for_table(root), v2_format="parquet")   # a v2 checkpoint of version 1
    (v2_name,) = [n for n in _log(root) if n.startswith(f"{1:020d}.checkpoint.")]   # UUID-named (policy v2)
    assert v2_name.endswith(".parquet") and len(v2_name.split(".")) == 4
    v2_cp = pq.read_table(os.path.join(root, "_delta_log", v2_name))
    assert any(r for r in v2_cp.column("checkpointMetadata").to_pylist())
    t = tahoe.Table(root).drop_feature("v2Checkpoint")
    # v2Checkpoint is a reader-writer feature (3,7): the drop protects the history; what is left is
    # {appendOnly, invariants, checkpointProtection} -> (1,7) without reader features
    assert _protocol(root) == (1, 7, set(), {"appendOnly", "invariants", "checkpointProtection"})
    assert [_commit(root, v)[0]["commitInfo"]["operation"] for v in (2, 3)] == ["SET TBLPROPERTIES", "DROP FEATURE"]
    assert t.metadata.configuration == {"delta.checkpointPolicy": "classic",
                                        "delta.requireCheckpointProtectionBeforeVersion": "3"}
    # the protected checkpoints around the downgrade; the one at the downgrade, where a reader that
    # does not know v2Checkpoint starts, is a classic one: no checkpointMetadata, no v2Checkpoint
    assert {f"{v:020d}.checkpoint.parquet" for v in (2, 3)} <= set(_log(root))
    cp = pq.read_table(os.path.join(root, "_delta_log", f"{3:020d}.checkpoint.parquet"))
    assert "checkpointMetadata" not in cp.column_names or not any(cp.column("checkpointMetadata").to_pylist())
    assert [r["protocol"] for r in cp.to_pylist() if r["protocol"]][0]["readerFeatures"] in (None, [])
    assert rows(t.to_arrow()) == [(1,), (2,)]
    assert rows(delta_rs_read([(root, None)], tmp_path)[0]) == [(1,), (2,)]
