"""OPTIMIZE on Spark (delta-spark's `DeltaTable.optimize()` builder, `reorg()`, `clusterBy`, the
session confs of auto compaction and optimized writes): one lean test on the shared session.

Oracles: file counts from the parquet files on disk before the operation (no file was removed
yet, so the files on disk are the active ones), min/max ranges from the parquet footers, the
commit JSON of the log, delta-spark's result schema (path, metrics struct) and delta-rs reading
the rows written (hand-built data)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.write.test_writer import delta_rs_rows, same_rows

pytestmark = pytest.mark.xdist_group("spark")


def _last_commit(path) -> list[dict]:
    logdir = path / "_delta_log"
    last = sorted(f for f in os.listdir(logdir) if f.endswith(".json"))[-1]
    return [json.loads(x) for x in (logdir / last).read_text().splitlines() if x.strip()]


def _footer_min(path, name: str) -> list[int]:
    out = []
    for f in path.rglob("*.parquet"):
        md = pq.ParquetFile(f).metadata
        i = md.schema.to_arrow_schema().get_field_index(name)
        out.append((str(f.relative_to(path)), min(md.row_group(g).column(i).statistics.min
                                                  for g in range(md.num_row_groups))))
    return out


def test_optimize_zorder_reorg_clustering_auto_compaction_on_spark(spark, tmp_path):  # noqa: F811
    import tahoe
    from tahoe.spark import DeltaTable, write_delta
    from tahoe.write.deletion_vectors import delete_rows

    rng = np.random.default_rng(3)
    path = tmp_path / "events"
    chunks = []
    for i in range(4):
        t = pa.table({"id": pa.array(np.arange(i * 200, (i + 1) * 200), pa.int64()),
                      "x": pa.array(rng.integers(0, 10_000, 200), pa.int64()),
                      "y": pa.array(rng.integers(0, 10_000, 200), pa.int64()),
                      "day": ["a", "b"] * 100})
        chunks.append(t)
        write_delta(spark.createDataFrame(t.to_pandas()).coalesce(1), str(path), partition_by=["day"],
                    properties={"delta.enableDeletionVectors": "true"})
    expected = pa.concat_tables(chunks)
    in_a = len(list((path / "day=a").glob("*.parquet")))
    in_b = len(list((path / "day=b").glob("*.parquet")))

    dt = DeltaTable.forPath(spark, str(path))
    res = dt.optimize().where("day = 'a'").executeCompaction()
    assert res.columns == ["path", "metrics"]
    row = res.collect()[0]
    assert row.path.rstrip("/").endswith("events")
    assert (row.metrics.numFilesRemoved, row.metrics.numFilesAdded, row.metrics.partitionsOptimized) == (in_a, 1, 1)
    assert row.metrics.filesAdded.totalFiles == 1
    commit = _last_commit(path)
    assert next(a["commitInfo"] for a in commit if "commitInfo" in a)["operation"] == "OPTIMIZE"
    assert all(a["add"]["dataChange"] is False for a in commit if "add" in a)
    assert len(list((path / "day=a").glob("*.parquet"))) == in_a + 1    # removed files stay until VACUUM

    # Z-order of partition 'b' into ~8 files of (x, y) ranges: far fewer files hold x, y < 1000
    size_b = sum(os.path.getsize(p) for p in (path / "day=b").glob("*.parquet"))
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(size_b // 8))
    try:
        row = dt.optimize().where("day = 'b'").executeZOrderBy("x", "y").collect()[0]
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    assert row.metrics.numFilesRemoved == in_b and row.metrics.numFilesAdded >= 6
    assert row.metrics.zOrderStats.strategyName == "all"
    new_b = {a["add"]["path"] for a in _last_commit(path) if "add" in a}
    xs = dict(_footer_min(path, "x"))
    ys = dict(_footer_min(path, "y"))
    old_b = [p for p in xs if p.startswith("day=b") and p not in new_b]
    assert sum(xs[p] < 1000 and ys[p] < 1000 for p in old_b) == in_b      # before: every file
    assert sum(xs[p] < 1000 and ys[p] < 1000 for p in new_b) <= 0.25 * len(new_b)

    # REORG ... APPLY (PURGE) of a deletion vector
    target = sorted(new_b)[0]
    delete_rows(str(path), {target: [0, 1]})
    row = dt.reorg().executePurge().collect()[0]
    assert (row.metrics.numFilesRemoved, row.metrics.numFilesAdded) == (1, 1)
    assert row.metrics.deletionVectorStats.numDeletionVectorRowsRemoved == 2
    add = next(a["add"] for a in _last_commit(path) if "add" in a)
    assert pq.read_table(path / add["path"]).num_rows == pq.read_table(path / target).num_rows - 2
    dropped = set(pq.read_table(path / target).column("id").to_pylist()[:2])
    expected = expected.filter(pa.array([i not in dropped for i in expected.column("id").to_pylist()]))
    same_rows(expected, delta_rs_rows([str(path)], tmp_path, sql=True)[str(path)])

    # liquid clustering: clusterBy on the builder, an optimized write (one task: one file),
    # auto compaction by session conf once 3 small files are there, OPTIMIZE clusters
    liquid = tmp_path / "liquid"
    DeltaTable.create(spark).location(str(liquid)).addColumn("id", "BIGINT").addColumn("x", "BIGINT") \
        .addColumn("y", "BIGINT").clusterBy("x", "y").execute()
    assert tahoe.Table(str(liquid)).clustering_columns == ["x", "y"]
    df = spark.createDataFrame(chunks[0].drop(["day"]).to_pandas()).repartition(4)
    write_delta(df, str(liquid), optimize_write=True)
    assert len(list(liquid.glob("*.parquet"))) == 1
    spark.conf.set("spark.databricks.delta.autoCompact.enabled", "true")
    spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", "3")
    try:
        write_delta(spark.createDataFrame(chunks[1].drop(["day"]).to_pandas()).coalesce(1), str(liquid))
        assert len(tahoe.Table(str(liquid)).files()) == 2              # 2 small files: not yet
        write_delta(spark.createDataFrame(chunks[2].drop(["day"]).to_pandas()).coalesce(1), str(liquid))
    finally:
        spark.conf.unset("spark.databricks.delta.autoCompact.enabled")
        spark.conf.unset("spark.databricks.delta.autoCompact.minNumFiles")
    info = next(a["commitInfo"] for a in _last_commit(path=liquid) if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and info["operationParameters"]["auto"] == "true"
    assert len(tahoe.Table(str(liquid)).files()) == 1
    write_delta(spark.createDataFrame(chunks[3].drop(["day"]).to_pandas()).coalesce(1), str(liquid))
    row = DeltaTable.forPath(spark, str(liquid)).optimize().executeCompaction().collect()[0]
    assert (row.metrics.numFilesRemoved, row.metrics.numFilesAdded) == (2, 1)
    assert row.metrics.clusteringStats.numOutputZCubes == 1
    adds = [a["add"] for a in _last_commit(liquid) if "add" in a]
    assert [a.get("clusteringProvider") for a in adds] == ["liquid"]
    same_rows(pa.concat_tables(chunks).drop(["day"]), delta_rs_rows([str(liquid)], tmp_path)[str(liquid)])


def test_optimize_with_sparks_reader_and_writer_and_in_arrow_tasks(spark, tmp_path):
    """The three ways the Spark executor rewrites bins: with spark.tahoe.optimize.arrowTaskMaxBinSize=0
    every bin goes through Spark's own reader and writer — compaction and REORG bins of both
    partitions in ONE job (several bins per partition: each must come out as one file, which a
    wrong bin-to-task mapping would break), Z-order in a job per bin —, by default through pyarrow
    inside Spark tasks. Oracles: the rows written and deleted (hand-built), delta-rs reading them,
    the adds of each commit's JSON (one file per bin: numFilesAdded == numBins), the DV-marked
    rows gone from the rewritten files (pyarrow row counts)."""
    import tahoe
    from tahoe.spark import DeltaTable
    from tahoe.write.deletion_vectors import delete_rows

    rng = np.random.default_rng(5)
    n = 1200
    data = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                     "x": pa.array(rng.integers(0, 10_000, n), pa.int64()),
                     "y": pa.array(rng.integers(0, 10_000, n), pa.int64()),
                     "day": ["a", "b"] * (n // 2)})
    results = {}
    for how in ("native", "tasks"):
        path = tmp_path / how
        tahoe.write_table(str(path), data, partition_by=["day"], target_file_rows=100,
                          properties={"delta.enableDeletionVectors": "true"})       # 6 files per day
        files = sorted(str(p.relative_to(path)) for p in path.rglob("*.parquet"))
        assert len(files) == 12
        gone = {}
        for f in files[:3]:                       # DVs on a few files: their rows 0 and 1
            gone[f] = pq.read_table(path / f).column("id").to_pylist()[:2]
            delete_rows(str(path), {f: [0, 1]})
        dropped = {i for ids in gone.values() for i in ids}
        expected = data.filter(pa.array([i not in dropped for i in range(n)]))
        dt = DeltaTable.forPath(spark, str(path))
        largest = max(os.path.getsize(path / f) for f in files)
        confs = {"spark.databricks.delta.optimize.maxFileSize": str(3 * largest)}   # 2+ bins per day
        if how == "native":
            confs["spark.tahoe.optimize.arrowTaskMaxBinSize"] = "0"
        for k, v in confs.items():
            spark.conf.set(k, v)
        try:
            m = dt.optimize().executeCompaction().collect()[0].metrics
            assert m.numBins >= 4 and m.numFilesAdded == m.numBins and m.numFilesRemoved == 12
            adds = [a["add"] for a in _last_commit(path) if "add" in a]
            assert len(adds) == m.numBins
            assert sum(pq.read_table(path / a["path"]).num_rows for a in adds) == expected.num_rows
            # REORG: a DV on one of the new files, purged
            target = adds[0]["path"]
            delete_rows(str(path), {target: [0]})
            first = pq.read_table(path / target).column("id").to_pylist()[0]
            expected = expected.filter(pa.array([i != first for i in expected.column("id").to_pylist()]))
            r = dt.reorg().executePurge().collect()[0].metrics
            assert (r.numFilesRemoved, r.numFilesAdded) == (1, 1)
            (new,) = [a["add"]["path"] for a in _last_commit(path) if "add" in a]
            assert pq.read_table(path / new).num_rows == pq.read_table(path / target).num_rows - 1
            # Z-order of day b into several files
            spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(largest))
            z = dt.optimize().where("day = 'b'").executeZOrderBy("x", "y").collect()[0].metrics
            assert z.numFilesAdded >= 2 and z.partitionsOptimized == 1
        finally:
            for k in confs:
                spark.conf.unset(k)
        results[how] = expected
    theirs = delta_rs_rows([str(tmp_path / "native"), str(tmp_path / "tasks")], tmp_path, sql=True)
    for how in ("native", "tasks"):
        same_rows(results[how].select(["id", "x", "y", "day"]),
                  theirs[str(tmp_path / how)].select(["id", "x", "y", "day"]), how)
