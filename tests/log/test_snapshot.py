"""Snapshots of logs built here: reconciliation, canonical paths, checkpoints and their fallbacks,
time travel, history, and every kind of bad input the log can hold."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tahoe import DeltaLog, Table
from tahoe.errors import (
    CorruptLogError, DeletionVectorError, TableNotFoundError, UnsupportedFeatureError, VersionNotFoundError,
)
from tests.conftest import assert_rows_equal, manifest_entry, read_expected

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def _meta(conf=None, schema=SCHEMA):
    return {"metaData": {"id": "t1", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": [],
                         "configuration": conf or {}, "createdTime": 1}}


def _add(path, dv=None, size=1, stats=None):
    a = {"path": path, "partitionValues": {}, "size": size, "modificationTime": 1, "dataChange": True}
    if dv:
        a["deletionVector"] = dv
    if stats:
        a["stats"] = stats
    return {"add": a}


def _remove(path, dv=None):
    r = {"path": path, "deletionTimestamp": 5, "dataChange": True}
    if dv:
        r["deletionVector"] = dv
    return {"remove": r}


class LogBuilder:
    def __init__(self, root: Path):
        self.root = root
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True, exist_ok=True)

    def commit(self, version: int, *actions, mtime_s: float | None = None, raw: str | None = None):
        p = self.log / f"{version:020d}.json"
        p.write_text(raw if raw is not None else "\n".join(json.dumps(a) for a in actions) + "\n")
        if mtime_s is not None:
            os.utime(p, (mtime_s, mtime_s))
        return p


def _dv(uid: str, card=1):
    return {"storageType": "i", "pathOrInlineDv": uid, "sizeInBytes": 4, "cardinality": card}


@pytest.fixture
def table(tmp_path):
    b = LogBuilder(tmp_path / "t")
    b.commit(0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta())
    return b


def paths(snapshot):
    return sorted(snapshot.files_table(["path"]).column("path").to_pylist())


def test_reconciliation_newest_reference_wins(table):
    table.commit(1, _add("a"), _add("b"), _add("c"))
    table.commit(2, _remove("a"), {"txn": {"appId": "app", "version": 3}})
    table.commit(3, _add("a"), _remove("c"), {"txn": {"appId": "app", "version": 4}})
    snap = DeltaLog.for_table(str(table.root)).snapshot()
    assert paths(snap) == ["a", "b"]
    assert sorted(snap.tombstones_table(["path"]).column("path").to_pylist()) == ["c"]
    assert snap.txn_version("app") == 4 and snap.txn_version("other") is None
    assert paths(DeltaLog.for_table(str(table.root)).snapshot(version=2)) == ["b", "c"]


def test_files_keyed_by_path_and_deletion_vector(table):
    table.commit(1, _add("f"))
    # a DELETE with deletion vectors: the same data file gets a DV, the old logical file goes
    table.commit(2, _remove("f"), _add("f", dv=_dv("aaaa")))
    table.commit(3, _remove("f", dv=_dv("aaaa")), _add("f", dv=_dv("bbbb", 2)))
    snap = DeltaLog.for_table(str(table.root)).snapshot()
    t = snap.files_table(["path", "deletionVector"]).to_pylist()
    assert len(t) == 1 and t[0]["deletionVector"]["pathOrInlineDv"] == "bbbb"
    assert snap.tombstones_table(["path"]).num_rows == 2  # (f, None) and (f, iaaaa)


def test_absolute_and_file_uri_paths_are_one_file(table):
    root = str(table.root)
    table.commit(1, _add(f"{root}/x.parquet"), _add("y.parquet"), _add("/elsewhere/z%20z.parquet"))
    table.commit(2, _remove(f"file:{root}/x.parquet"), _remove(f"file://{root}/y.parquet"),
                 _remove("file:///elsewhere/z%20z.parquet"))
    assert paths(DeltaLog.for_table(root).snapshot()) == []


def test_protocol_and_metadata_latest_wins(table):
    table.commit(1, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
                 _meta({"delta.enableChangeDataFeed": "true"}))
    snap = Table(str(table.root)).snapshot
    assert snap.protocol.min_writer_version == 4
    assert snap.configuration == {"delta.enableChangeDataFeed": "true"}


def test_domain_metadata_and_row_tracking(table):
    table.commit(1, {"domainMetadata": {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":41}', "removed": False}},
                 {"domainMetadata": {"domain": "user.x", "configuration": "{}", "removed": False}})
    table.commit(2, {"domainMetadata": {"domain": "user.x", "configuration": "", "removed": True}})
    snap = DeltaLog.for_table(str(table.root)).snapshot()
    assert set(snap.domain_metadata) == {"delta.rowTracking"}
    assert snap.row_id_high_water_mark == 41


def test_seed_row_id_high_water_mark_action(table):
    table.commit(1, {"rowIdHighWaterMark": {"highWaterMark": 1432, "preservedRowIds": True}})
    assert DeltaLog.for_table(str(table.root)).snapshot().row_id_high_water_mark == 1432


# --- bad input ---------------------------------------------------------------------------------

def test_not_a_delta_table(tmp_path):
    with pytest.raises(TableNotFoundError, match="no _delta_log"):
        Table(str(tmp_path))
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(TableNotFoundError, match="no commit files"):
        Table(str(tmp_path))


def test_gap_in_versions_is_named(table):
    table.commit(1, _add("a"))
    table.commit(3, _add("b"))
    with pytest.raises(CorruptLogError, match="version 2 is missing"):
        Table(str(table.root))


def test_malformed_json_line_names_file_and_line(table):
    table.commit(1, raw='{"add": {"path": "a", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": true}}\n{"add": {"path"\n')
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json: line 2 is not valid JSON"):
        Table(str(table.root))


def test_add_without_size_is_corrupt(table):
    table.commit(1, {"add": {"path": "a", "partitionValues": {}, "modificationTime": 1, "dataChange": True}})
    with pytest.raises(CorruptLogError, match="without a valid 'size'"):
        Table(str(table.root))


def test_unknown_reader_feature_and_version_refused(table):
    table.commit(1, {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                  "readerFeatures": ["quantumEntanglement"], "writerFeatures": ["quantumEntanglement"]}})
    with pytest.raises(UnsupportedFeatureError, match="quantumEntanglement"):
        Table(str(table.root))
    table.commit(2, {"protocol": {"minReaderVersion": 4, "minWriterVersion": 7}})
    with pytest.raises(UnsupportedFeatureError, match="reader version 4"):
        Table(str(table.root))
    # the older version is still readable
    assert Table(str(table.root), version=0).version == 0


def test_missing_protocol_is_an_error(tmp_path):
    b = LogBuilder(tmp_path / "t")
    b.commit(0, _meta(), _add("a"))
    with pytest.raises(CorruptLogError, match="no protocol action"):
        Table(str(b.root))


def _copy_golden(golden: Path, name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(golden / manifest_entry(name)["table"], dst)
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst


def test_truncated_checkpoint_is_named(golden, tmp_path):
    t = _copy_golden(golden, "125-iterator-bug", tmp_path)
    cp = t / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    cp.write_bytes(cp.read_bytes()[:200])
    (t / "_delta_log" / "_last_checkpoint").unlink()
    with pytest.raises(CorruptLogError, match=r"00000000000000000010\.checkpoint\.parquet"):
        Table(str(t)).files()


def test_deletion_vector_checksum_failure(golden, tmp_path):
    t = _copy_golden(golden, "dv-partitioned-with-checkpoint", tmp_path)
    dv_files = sorted(t.rglob("deletion_vector_*.bin"))
    assert dv_files
    for f in dv_files:
        data = bytearray(f.read_bytes())
        data[-5] ^= 0xFF  # flip a byte of the bitmap: the CRC no longer matches
        f.write_bytes(bytes(data))
    with pytest.raises(DeletionVectorError, match="deletion_vector_"):
        Table(str(t)).to_arrow()


def test_corrupt_or_stale_last_checkpoint_falls_back_to_listing(golden, tmp_path):
    t = _copy_golden(golden, "125-iterator-bug", tmp_path)
    lc = t / "_delta_log" / "_last_checkpoint"
    expected = read_expected(manifest_entry("125-iterator-bug"))
    for body in ["", "{not json", '{"version": 10, "size": 1, "checksum": "00000000000000000000000000000000"}',
                 '{"version": 7, "size": 1}', '{"version": 99, "size": 1}']:
        lc.write_text(body)
        tb = Table(str(t))
        assert tb.version == 11, body
        assert_rows_equal(tb.to_arrow(), expected, body)


def test_incomplete_multipart_checkpoint_is_skipped(golden, tmp_path):
    t = _copy_golden(golden, "multi-part-checkpoint", tmp_path)
    log = t / "_delta_log"
    parts = sorted(p for p in log.iterdir() if ".checkpoint." in p.name and not p.name.startswith("."))
    entry = manifest_entry("multi-part-checkpoint")
    full = Table(str(t))
    cp_version = int(parts[0].name.split(".")[0])
    assert full.snapshot.segment.checkpoint_version == cp_version
    assert_rows_equal(full.to_arrow(), read_expected(entry), "with the checkpoint")
    parts[-1].unlink()  # a writer died before writing the last part
    tb = Table(str(t))
    assert tb.snapshot.segment.checkpoint_version != cp_version
    assert tb.version == entry["latest_version"]
    assert_rows_equal(tb.to_arrow(), read_expected(entry), "from the commits")


def test_cleaned_up_log_refuses_old_versions(golden, tmp_path):
    t = _copy_golden(golden, "125-iterator-bug", tmp_path)
    for v in range(0, 5):
        (t / "_delta_log" / f"{v:020d}.json").unlink()
    with pytest.raises(VersionNotFoundError, match="cannot reconstruct version 3"):
        Table(str(t), version=3)
    assert Table(str(t), version=10).version == 10
    with pytest.raises(VersionNotFoundError, match=r"Available versions: \[10, 11\]"):
        Table(str(t), version=12)


# --- time travel and history -------------------------------------------------------------------

def test_time_travel_by_timestamp_and_history(table):
    base = 1_700_000_000
    os.utime(table.log / f"{0:020d}.json", (base, base))
    table.commit(1, {"commitInfo": {"timestamp": 1, "operation": "WRITE"}}, _add("a"), mtime_s=base + 10)
    table.commit(2, {"commitInfo": {"timestamp": 2, "operation": "DELETE"}}, _remove("a"), mtime_s=base + 20)
    log = DeltaLog.for_table(str(table.root))
    assert log.version_at_timestamp((base + 15) * 1000) == 1
    assert log.version_at_timestamp("2023-11-14T22:13:40Z") == 2  # base + 20 s
    assert Table(str(table.root), timestamp=(base + 10) * 1000).version == 1
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        log.version_at_timestamp((base - 1) * 1000)
    with pytest.raises(VersionNotFoundError, match="after the latest"):
        log.version_at_timestamp((base + 21) * 1000)
    h = log.history()
    assert [e.version for e in h] == [2, 1, 0]
    assert h[0].commit_info["operation"] == "DELETE" and h[0].timestamp == (base + 20) * 1000
    assert [e.version for e in log.history(limit=1)] == [2]


def test_non_monotonic_file_times_are_made_increasing(table):
    base = 1_700_000_000
    os.utime(table.log / f"{0:020d}.json", (base + 100, base + 100))
    table.commit(1, _add("a"), mtime_s=base)  # clock skew: older mtime than its predecessor
    stamps = DeltaLog.for_table(str(table.root)).commit_timestamps()
    assert stamps == [(0, (base + 100) * 1000), (1, (base + 100) * 1000 + 1)]


def test_in_commit_timestamps_are_used_when_enabled(table):
    table.commit(1, {"commitInfo": {"timestamp": 5, "inCommitTimestamp": 1_600_000_000_000}},
                 _meta({"delta.enableInCommitTimestamps": "true"}))
    snap = DeltaLog.for_table(str(table.root)).snapshot()
    assert snap.timestamp == 1_600_000_000_000


def _ict_enabled_at_3(table, mtimes: list[int]) -> int:
    """Versions 0-2 without in-commit timestamps, version 3 enables them (ICT base + 300 s, the
    enablement properties as delta-spark writes them), version 4 has ICT base + 400 s; commit file
    v gets the modification time base + mtimes[v] seconds. Returns base (s)."""
    base = 1_700_000_000
    table.commit(1, {"commitInfo": {"timestamp": 1, "operation": "WRITE"}}, _add("a"))
    table.commit(2, {"commitInfo": {"timestamp": 2, "operation": "WRITE"}}, _add("b"))
    table.commit(3, {"commitInfo": {"timestamp": 3, "inCommitTimestamp": (base + 300) * 1000,
                                    "operation": "SET TBLPROPERTIES"}},
                 {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}},
                 _meta({"delta.enableInCommitTimestamps": "true",
                        "delta.inCommitTimestampEnablementVersion": "3",
                        "delta.inCommitTimestampEnablementTimestamp": str((base + 300) * 1000)}))
    table.commit(4, {"commitInfo": {"timestamp": 4, "inCommitTimestamp": (base + 400) * 1000,
                                    "operation": "WRITE"}}, _add("c"))
    for v, m in enumerate(mtimes):
        os.utime(table.log / f"{v:020d}.json", (base + m, base + m))
    return base


def test_version_at_timestamp_across_in_commit_timestamp_enablement(table):
    """File times before the enablement version, in-commit timestamps from it on (the expectations
    are delta-kernel-rs's LogHistoryManager test table: mtimes 50/150/250, ICT 300/400 with the
    later commit files' own mtimes 350/450 ignored)."""
    base = _ict_enabled_at_3(table, [50, 150, 250, 350, 450])
    log = DeltaLog.for_table(str(table.root))
    ms = lambda s: (base + s) * 1000
    assert log.commit_timestamps() == [(0, ms(50)), (1, ms(150)), (2, ms(250)), (3, ms(300)), (4, ms(400))]
    for t, v in [(50, 0), (149, 0), (150, 1), (251, 2), (299, 2), (300, 3), (301, 3), (399, 3), (400, 4)]:
        assert log.version_at_timestamp(ms(t)) == v, t
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        log.version_at_timestamp(ms(49))
    with pytest.raises(VersionNotFoundError, match="after the latest"):
        log.version_at_timestamp(ms(401))   # 450 is only the file time of version 4
    assert [e.timestamp for e in log.history()] == [ms(400), ms(300), ms(250), ms(150), ms(50)]
    assert Table(str(table.root), timestamp=ms(350)).version == 3


def test_version_at_timestamp_after_a_copy_reset_the_file_times(table):
    """A copied table: every commit file has the copy's time, later than the in-commit timestamps.
    Timestamps from the enablement on still find their versions; the versions before it only have
    their (new) file times, made increasing among themselves."""
    base = _ict_enabled_at_3(table, [1000] * 5)
    log = DeltaLog.for_table(str(table.root))
    ms = lambda s: (base + s) * 1000
    assert log.commit_timestamps() == [(0, ms(1000)), (1, ms(1000) + 1), (2, ms(1000) + 2),
                                       (3, ms(300)), (4, ms(400))]
    for t, v in [(300, 3), (350, 3), (400, 4)]:
        assert log.version_at_timestamp(ms(t)) == v, t
    with pytest.raises(VersionNotFoundError, match=r"\[DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION\] The provided timestamp .* is before the earliest version available to this table .*\(version 0\)"):
        log.version_at_timestamp(ms(299))
    with pytest.raises(VersionNotFoundError, match=r"\[DELTA_TIMESTAMP_GREATER_THAN_COMMIT\] The provided timestamp .* is after the latest version available to this table .*\(version 4\)"):
        log.version_at_timestamp(ms(1000))


# --- the reader --------------------------------------------------------------------------------

def test_columns_missing_from_file_are_null_and_void_dropped(tmp_path):
    b = LogBuilder(tmp_path / "t")
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "added_later", "type": "string", "nullable": True, "metadata": {}},
        {"name": "nothing", "type": "void", "nullable": True, "metadata": {}},
    ]}
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32())}), b.root / "f.parquet")
    b.commit(0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta(schema=schema),
             _add("f.parquet", size=(b.root / "f.parquet").stat().st_size))
    t = Table(str(b.root)).to_arrow()
    assert t.column_names == ["id", "added_later"]
    assert t.schema.field("id").type == pa.int64()  # widened to the table's type
    assert t.column("added_later").to_pylist() == [None, None]
    assert Table(str(b.root)).to_arrow(columns=["id"]).column_names == ["id"]


