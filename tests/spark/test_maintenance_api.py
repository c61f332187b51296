"""delta-spark's maintenance surface on `tahoe.spark.DeltaTable`: restoreToVersion / restoreToTimestamp (its metrics
DataFrame), vacuum (the retention check conf), clone / cloneAtVersion / cloneAtTimestamp (timestamps in the
session time zone, commit times set on the commit files), generate,
addFeatureSupport / dropFeatureSupport / upgradeTableProtocol, convertToDelta.

Oracles: the rows written (hand-derived), the add/remove actions and sizes in the commits' JSON
(the RESTORE metrics are computed from them), the files on disk (os.walk), the protocol action
of the last commit compared with the versions derived by hand from delta-spark 4's rules, and
delta-rs reading the restored, vacuumed, cloned and converted tables."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import RetentionTooShortError
from tahoe.spark import DeltaTable
from tests.maintenance.helpers import delta_rs_read, rows, tree

CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def _actions(root: str, v: int, kind: str) -> list[dict]:
    with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as f:
        return [a[kind] for a in map(json.loads, filter(str.strip, f)) if kind in a]


def _spark_rows(df) -> list:
    return sorted(tuple(r) for r in df.collect())


def test_restore_vacuum_clone_generate_features_on_spark(spark, tmp_path):
    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2, 3]}))                        # v0
    tahoe.write_table(root, pa.table({"id": [4]}), mode="overwrite")           # v1
    v0_adds, v1_adds = _actions(root, 0, "add"), _actions(root, 1, "add")
    dt = DeltaTable.forPath(spark, root)

    m = dt.restoreToVersion(0).collect()[0].asDict()
    size0, size1 = sum(a["size"] for a in v0_adds), sum(a["size"] for a in v1_adds)
    assert m == {"table_size_after_restore": size0, "num_of_files_after_restore": len(v0_adds),
                 "num_removed_files": len(v1_adds), "num_restored_files": len(v0_adds),
                 "removed_files_size": size1, "restored_files_size": size0}
    assert _spark_rows(spark.read.format("delta").load(root)) == [(1,), (2,), (3,)]
    assert {r["path"] for r in _actions(root, 2, "remove")} == {a["path"] for a in v1_adds}

    # VACUUM: a zero retention is refused while the check is on, and nothing changes
    before = tree(root)
    with pytest.raises(RetentionTooShortError):
        dt.vacuum(0)
    assert tree(root) == before
    spark.conf.set(CHECK, "false")
    try:
        assert dt.vacuum(0).collect() == []
    finally:
        spark.conf.unset(CHECK)
    gone = {a["path"] for a in v1_adds}
    assert tree(root) == (before - gone) | {f"_delta_log/{v:020d}.{x}" for v in (3, 4) for x in ("json", "crc")}
    assert [c["operation"] for c in dt.history(2).orderBy("version").collect()] == ["VACUUM START", "VACUUM END"]

    # CLONE: deep at the latest version (files copied), shallow at version 2 (the restored files, by
    # absolute URI)
    deep = dt.clone(str(tmp_path / "deep"), isShallow=False)
    shallow = dt.cloneAtVersion(2, str(tmp_path / "shallow"), isShallow=True)
    assert _spark_rows(deep.toDF()) == _spark_rows(shallow.toDF()) == [(1,), (2,), (3,)]
    assert all(a["path"].startswith("file:") for a in _actions(str(tmp_path / "shallow"), 0, "add"))
    assert not any(a["path"].startswith("file:") for a in _actions(str(tmp_path / "deep"), 0, "add"))
    theirs = delta_rs_read([(root, None), (str(tmp_path / "deep"), None), (str(tmp_path / "shallow"), None)],
                           tmp_path)
    assert [rows(t) for t in theirs] == [[(1,), (2,), (3,)]] * 3

    # generate: one manifest naming the active files by absolute URI
    dt.generate("symlink_format_manifest")
    with open(os.path.join(root, "_symlink_format_manifest", "manifest")) as f:
        assert sorted(f.read().split()) == sorted("file://" + root + "/" + a["path"] for a in v0_adds)

    # protocol, by delta-spark 4's rules (Protocol.merge / removeFeature end in `denormalizedNormalized`
    # / `normalized`: a protocol whose features are all legacy is written with legacy versions):
    # (1,2) + checkConstraints = {appendOnly, invariants, checkConstraints} -> (1,3); dropping it
    # leaves {appendOnly, invariants} -> (1,2); then deletionVectors -> (3,7) listing the legacy ones
    v = dt.history(1).collect()[0]["version"]
    dt.addFeatureSupport("checkConstraints")
    assert _actions(root, v + 1, "protocol") == [{"minReaderVersion": 1, "minWriterVersion": 3}]
    dt.dropFeatureSupport("checkConstraints")
    assert _actions(root, v + 2, "protocol") == [{"minReaderVersion": 1, "minWriterVersion": 2}]
    assert _actions(root, v + 2, "commitInfo")[0]["operation"] == "DROP FEATURE"
    dt.upgradeTableProtocol(1, 3)
    assert _actions(root, v + 3, "protocol") == [{"minReaderVersion": 1, "minWriterVersion": 3}]
    dt.addFeatureSupport("deletionVectors")
    (proto,) = _actions(root, v + 4, "protocol")
    assert (proto["minReaderVersion"], proto["minWriterVersion"], proto["readerFeatures"]) == (3, 7, ["deletionVectors"])
    assert sorted(proto["writerFeatures"]) == ["appendOnly", "checkConstraints", "deletionVectors", "invariants"]
    assert _spark_rows(dt.toDF()) == [(1,), (2,), (3,)]


def test_convert_to_delta_on_spark(spark, tmp_path):
    root = tmp_path / "raw"
    for p, ids in (("x", [1, 2]), ("y", [3])):
        (root / f"p={p}").mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / f"p={p}" / "part-0.parquet")
    dt = DeltaTable.convertToDelta(spark, f"parquet.`{root}`", "p STRING")
    assert DeltaTable.isDeltaTable(spark, str(root))
    want = [(1, "x"), (2, "x"), (3, "y")]
    assert sorted((r["id"], r["p"]) for r in dt.toDF().collect()) == want
    assert rows(delta_rs_read([(str(root), None)], tmp_path)[0], ["id", "p"]) == want
    info = _actions(str(root), 0, "commitInfo")[0]
    assert info["operation"] == "CONVERT" and info["operationParameters"]["collectStats"] == "true"
    assert all(json.loads(a["stats"])["numRecords"] == n
               for a, n in zip(sorted(_actions(str(root), 0, "add"), key=lambda a: a["path"]), (2, 1)))
    # as delta-spark: converting a Delta table again does nothing and returns it
    again = DeltaTable.convertToDelta(spark, f"parquet.`{root}`", "p STRING")
    assert sorted((r["id"], r["p"]) for r in again.toDF().collect()) == want
    assert DeltaTable.convertToDelta(spark, f"delta.`{root}`") is not None
    assert sorted(os.listdir(root / "_delta_log")) == [f"{0:020d}.crc", f"{0:020d}.json"]
    # spark.databricks.delta.stats.collect=false: no stats, and the commit says so
    other = tmp_path / "raw2"
    other.mkdir()
    pq.write_table(pa.table({"id": pa.array([5], pa.int64())}), other / "part-0.parquet")
    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        DeltaTable.convertToDelta(spark, f"parquet.`{other}`")
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    assert _actions(str(other), 0, "commitInfo")[0]["operationParameters"]["collectStats"] == "false"
    assert [a.get("stats") for a in _actions(str(other), 0, "add")] == [None]


def test_restore_and_clone_at_a_timestamp_in_the_session_time_zone(spark, tmp_path):
    import datetime as dt

    from tahoe.errors import VersionNotFoundError

    root = str(tmp_path / "t")
    tahoe.write_table(root, pa.table({"id": [1, 2, 3]}))                        # v0: 2024-01-01 00:00 UTC
    tahoe.write_table(root, pa.table({"id": [4]}))                             # v1: 2024-01-02 00:00 UTC
    tahoe.write_table(root, pa.table({"id": [9]}), mode="overwrite")           # v2: 2024-01-03 00:00 UTC
    for v in range(3):       # commit times are the commit files' modification times (no ICT)
        t = dt.datetime(2024, 1, 1 + v, tzinfo=dt.timezone.utc).timestamp()
        os.utime(os.path.join(root, "_delta_log", f"{v:020d}.json"), (t, t))
    want = {0: [(1,), (2,), (3,)], 1: [(1,), (2,), (3,), (4,)], 2: [(9,)]}
    dt_ = DeltaTable.forPath(spark, root)
    tz = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        # 2024-01-01 20:00 in New York is 2024-01-02 01:00 UTC: version 1 (in UTC it would be 0)
        m = dt_.restoreToTimestamp("2024-01-01 20:00:00").collect()[0].asDict()
        v0_adds, v1_adds, v2_adds = (_actions(root, v, "add") for v in range(3))
        restored = v0_adds + v1_adds
        assert m == {"table_size_after_restore": sum(a["size"] for a in restored),
                     "num_of_files_after_restore": len(restored), "num_removed_files": len(v2_adds),
                     "num_restored_files": len(restored), "removed_files_size": sum(a["size"] for a in v2_adds),
                     "restored_files_size": sum(a["size"] for a in restored)}
        info = _actions(root, 3, "commitInfo")[0]
        assert info["operation"] == "RESTORE" and info["readVersion"] == 2
        assert _spark_rows(dt_.toDF()) == want[1]
        # a date alone is midnight in the session time zone: 2024-01-02 05:00 UTC -> version 1;
        # noon in New York on Jan 1 -> version 0; an explicit offset keeps its own zone
        deep = dt_.cloneAtTimestamp("2024-01-01 12:00:00", str(tmp_path / "deep"), isShallow=False)
        shallow = dt_.cloneAtTimestamp("2024-01-02", str(tmp_path / "shallow"), isShallow=True)
        utc = dt_.cloneAtTimestamp("2024-01-02T23:59:59+00:00", str(tmp_path / "utc"), isShallow=True)
        assert _spark_rows(deep.toDF()) == want[0]
        assert _spark_rows(shallow.toDF()) == _spark_rows(utc.toDF()) == want[1]
        for name, v in (("deep", 0), ("shallow", 1), ("utc", 1)):
            params = _actions(str(tmp_path / name), 0, "commitInfo")[0]["operationParameters"]
            assert params["sourceVersion"] == str(v)
        # before the first commit: refused, nothing restored or cloned
        with pytest.raises(VersionNotFoundError):
            dt_.restoreToTimestamp("2023-12-31 12:00:00")
        with pytest.raises(VersionNotFoundError):
            dt_.cloneAtTimestamp("2023-12-31", str(tmp_path / "none"))
        assert not os.path.exists(tmp_path / "none") and tahoe.Table(root).version == 3
    finally:
        spark.conf.set("spark.sql.session.timeZone", tz)
    theirs = delta_rs_read([(root, None), (str(tmp_path / "deep"), None), (str(tmp_path / "shallow"), None)],
                           tmp_path)
    assert [rows(t) for t in theirs] == [want[1], want[0], want[1]]
