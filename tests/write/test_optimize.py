"""Spark-free OPTIMIZE / Z-order / liquid clustering / REORG ... APPLY (PURGE) / auto compaction
(`tahoe.Table.optimize`, `tahoe.write.optimize`, `tahoe.write.auto_compact`).

Oracles, all independent of the code under test:
  * rows: delta-rs (`deltalake`, in a subprocess) reads the same rows after each operation as the
    rows written (hand-built Arrow tables);
  * file counts and bins: derived by hand from the file sizes on disk (`os.path.getsize`) and the
    number of files each append wrote;
  * min/max ranges for skipping: read from the parquet footers of the active files with pyarrow,
    not from tahoe's stats;
  * the log: the commit JSON as the Delta protocol spells it (dataChange=false, the `clustering`
    writer feature, the `delta.clustering` domain, clusteringProvider);
  * metric names: delta-spark's OptimizeMetrics / history operation metrics, written out here;
  * conflicts: delta-spark's rules (a concurrent append commits, a concurrent DELETE of a file
    being rewritten fails with ConcurrentDeleteReadException), checked on the parquet files left on
    disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import AnalysisException, ConcurrentDeleteReadException, DeltaError, InvalidTableOperationError
from tahoe.write.writer import write_table
from tahoe.write.optimize import ArrowBinExecutor, plan_optimize, run_optimize
from tests.write.test_writer import delta_rs_rows, same_rows

# delta-spark's OptimizeMetrics fields (OptimizeMetrics.scala), and the operation metrics its
# OPTIMIZE commit records (DeltaOperationMetrics.OPTIMIZE)
OPTIMIZE_METRICS = {
    "numFilesAdded", "numFilesRemoved", "filesAdded", "filesRemoved", "partitionsOptimized", "zOrderStats",
    "clusteringStats", "numBins", "numBatches", "totalConsideredFiles", "totalFilesSkipped",
    "preserveInsertionOrder", "numFilesSkippedToReduceWriteAmplification",
    "numBytesSkippedToReduceWriteAmplification", "startTimeMs", "endTimeMs", "totalClusterParallelism",
    "totalScheduledTasks", "autoCompactParallelismStats", "deletionVectorStats", "numTableColumns",
    "numTableColumnsWithStats",
}
HISTORY_METRICS = {"numRemovedFiles", "numAddedFiles", "numRemovedBytes", "numAddedBytes", "minFileSize",
                   "p25FileSize", "p50FileSize", "p75FileSize", "maxFileSize", "numDeletionVectorsRemoved"}
DELTA_RS_METRICS = {"numFilesAdded", "numFilesRemoved", "filesAdded", "filesRemoved", "partitionsOptimized",
                    "numBatches", "totalConsideredFiles", "totalFilesSkipped", "preserveInsertionOrder"}


def _points(i: int, n: int = 1000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed + i)
    return pa.table({"id": pa.array(np.arange(i * n, (i + 1) * n), pa.int64()),
                     "x": pa.array(rng.integers(0, 10_000, n), pa.int64()),
                     "y": pa.array(rng.integers(0, 10_000, n), pa.int64())})


def _commits(path: Path) -> list[list[dict]]:
    logdir = path / "_delta_log"
    return [[json.loads(line) for line in (logdir / f).read_text().splitlines() if line.strip()]
            for f in sorted(os.listdir(logdir)) if f.endswith(".json")]


def _active_paths(path: Path) -> list[Path]:
    return [path / p for p in tahoe.Table(str(path)).files(["path"]).column("path").to_pylist()]


def _parquet_files_on_disk(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts}


def _footer_ranges(files: list[Path], col: str) -> list[tuple[int, int]]:
    """(min, max) of `col` per file, from the parquet footers (not tahoe's stats)."""
    out = []
    for f in files:
        md = pq.ParquetFile(f).metadata
        idx = md.schema.to_arrow_schema().get_field_index(col)
        mins = [md.row_group(g).column(idx).statistics.min for g in range(md.num_row_groups)]
        maxs = [md.row_group(g).column(idx).statistics.max for g in range(md.num_row_groups)]
        out.append((min(mins), max(maxs)))
    return out


def _files_maybe_matching(path: Path, x_below: int, y_below: int) -> int:
    files = _active_paths(path)
    xs, ys = _footer_ranges(files, "x"), _footer_ranges(files, "y")
    return sum(1 for (xmin, _), (ymin, _) in zip(xs, ys) if xmin < x_below and ymin < y_below)


def test_compaction_by_partition_metrics_log_and_delta_rs(tmp_path):
    path = tmp_path / "t"
    rows = []
    for i in range(5):
        for day in ("a", "b"):
            t = _points(i * 2 + (day == "b"), n=200).append_column("day", pa.array([day] * 200))
            write_table(str(path), t, partition_by=["day"], mode="append")
            rows.append(t)
    c = _points(99, n=200).append_column("day", pa.array(["c"] * 200))
    write_table(str(path), c, mode="append")
    rows.append(c)
    expected = pa.concat_tables(rows)
    t = tahoe.Table(str(path))
    assert t.version == 10

    # WHERE on the partition column: 'a' (5 files -> 1), 'c' (1 file: nothing to pack)
    m = t.optimize(where="day IN ('a', 'c')")
    assert OPTIMIZE_METRICS <= set(m), OPTIMIZE_METRICS - set(m)
    assert (m["numFilesRemoved"], m["numFilesAdded"], m["partitionsOptimized"]) == (5, 1, 1)
    assert (m["totalConsideredFiles"], m["totalFilesSkipped"], m["version"]) == (6, 1, 11)
    assert m["filesAdded"]["totalFiles"] == 1 and m["filesRemoved"]["totalFiles"] == 5

    commit = _commits(path)[11]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE"
    assert json.loads(info["operationParameters"]["predicate"]) == ["'day IN (a,c)"]   # delta-spark 4's form (Catalyst's unresolved expression)
    assert HISTORY_METRICS <= set(info["operationMetrics"])
    assert info["operationMetrics"]["numRemovedFiles"] == "5" and info["operationMetrics"]["numAddedFiles"] == "1"
    adds = [a["add"] for a in commit if "add" in a]
    removes = [a["remove"] for a in commit if "remove" in a]
    assert len(adds) == 1 and len(removes) == 5
    assert all(a["dataChange"] is False for a in adds + removes)
    assert adds[0]["partitionValues"] == {"day": "a"} and {r["partitionValues"]["day"] for r in removes} == {"a"}
    assert int(info["operationMetrics"]["numAddedBytes"]) == os.path.getsize(path / adds[0]["path"])

    # partition 'b': a target size from the file sizes on disk that makes two bins by hand:
    # the three smallest files fit, the fourth does not; the two largest fit together
    b_files = sorted(os.path.getsize(p) for p in _active_paths(path) if "day=b" in str(p))
    assert len(b_files) == 5
    target = sum(b_files[:3])
    assert b_files[3] + b_files[4] <= target < sum(b_files[:4])
    m = t.optimize(where="day = 'b'", target_size=target)
    assert (m["numFilesRemoved"], m["numFilesAdded"], m["numBins"]) == (5, 2, 2)

    # delta-rs's API shape: compact() of a partition, its metrics (filesAdded as JSON text)
    m = t.optimize.compact(partition_filters=[("day", "=", "b")])
    assert set(m) >= DELTA_RS_METRICS and isinstance(m["filesAdded"], str)
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (2, 1)
    assert json.loads(m["filesRemoved"])["totalFiles"] == 2
    assert sorted(p.parent.name for p in _active_paths(path)) == ["day=a", "day=b", "day=c"]

    # idempotent: nothing left to pack, no commit
    again = t.optimize()
    assert (again["numFilesAdded"], again["numFilesRemoved"], again["version"]) == (0, 0, 13)
    assert len(_commits(path)) == 14
    same_rows(expected, delta_rs_rows([str(path)], tmp_path)[str(path)])


def test_zorder_and_bad_input(tmp_path):
    path = tmp_path / "z"
    parts = [_points(i) for i in range(12)]
    for p in parts:
        write_table(str(path), p, mode="append")
    before = _files_maybe_matching(path, 1000, 1000)
    assert before == 12          # random points: every file spans the whole square

    t = tahoe.Table(str(path))
    v = t.version
    with pytest.raises(AnalysisException, match="DELTA_NON_PARTITION_COLUMN_REFERENCE"):
        t.optimize(where="x > 5")
    with pytest.raises(AnalysisException, match="DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"):
        t.optimize(zorder_by=["nope"])
    with pytest.raises(InvalidTableOperationError, match="size"):
        t.optimize(target_size="lots")
    with pytest.raises(DeltaError, match="not implemented"):
        t.optimize.compact(max_spill_size=1 << 20)
    assert tahoe.Table(str(path)).version == v and len(_commits(path)) == v + 1   # nothing committed

    # Z-order into files of ~1/8 of the data: the (x, y) square cut into 8 Z-curve ranges
    total = sum(os.path.getsize(p) for p in _active_paths(path))
    m = t.optimize(zorder_by=["x", "y"], target_size=total // 8)
    assert m["numFilesRemoved"] == 12 and 7 <= m["numFilesAdded"] <= 9
    assert m["zOrderStats"]["inputOtherFiles"]["num"] == 12
    info = next(a["commitInfo"] for a in _commits(path)[-1] if "commitInfo" in a)
    assert json.loads(info["operationParameters"]["zOrderBy"]) == ["x", "y"]
    after = _files_maybe_matching(path, 1000, 1000)
    assert after <= 0.25 * before, (before, after)
    # files partition the rows: footers' row counts add up, delta-rs reads every row
    assert sum(pq.ParquetFile(p).metadata.num_rows for p in _active_paths(path)) == 12_000
    same_rows(pa.concat_tables(parts), delta_rs_rows([str(path)], tmp_path)[str(path)])

    # delta-rs's z_order(): refuses partition columns as delta-spark does
    with pytest.raises(AnalysisException, match="DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"):
        t.optimize.z_order(["z"])


def test_liquid_clustering_domain_skipping_and_delta_rs(tmp_path):
    path = tmp_path / "liquid"
    t = tahoe.Table.create(str(path), "id BIGINT, x BIGINT, y BIGINT", cluster_by=["x", "y"])
    first = _commits(path)[0]
    proto = next(a["protocol"] for a in first if "protocol" in a)
    assert {"clustering", "domainMetadata"} <= set(proto["writerFeatures"])
    dom = next(a["domainMetadata"] for a in first if "domainMetadata" in a)
    assert dom["domain"] == "delta.clustering" and dom["removed"] is False
    assert json.loads(dom["configuration"]) == {"clusteringColumns": [["x"], ["y"]]}
    assert t.clustering_columns == ["x", "y"]

    with pytest.raises(InvalidTableOperationError, match="DELTA_CLUSTERING_WITH_ZORDER_BY"):
        t.optimize(zorder_by=["x"])
    with pytest.raises(DeltaError):
        tahoe.Table.create(str(tmp_path / "both"), "id BIGINT, x BIGINT", partition_columns=["id"],
                           cluster_by=["x"])

    parts = [_points(i, seed=100) for i in range(12)]
    for p in parts:
        write_table(str(path), p, mode="append")
    before = _files_maybe_matching(path, 1000, 1000)
    assert before == 12
    total = sum(os.path.getsize(p) for p in _active_paths(path))
    t = tahoe.Table(str(path))
    t.set_properties({"delta.targetFileSize": str(total // 8)})
    m = t.optimize()
    assert m["numFilesRemoved"] == 12 and 7 <= m["numFilesAdded"] <= 9
    commit = _commits(path)[-1]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and json.loads(info["operationParameters"]["clusterBy"]) == ["x", "y"]
    adds = [a["add"] for a in commit if "add" in a]
    assert {a.get("clusteringProvider") for a in adds} == {"liquid"}
    assert all(a["dataChange"] is False for a in adds)
    assert _files_maybe_matching(path, 1000, 1000) <= 0.25 * before

    # incremental: the files just clustered form one ZCube, so a second OPTIMIZE leaves them alone
    again = tahoe.Table(str(path)).optimize()
    assert (again["numFilesRemoved"], again["numFilesAdded"]) == (0, 0)

    # ALTER ... CLUSTER BY (y): a new domain configuration; CLUSTER BY NONE: no columns
    tahoe.Table(str(path)).cluster_by(["y"])
    dom = next(a["domainMetadata"] for a in _commits(path)[-1] if "domainMetadata" in a)
    assert json.loads(dom["configuration"]) == {"clusteringColumns": [["y"]]}
    with pytest.raises(AnalysisException):
        tahoe.Table(str(path)).cluster_by(["nope"])
    tahoe.Table(str(path)).cluster_by(None)
    dom = next(a["domainMetadata"] for a in _commits(path)[-1] if "domainMetadata" in a)
    assert json.loads(dom["configuration"]) == {"clusteringColumns": []}
    assert tahoe.Table(str(path)).clustering_columns == []

    same_rows(pa.concat_tables(parts), delta_rs_rows([str(path)], tmp_path)[str(path)])


def test_reorg_purge_rewrites_deletion_vectors_away(tmp_path):
    from tahoe.write.deletion_vectors import delete_rows

    path = tmp_path / "dv"
    data = [_points(i, n=100) for i in range(3)]
    for d in data:
        write_table(str(path), d, mode="append", properties={"delta.enableDeletionVectors": "true"})
    files = sorted(tahoe.Table(str(path)).files(["path"]).column("path").to_pylist())
    # the file holding ids 0..99 (first append); delete its rows 0, 1, 2 by position
    first = next(f for f in files if pq.read_table(path / f).column("id")[0].as_py() == 0)
    delete_rows(str(path), {first: [0, 1, 2]})
    expected = pa.concat_tables(data).filter(pa.compute.greater_equal(pa.concat_tables(data).column("id"), 3))
    same_rows(expected, delta_rs_rows([str(path)], tmp_path, sql=True)[str(path)])

    with pytest.raises(DeltaError, match="APPLY"):
        tahoe.Table(str(path)).reorg(apply="upgrade uniform")
    m = tahoe.Table(str(path)).reorg()
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (1, 1)
    assert m["deletionVectorStats"] == {"numDeletionVectorsRemoved": 1, "numDeletionVectorRowsRemoved": 3}
    commit = _commits(path)[-1]
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "REORG" and info["operationMetrics"]["numDeletionVectorsRemoved"] == "1"
    add = next(a["add"] for a in commit if "add" in a)
    assert add.get("deletionVector") is None and add["dataChange"] is False
    assert pq.read_table(path / add["path"]).num_rows == 97          # deleted rows physically gone
    assert all(tahoe.Table(str(path)).files(["deletionVector"]).column("deletionVector").is_null().to_pylist())
    assert tahoe.Table(str(path)).reorg()["numFilesRemoved"] == 0    # nothing left to purge
    same_rows(expected, delta_rs_rows([str(path)], tmp_path, sql=True)[str(path)])


def test_auto_compaction_after_writes(tmp_path):
    path = tmp_path / "auto"
    a49 = _points(0, n=49 * 10).append_column("day", pa.array(["a"] * 490))
    b60 = _points(1, n=60 * 10).append_column("day", pa.array(["b"] * 600))
    # one write: 49 files in 'a', 60 in 'b' (10 rows each): 'b' reaches delta-spark's 50 small files
    write_table(str(path), pa.concat_tables([a49, b60]), partition_by=["day"], target_file_rows=10,
                properties={"delta.autoOptimize.autoCompact": "true"})
    commits = _commits(path)
    assert len(commits) == 2
    info = next(a["commitInfo"] for a in commits[1] if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and info["operationParameters"]["auto"] == "true"
    assert json.loads(info["operationParameters"]["predicate"]) == ["(`day` <=> 'b')"]
    by_day: dict[str, int] = {}
    for p in _active_paths(path):
        by_day[p.parent.name] = by_day.get(p.parent.name, 0) + 1
    assert by_day == {"day=a": 49, "day=b": 1}
    # one more small file in 'a': 50, compacted after this append
    a1 = _points(2, n=10).append_column("day", pa.array(["a"] * 10))
    write_table(str(path), a1, mode="append")
    assert len(_commits(path)) == 4
    by_day = {}
    for p in _active_paths(path):
        by_day[p.parent.name] = by_day.get(p.parent.name, 0) + 1
    assert by_day == {"day=a": 1, "day=b": 1}
    same_rows(pa.concat_tables([a49, b60, a1]), delta_rs_rows([str(path)], tmp_path)[str(path)])


def test_concurrent_append_commits_and_concurrent_delete_conflicts(tmp_path):
    from tahoe.write.dml import delete

    path = tmp_path / "c"
    parts = [_points(i, n=50) for i in range(4)]
    for p in parts:
        write_table(str(path), p, mode="append")
    log = tahoe.Table(str(path)).log

    # another process appends 3 times between the OPTIMIZE's snapshot and its commit
    plan = plan_optimize(log.snapshot())
    extra = [_points(10 + i, n=50) for i in range(3)]
    script = ("import sys, pyarrow.parquet as pq\nfrom tahoe.write.writer import write_table\n"
              "for f in sys.argv[2:]:\n    write_table(sys.argv[1], pq.read_table(f), mode='append')\n")
    srcs = []
    for i, e in enumerate(extra):
        pq.write_table(e, tmp_path / f"extra{i}.parquet")
        srcs.append(str(tmp_path / f"extra{i}.parquet"))
    r = subprocess.run([sys.executable, "-c", script, str(path), *srcs], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = run_optimize(log, plan, ArrowBinExecutor())
    assert (m["numFilesRemoved"], m["numFilesAdded"], m["version"]) == (4, 1, 7)
    assert len(_active_paths(path)) == 4            # the compacted file + the three appended ones
    same_rows(pa.concat_tables(parts + extra), delta_rs_rows([str(path)], tmp_path)[str(path)])

    # a DELETE commits a removal of a file the OPTIMIZE is rewriting: the OPTIMIZE fails, its new
    # files are deleted, nothing of it committed
    plan = plan_optimize(log.snapshot())
    assert len(plan.removed) == 4
    delete(str(path), "id < 10")                   # rewrites the compacted file (ids 0..199)
    on_disk = _parquet_files_on_disk(path)
    version = tahoe.Table(str(path)).version
    with pytest.raises(ConcurrentDeleteReadException):
        run_optimize(log, plan, ArrowBinExecutor())
    assert tahoe.Table(str(path)).version == version
    assert _parquet_files_on_disk(path) == on_disk
    everything = pa.concat_tables(parts + extra)
    expected = everything.filter(pa.compute.greater_equal(everything.column("id"), 10))
    same_rows(expected, delta_rs_rows([str(path)], tmp_path)[str(path)])


def test_compaction_picks_files_whose_deletion_vectors_pass_the_ratio(tmp_path):
    """delta-spark's optimize.maxDeletedRowsRatio (0.05): a file of any size is compacted once more
    than 5% of its rows are deleted by its DV; as in delta-spark's OptimizeExecutor, a bin of one
    file is left alone by compaction (only REORG rewrites single files)."""
    from tahoe.write.deletion_vectors import delete_rows

    path = tmp_path / "ratio"
    for i in range(2):
        write_table(str(path), _points(i, n=100), mode="append", properties={"delta.enableDeletionVectors": "true"})
    files = sorted(tahoe.Table(str(path)).files(["path"]).column("path").to_pylist(),
                   key=lambda f: pq.read_table(path / f).column("id")[0].as_py())
    delete_rows(str(path), {files[0]: [0, 1, 2, 3, 4]})                 # 5%: not more than the ratio
    delete_rows(str(path), {files[1]: [0, 1, 2, 3, 4, 5]})              # 6%
    m = tahoe.Table(str(path)).optimize(min_file_size=1)              # size alone selects nothing
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (0, 0)        # one file chosen: a bin of one
    delete_rows(str(path), {files[0]: [5]})                            # 6% now too
    m = tahoe.Table(str(path)).optimize(min_file_size=1)
    assert (m["numFilesRemoved"], m["numFilesAdded"]) == (2, 1)
    assert m["deletionVectorStats"] == {"numDeletionVectorsRemoved": 2, "numDeletionVectorRowsRemoved": 12}
    (new,) = tahoe.Table(str(path)).files(["path"]).column("path").to_pylist()
    assert sorted(pq.read_table(path / new).column("id").to_pylist()) == list(range(6, 100)) + list(range(106, 200))


def test_compaction_keeps_zone_less_timestamp_partition_values_verbatim(tmp_path):
    """A timestamp partition value of the zone-less form (delta-spark < 3.3 wrote them: wall-clock
    time, each reader reads it in its own session zone) means another instant in every zone:
    OPTIMIZE must commit it as the files it replaces held it, not as the UTC instant the
    Spark-free reader took it for (`...T12:00:00.000000Z` is noon in London only)."""
    path = str(tmp_path / "t")
    ts = pa.array([1704110400000000] * 3 + [1704196800000000], pa.timestamp("us", tz="UTC"))   # 2024-01-01/02 12:00Z
    write_table(path, pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "ts": ts}), partition_by=["ts"],
                target_file_rows=1)
    log0 = tmp_path / "t" / "_delta_log" / f"{0:020d}.json"
    lines = []
    for line in log0.read_text().splitlines():       # rewritten as the old writers wrote them
        a = json.loads(line)
        if "add" in a:
            a["add"]["partitionValues"]["ts"] = a["add"]["partitionValues"]["ts"][:19].replace("T", " ")
        lines.append(json.dumps(a))
    log0.write_text("\n".join(lines) + "\n")
    for crc in (tmp_path / "t" / "_delta_log").glob("*.crc"):
        crc.unlink()

    metrics = tahoe.Table(path).optimize.compact()
    assert metrics["numFilesRemoved"] == 3 and metrics["numFilesAdded"] == 1   # the single-file partition stays
    files = tahoe.Table(path).files().to_pylist()
    values = sorted(dict(f["partitionValues"])["ts"] for f in files)
    assert values == ["2024-01-01 12:00:00", "2024-01-02 12:00:00"]
    assert sorted(tahoe.Table(path).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