def test_missing_data_file_is_named(table):
    table.commit(1, _add("gone.parquet"))
    with pytest.raises(CorruptLogError, match="gone.parquet"):
        Table(str(table.root)).to_arrow()


def test_null_struct_with_not_null_child(tmp_path):
    from tahoe.write.writer import write_table

    st = pa.struct([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    write_table(str(tmp_path), pa.table({"id": pa.array([1, 2], pa.int64()),
                                         "s": pa.array([{"a": 1, "b": "x"}, None], st)}))
    rows = sorted(Table(str(tmp_path)).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "s": {"a": 1, "b": "x"}}, {"id": 2, "s": None}]


def test_checkpoint_without_the_requested_columns_keeps_row_count(tmp_path):
    from tahoe.log.checkpoints import write_checkpoint
    from tahoe.write.writer import write_table

    write_table(str(tmp_path), pa.table({"id": pa.array([1], pa.int64())}),
                properties={"delta.checkpoint.writeStatsAsJson": "false"})
    write_table(str(tmp_path), pa.table({"id": pa.array([2], pa.int64())}), mode="append")
    write_checkpoint(DeltaLog.for_table(str(tmp_path)))
    snap = DeltaLog.for_table(str(tmp_path)).snapshot()
    assert snap.segment.checkpoint_version == 1
    stats = snap.files_table(["stats"])
    assert stats.num_rows == 2 and stats.column("stats").null_count == 2
