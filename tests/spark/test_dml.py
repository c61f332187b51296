"""DELETE / UPDATE / MERGE on Spark (`tahoe.spark.DeltaTable`, delta-spark's Python API).

Oracles: delta-rs running the same operations on its own copy of the table (the scenarios of
tests/write/test_dml_differential.py, translated to delta-spark's builder, on all six table
variants), delta-rs reading what the Spark executor wrote (QueryBuilder: deletion vectors, column
mapping) and its `load_cdf`; the by-hand pandas oracle of tests/write/test_dml_random.py for a
seeded random sequence; Spark's own record of the queries it ran (the SQL status store: physical
plans and the scans' "number of files read") for broadcast joins, partition pruning and stats
skipping; expected rows, metrics and history entries derived by hand for the API checks. Spark
work is kept small: one shared session, tables of a few dozen rows.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from tahoe.log import DeltaLog
from tahoe.read.changes import read_changes_arrow
from tests.fixtures.delta_log import commit_infos, latest_version, log_actions
from tests.fixtures.deltars import run_deltars, sorted_rows, source_file
from tests.write.test_dml_differential import (
    COLS, SCENARIOS, SOURCE, VARIANTS, base_rows, cdf_rows, deltars_ops, make_table,
)

SPARK_SCHEMA = "id long, day string, v long, s string"

# delta-rs TableMerger method -> (delta-spark DeltaMergeBuilder method, its keyword for the values)
BUILDER = {
    "when_matched_update": ("whenMatchedUpdate", "set"),
    "when_matched_update_all": ("whenMatchedUpdateAll", None),
    "when_matched_delete": ("whenMatchedDelete", None),
    "when_not_matched_insert": ("whenNotMatchedInsert", "values"),
    "when_not_matched_insert_all": ("whenNotMatchedInsertAll", None),
    "when_not_matched_by_source_update": ("whenNotMatchedBySourceUpdate", "set"),
    "when_not_matched_by_source_delete": ("whenNotMatchedBySourceDelete", None),
}


def spark_df(spark, t: pa.Table, schema: str = SPARK_SCHEMA):
    return spark.createDataFrame([tuple(r.values()) for r in t.to_pylist()], schema)


def run_spark(spark, path: str, ops: list[dict], source) -> list[list]:
    """The ops through delta-spark's API on tahoe; each MERGE's result DataFrame as rows (None
    for DELETE / UPDATE, which return None in delta-spark)."""
    from tahoe.spark import DeltaTable

    out = []
    for op in ops:
        dt = DeltaTable.forPath(spark, path)
        if op["op"] == "delete":
            assert dt.delete(op.get("predicate")) is None
            out.append(None)
            continue
        elif op["op"] == "update":
            assert dt.update(op.get("predicate"), op["updates"]) is None
            out.append(None)
            continue
        else:
            m = dt.alias(op["target_alias"]).merge(source.alias(op["source_alias"]), op["predicate"])
            for name, kw in op["clauses"]:
                method, key = BUILDER[name]
                args = {"condition": kw.get("predicate")}
                if key:
                    args[key] = kw["updates"]
                m = getattr(m, method)(**args)
            r = m.execute()
        out.append([tuple(x) for x in r.collect()])
    return out


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    work = tmp_path_factory.mktemp("oracle")
    src = source_file(SOURCE, work, "source")
    jobs, keys = [], []
    for partitioned in (True, False):
        for name, ops in SCENARIOS.items():
            path = str(work / f"{name}-{partitioned}")
            make_table(path, partitioned, {})
            jobs.append({"path": path, "ops": deltars_ops(ops, src), "cdf_from": 1})
            keys.append((name, partitioned))
    out = {}
    for k, r in zip(keys, run_deltars(jobs, work / "rs")):
        assert r["error"] is None, (k, r["error"])
        out[k] = r
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_spark_dml_matches_delta_rs(spark, variant, oracle, tmp_path):
    """Every scenario (every clause kind, NULLs in conditions) on Spark: the rows tahoe reads =
    delta-rs's rows for the same operations; delta-rs reads the table the Spark executor wrote
    and gets the same rows; change rows (tahoe's reader, and delta-rs's load_cdf where it can:
    not column mapping) = delta-rs's own load_cdf."""
    from tahoe.spark import read_delta

    partitioned, props = VARIANTS[variant]
    source = spark_df(spark, SOURCE)
    paths = {}
    for name, ops in SCENARIOS.items():
        path = str(tmp_path / name)
        make_table(path, partitioned, props)
        run_spark(spark, path, ops, source)
        paths[name] = path
        want = oracle[(name, partitioned)]
        got = read_delta(spark, path).toArrow()
        assert sorted_rows(got, COLS) == sorted_rows(want["rows"], COLS), name
        assert cdf_rows(read_changes_arrow(DeltaLog.for_table(path), 1)) == cdf_rows(want["cdf"]), name
    cdf = "delta.columnMapping.mode" not in props
    read = run_deltars([{"path": p, "ops": [], "cdf_from": 1 if cdf else None} for p in paths.values()],
                       tmp_path / "rs")
    for (name, path), r in zip(paths.items(), read):
        assert r["error"] is None, (name, r["error"])
        want = oracle[(name, partitioned)]
        assert sorted_rows(r["rows"], COLS) == sorted_rows(want["rows"], COLS), name
        if cdf:
            assert cdf_rows(r["cdf"]) == cdf_rows(want["cdf"]), name


def test_dv_mode_on_spark(spark, tmp_path):
    """Merge-on-read on Spark: a DELETE of a few rows adds no data file (only DVs on the same
    files); an UPDATE writes only the updated rows; the result reads the same (hand-derived rows)
    through the fast path, the data-source path and delta-rs; the metrics and result DataFrames
    are delta-spark's."""
    from tahoe.spark import DeltaTable, read_delta

    path = str(tmp_path / "t")
    make_table(path, True, {"delta.enableDeletionVectors": "true"})
    dt = DeltaTable.forPath(spark, path)
    assert dt.delete("id IN (1, 2, 30)") is None                        # as delta-spark's
    assert dt.history(1).collect()[0].operationMetrics["numDeletedRows"] == "3"
    a = log_actions(path, 1)
    assert "add" in a and all(x.get("deletionVector") is not None for x in a["add"])   # DVs only
    assert {x["path"] for x in a["add"]} == {x["path"] for x in a["remove"]}         # same data files
    assert len(a["add"]) == 3 and "cdc" in a                                         # CDF on: DV deletes need cdc
    from pyspark.sql import functions as F

    assert dt.update(F.col("id").isin(4, 5), {"v": F.lit(-1)}) is None
    a = log_actions(path, 2)
    new = [x for x in a["add"] if x.get("deletionVector") is None]
    assert sum(json.loads(x["stats"])["numRecords"] for x in new) == 2              # only the changed rows
    want = [(i, d, -1 if i in (4, 5) else v, s) for i, d, v, s in sorted_rows(base_rows(), COLS)
            if i not in (1, 2, 30)]
    key = lambda r: tuple((x is not None, x if x is not None else 0) for x in r)   # noqa: E731
    want = sorted(want, key=key)
    assert sorted_rows(read_delta(spark, path).toArrow(), COLS) == want
    assert sorted_rows(spark.read.format("delta").load(path).toArrow(), COLS) == want
    (rs,) = run_deltars([{"path": path, "ops": [], "cdf_from": 1}], tmp_path / "rs")
    assert rs["error"] is None and sorted_rows(rs["rows"], COLS) == want
    cdf = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in rs["cdf"].to_pylist())
    assert cdf == [(1, "delete", 1), (2, "delete", 1), (4, "update_postimage", 2), (4, "update_preimage", 2),
                   (5, "update_postimage", 2), (5, "update_preimage", 2), (30, "delete", 1)]
    h = commit_infos(path)
    assert [c["operation"] for c in h] == ["WRITE", "DELETE", "UPDATE"]
    m = h[1]["operationMetrics"]
    assert (m["numDeletedRows"], m["numAddedFiles"], m["numRemovedFiles"], m["numDeletionVectorsAdded"],
            m["numCopiedRows"]) == ("3", "0", "0", "3", "0")
    m = h[2]["operationMetrics"]
    assert (m["numUpdatedRows"], m["numCopiedRows"], m["numAddedFiles"]) == ("2", "0", str(len(new)))


def test_merge_api_errors_and_schema_evolution(spark, tmp_path):
    """delta-spark's builder with Column and SQL arguments and aliases, every clause kind in one
    MERGE (hand-derived rows, metrics and result DataFrame); the multiple-match error (and the
    unconditional-delete exception to it); bad input — unknown column, a type that cannot be
    stored, a CHECK constraint broken by an UPDATE — fails with a clear error and commits nothing;
    withSchemaEvolution adds the source's new column."""
    from pyspark.sql import functions as F

    from tahoe.errors import AnalysisException, ConstraintViolationError, DeltaError, DeltaUnsupportedOperationException
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a", 10), (2, "b", 20), (3, "c", 30), (4, None, 40)], "id long, k string, v long") \
        .coalesce(1).write.format("delta").option("delta.constraints.vnonneg", "v >= 0").save(path)
    src = spark.createDataFrame([(1, "A", 11), (3, "C", None), (5, "E", 50), (6, "F", 60)], "id long, k string, v long")
    dt = DeltaTable.forPath(spark, path)
    r = (dt.alias("t").merge(src.alias("s"), F.col("t.id") == F.col("s.id"))
         .whenMatchedDelete(condition=F.col("s.v").isNull())
         .whenMatchedUpdate(set={"v": F.col("s.v") + 1, "k": "s.k"})
         .whenNotMatchedInsert(condition="s.id = 5", values={"id": "s.id", "k": "s.k", "v": "s.v"})
         .whenNotMatchedInsertAll()
         .whenNotMatchedBySourceUpdate(condition="t.k IS NULL", set={"k": F.lit("none")})
         .whenNotMatchedBySourceDelete()
         .execute())
    assert r.columns == ["num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows"]
    assert {f.dataType.simpleString() for f in r.schema.fields} == {"bigint"}   # nullable longs, as its command
    assert tuple(r.collect()[0]) == (6, 2, 2, 2)
    assert sorted(tuple(x) for x in dt.toDF().collect()) == [(1, "A", 12), (4, "none", 40), (5, "E", 50),
                                                             (6, "F", 60)]
    h = commit_infos(path)[-1]
    assert h["operation"] == "MERGE"
    m = h["operationMetrics"]
    assert {k: m[k] for k in ("numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated",
                              "numTargetRowsMatchedUpdated", "numTargetRowsNotMatchedBySourceUpdated",
                              "numTargetRowsDeleted", "numTargetRowsMatchedDeleted",
                              "numTargetRowsNotMatchedBySourceDeleted", "numTargetRowsCopied")} == {
        "numSourceRows": "4", "numTargetRowsInserted": "2", "numTargetRowsUpdated": "2",
        "numTargetRowsMatchedUpdated": "1", "numTargetRowsNotMatchedBySourceUpdated": "1",
        "numTargetRowsDeleted": "2", "numTargetRowsMatchedDeleted": "1",
        "numTargetRowsNotMatchedBySourceDeleted": "1", "numTargetRowsCopied": "0"}
    p = h["operationParameters"]
    assert [c["actionType"] for c in json.loads(p["matchedPredicates"])] == ["delete", "update"]
    assert [c["actionType"] for c in json.loads(p["notMatchedPredicates"])] == ["insert", "insert"]
    assert [c["actionType"] for c in json.loads(p["notMatchedBySourcePredicates"])] == ["update", "delete"]

    # a target row matched by two source rows: delta-spark's error, nothing committed
    v = latest_version(path)
    dup = spark.createDataFrame([(1, "x", 1), (1, "y", 2)], "id long, k string, v long")
    with pytest.raises(DeltaUnsupportedOperationException,
                       match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE") as e:
        dt.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert e.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert latest_version(path) == v
    # ... unless the only matched clause is an unconditional delete
    r = dt.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedDelete().execute()
    assert tuple(r.collect()[0]) == (1, 0, 1, 0)
    v = latest_version(path)
    assert sorted(x.id for x in dt.toDF().collect()) == [4, 5, 6]

    # bad input: a clear error, nothing committed
    with pytest.raises(AnalysisException, match="nope"):
        dt.delete("nope = 1")
    with pytest.raises(AnalysisException, match="v"):
        dt.update("id = 4", {"v": "array(1, 2)"})
    with pytest.raises(ConstraintViolationError, match="vnonneg"):
        dt.update("id = 4", {"v": "-1"})
    with pytest.raises(DeltaError):
        dt.merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"nope": "s.v"}).execute()
    assert latest_version(path) == v
    assert sorted(tuple(x) for x in dt.toDF().collect()) == [(4, "none", 40), (5, "E", 50), (6, "F", 60)]

    # schema evolution: the source's new column joins the table
    evo = spark.createDataFrame([(4, "n", 41, True), (7, "g", 70, False)], "id long, k string, v long, w boolean")
    r = (dt.alias("t").merge(evo.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll()
         .withSchemaEvolution().execute())
    assert tuple(r.collect()[0]) == (2, 1, 0, 1)
    assert sorted(tuple(x) for x in dt.toDF().collect()) == [(4, "n", 41, True), (5, "E", 50, None),
                                                             (6, "F", 60, None), (7, "g", 70, False)]


def test_concurrent_merges(spark, tmp_path):
    """Two MERGEs planned on the same snapshot into disjoint partitions both commit; one into a
    partition a concurrent MERGE rewrote fails with ConcurrentAppendException (delta-spark's
    conflict rules); one racing an OPTIMIZE-style dataChange=false rewrite of the files it
    read fails too (delta-spark checks the compaction's added files first: ConcurrentAppendException). Oracle: the exception classes and the rows (hand-derived)."""
    import shutil

    from tahoe.errors import ConcurrentAppendException
    from tahoe.protocol.actions import AddFile
    from tahoe.spark.dml import run_dml
    from tahoe.spark.types import from_spark_schema
    from tahoe.txn import Transaction
    from tahoe.write.dml_plan import MergeClause, plan_merge

    path = str(tmp_path / "t")
    spark.createDataFrame([(i, ["a", "b", "c"][i % 3], i) for i in range(9)], "id long, p string, v long") \
        .write.format("delta").option("partitionBy", "p").save(path)
    log = DeltaLog.for_table(path)
    stale = log.snapshot()

    def merge(snap, part: str, v: int):
        src = spark.createDataFrame([(i, part, v) for i in range(9) if ["a", "b", "c"][i % 3] == part],
                                    "id long, p string, v long")
        plan = plan_merge(snap, from_spark_schema(src.schema), f"t.p = '{part}' AND t.id = s.id AND t.p = s.p",
                          [MergeClause("matched", "update", None, {"v": "s.v"})], "t", "s")
        return run_dml(spark, log, snap, plan, src.alias("s"))

    merge(stale, "a", 100)
    merge(stale, "b", 200)                      # disjoint partition: commits
    with pytest.raises(ConcurrentAppendException):
        merge(stale, "a", 300)                  # files were added where it read (delta-spark checks that first)
    rows = sorted((r.id, r.p, r.v) for r in spark.read.format("delta").load(path).collect())
    assert rows == sorted((i, p, {"a": 100, "b": 200}.get(p, i)) for i, p in
                          ((i, ["a", "b", "c"][i % 3]) for i in range(9)))

    # OPTIMIZE-style rewrite (dataChange=false) of partition c's files racing a MERGE into c
    before = log.snapshot()
    txn = Transaction(log, "OPTIMIZE", {"predicate": "[]"}, snapshot=before)
    olds = [a for a in before.add_files() if a.partition_values.get("p") == "c"]
    news = []
    for a in olds:
        new_rel = a.path.replace(".parquet", "-compacted.parquet")
        shutil.copy(os.path.join(path, a.path), os.path.join(path, new_rel))
        news.append(AddFile(path=new_rel, partition_values=a.partition_values, size=a.size,
                            modification_time=a.modification_time, data_change=False, stats=a.stats))
    txn.read_files(olds)
    txn.remove_files([a.remove(0, data_change=False) for a in olds])
    txn.add_files(news)
    txn.commit()
    with pytest.raises(ConcurrentAppendException):   # delta-spark: its adds come first (dataChange or not)
        merge(before, "c", 500)
    assert sorted(r.v for r in spark.read.format("delta").load(path).filter("p = 'c'").collect()) == [2, 5, 8]


def test_row_tracking_on_spark(spark, tmp_path):
    """Row tracking: an UPDATE (copy-on-write) keeps every rewritten row's row id and gives the
    updated row a new row commit version, through the materialized columns the table's
    configuration names. Oracle: the files and the log read with pyarrow / json, the ids derived
    by hand (one file of 4 rows, baseRowId 0: row ids = positions; version 0)."""
    import pyarrow.parquet as pq

    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": pa.array([10, 20, 30, 40], pa.int64())}),
                properties={"delta.enableRowTracking": "true"})
    DeltaTable.forPath(spark, path).update("id = 3", {"v": "v + 1"})
    meta = log_actions(path, 0)["metaData"][0]["configuration"]
    rid, rcv = (meta["delta.rowTracking.materializedRowIdColumnName"],
                meta["delta.rowTracking.materializedRowCommitVersionColumnName"])
    a = log_actions(path, 1)
    got = {}
    for add in a["add"]:
        t = pq.read_table(os.path.join(path, add["path"]))
        for i, (id_, r, c) in enumerate(zip(t.column("id").to_pylist(), t.column(rid).to_pylist(),
                                            t.column(rcv).to_pylist())):
            got[id_] = (r if r is not None else add["baseRowId"] + i,
                        c if c is not None else add["defaultRowCommitVersion"])
    assert got == {1: (0, 0), 2: (1, 0), 3: (2, 1), 4: (3, 0)}


# --- what Spark ran: plans and files read ------------------------------------------------------------

class SparkQueries:
    """The SQL executions Spark records while the block runs (its SQL status store, which the
    UI reads): physical plans and metrics. Waits for the listener to record each execution's end."""

    def __init__(self, spark):
        self.store = spark._jsparkSession.sharedState().statusStore()

    def _all(self) -> list:
        out, it = [], self.store.executionsList().iterator()
        while it.hasNext():
            out.append(it.next())
        return out

    def __enter__(self):
        self.before = {e.executionId() for e in self._all()}
        return self

    def __exit__(self, *exc):
        import time

        deadline = time.monotonic() + 120
        while True:
            self.executions = [e for e in self._all() if e.executionId() not in self.before]
            if all(e.completionTime().isDefined() for e in self.executions) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return False

    def plans(self) -> list[str]:
        return [e.physicalPlanDescription() for e in self.executions]

    def metric(self, name: str) -> int:
        """The sum of the metric `name` over the plan nodes the executions ran. A node shared by
        several plans — the initial and final plan of an adaptive query, a cached relation's
        plan under every query that reads the cache — is one accumulator: counted once."""
        seen: dict[int, int] = {}
        for e in self.executions:
            values = self.store.executionMetrics(e.executionId())
            it = e.metrics().iterator()
            while it.hasNext():
                m = it.next()
                if m.name() == name:
                    v = values.get(m.accumulatorId())
                    if v.isDefined():
                        seen[m.accumulatorId()] = int(str(v.get()).replace(",", ""))
        return sum(seen.values())


def _partitioned_table(spark, path: str, dv: bool) -> None:
    """ids 0..39, p = a/b/c/d for ids 0-9 / 10-19 / 20-29 / 30-39, two files of 5 ids each per
    partition (8 files, id ranges 0-4, 5-9, 10-14, ...)."""
    from tahoe.write.writer import write_table

    write_table(path, pa.table({"id": pa.array(range(40), pa.int64()), "p": [["a", "b", "c", "d"][i // 10] for i in range(40)],
                                "v": pa.array(range(40), pa.int64())}),
                partition_by=["p"], target_file_rows=5, properties={"delta.enableDeletionVectors": str(dv).lower()})


@pytest.mark.parametrize("dv", [True, False])
def test_spark_dml_reads_only_candidate_files(spark, tmp_path, dv):
    """Partition pruning and stats skipping on the target side: Spark's scans of a DELETE /
    UPDATE / MERGE whose condition names one partition and an id range read only the one file
    (of 8) whose partition and min/max can hold a matching row — counted by Spark itself
    ("number of files read" of every scan the operation ran). With copy-on-write the touched
    file is read again for its copied rows (2); deletion vectors need no second read."""
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    _partitioned_table(spark, path, dv)
    dt = DeltaTable.forPath(spark, path)
    reads = 1 if dv else 2
    with SparkQueries(spark) as q:
        dt.delete("p = 'b' AND id >= 17")                   # files of b: ids 10-14, 15-19
    assert q.metric("number of files read") == reads
    with SparkQueries(spark) as q:
        dt.update("p = 'd' AND id < 33", {"v": "-v"})       # files of d: 30-34, 35-39
    assert q.metric("number of files read") == reads
    src = spark.createDataFrame([(21, "c", 0), (22, "c", 0)], "id long, p string, v long")
    with SparkQueries(spark) as q:
        (dt.alias("t").merge(src.alias("s"), "t.id = s.id AND t.p = 'c' AND t.id < 25")
         .whenMatchedUpdate(set={"v": "s.v"}).execute())    # files of c: 20-24, 25-29
    assert q.metric("number of files read") == reads
    rows = {r.id: r.v for r in dt.toDF().collect()}
    assert sorted(set(range(40)) - set(rows)) == [17, 18, 19]
    assert [rows[i] for i in (30, 31, 32, 33, 21, 22, 23)] == [-30, -31, -32, 33, 0, 0, 23]


def test_small_merge_source_is_broadcast(spark, tmp_path):
    """A MERGE whose source Spark estimates under spark.sql.autoBroadcastJoinThreshold joins it
    by broadcast: the physical plans Spark ran have a BroadcastHashJoin whose broadcast side
    scans the source (its parquet file, or the source as the executor materialized it) and not
    the target (2,000 rows in files larger than the threshold: the target is never the one
    sent). With broadcasting off (threshold -1) the same MERGE shuffles both sides instead."""
    import pyarrow.parquet as pq

    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array(range(2000), pa.int64()), "v": [f"value-{i:06d}" for i in range(2000)]}),
                target_file_rows=500)
    src_path = str(tmp_path / "source.parquet")
    pq.write_table(pa.table({"id": pa.array([3, 7, 5000], pa.int64()), "v": ["x", "y", "z"]}), src_path)
    target_bytes = min(a.size for a in DeltaLog.for_table(path).snapshot().add_files())
    source_bytes = os.path.getsize(src_path)
    threshold = (target_bytes + source_bytes) // 2
    assert source_bytes < threshold < target_bytes

    def source_broadcast(plans: list[str]) -> bool:
        sides = [side for p in plans for side in _broadcast_sides(p)]
        return any(("source.parquet" in side or "localCheckpoint" in side) and str(tmp_path / "t") not in side
                   for side in sides)

    dt = DeltaTable.forPath(spark, path)
    old = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    try:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(threshold))
        for upsert in (False, True):      # an upsert materializes the source first (it reads it twice)
            with SparkQueries(spark) as q:
                mb = dt.alias("t").merge(spark.read.parquet(src_path).alias("s"), "t.id = s.id").whenMatchedUpdateAll()
                r = (mb.whenNotMatchedInsertAll() if upsert else mb).execute()
            assert tuple(r.collect()[0]) == ((3, 2, 0, 1) if upsert else (2, 2, 0, 0))
            assert source_broadcast(q.plans()), q.plans()
            assert not any("SortMergeJoin" in p for p in q.plans())
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        with SparkQueries(spark) as q:
            (dt.alias("t").merge(spark.read.parquet(src_path).alias("s"), "t.id = s.id")
             .whenMatchedUpdateAll().execute())
        assert not source_broadcast(q.plans())
        assert any("SortMergeJoin" in p for p in q.plans())
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", old)
    assert sorted((r.id, r.v) for r in dt.toDF().filter("id IN (3, 7, 5000)").collect()) == [
        (3, "x"), (7, "y"), (5000, "z")]


def test_small_upsert_writes_inserts_in_the_tasks_and_leaves_nothing_on_failure(spark, tmp_path):
    """An upsert whose source is broadcast writes its inserts with pyarrow in the tasks through a
    staging directory (no Spark write job: no InsertIntoHadoopFsRelationCommand among the plans).
    Oracles: rows by hand, read back by delta-rs; the inserts land in their partition directories
    with hive-style names; the commit's numTargetRowsInserted counts them. A CHECK constraint that
    an inserted row breaks fails the MERGE with delta-spark's error class: the version stays, no
    staging directory and no new data file is left on disk."""
    from tahoe.errors import ConstraintViolationError
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    (spark.createDataFrame([(i, "a" if i % 2 else "b", i * 10) for i in range(20)], "id long, p string, v long")
     .write.format("delta").partitionBy("p").option("delta.enableDeletionVectors", "true")
     .option("delta.constraints.vnonneg", "v >= 0").save(path))
    dt = DeltaTable.forPath(spark, path)
    def local(rows):   # (a local relation: its size known, so broadcast)
        return spark.createDataFrame(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                                               "p": [r[1] for r in rows], "v": pa.array([r[2] for r in rows], pa.int64())}))

    src = local([(3, "a", 333), (100, "a", 1000), (101, "c", 1010)])
    with SparkQueries(spark) as q:
        (dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll()
         .execute())
    assert any("BroadcastHashJoin" in p for p in q.plans())
    assert not any("InsertIntoHadoopFsRelationCommand" in p for p in q.plans())
    want = sorted([(i, "a" if i % 2 else "b", i * 10) for i in range(20) if i != 3] +
                  [(3, "a", 333), (100, "a", 1000), (101, "c", 1010)])
    (rs,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs")
    assert rs["error"] is None and sorted_rows(rs["rows"], ["id", "p", "v"]) == want
    adds = [a["path"] for a in log_actions(path, latest_version(path)).get("add", [])]
    assert {a.split("/")[0] for a in adds} == {"p=a", "p=c"} and not any("staging" in a for a in adds)
    metrics = commit_infos(path)[-1]["operationMetrics"]
    assert metrics["numTargetRowsInserted"] == "2" and metrics["numTargetRowsUpdated"] == "1"

    def files() -> set[str]:
        return {os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns}

    before, version = files(), latest_version(path)
    bad = local([(5, "a", 55), (200, "a", -1)])
    with pytest.raises(ConstraintViolationError) as e:
        dt.alias("t").merge(bad.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert e.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" and "vnonneg" in str(e.value)
    assert latest_version(path) == version
    assert files() == before
    assert not [n for n in os.listdir(path) if n.startswith("_tahoe_staging")]


def test_small_upsert_computes_identity_and_generated_columns_of_its_inserts(spark, tmp_path):
    """The inserts of an upsert with a broadcast source (written in the tasks) get identity values
    above the table's high-water mark, on the column's step, distinct; generated columns
    computed; the high-water mark moves to the largest value written. Oracle: the generator's
    definition (start 10, step 5) and the expression (x * 2), values derived by hand."""
    from tahoe import Table
    from tahoe.spark import DeltaTable, IdentityGenerator, write_delta

    path = str(tmp_path / "ident")
    (DeltaTable.create(spark).location(path)
        .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator(start=10, step=5))
        .addColumn("x", "INT")
        .addColumn("y", "INT", generatedAlwaysAs="x * 2")
        .property("delta.enableDeletionVectors", "true")
        .execute())
    write_delta(spark.sql("select cast(id as int) as x from range(6)"), path)
    before = {r.x: r.id for r in DeltaTable.forPath(spark, path).toDF().collect()}
    src = spark.createDataFrame(pa.table({"x": pa.array([2, 100, 101, 102], pa.int32())}))
    (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.x = s.x")
     .whenMatchedUpdate(set={"x": "s.x"}).whenNotMatchedInsert(values={"x": "s.x"}).execute())
    rows = {r.x: (r.id, r.y) for r in DeltaTable.forPath(spark, path).toDF().collect()}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5, 100, 101, 102]
    assert all(rows[x] == (before[x], 2 * x) for x in range(6))
    new_ids = [rows[x][0] for x in (100, 101, 102)]
    assert len(set(new_ids)) == 3 and all(i > max(before.values()) and (i - 10) % 5 == 0 for i in new_ids)
    assert [rows[x][1] for x in (100, 101, 102)] == [200, 202, 204]
    assert int(Table(path).schema.field("id").metadata["delta.identity.highWaterMark"]) == max(new_ids)


def test_small_upsert_writes_plain_inserts_from_the_driver_without_an_inserts_job(spark, tmp_path):
    """An upsert whose source is broadcast and whose one insert clause takes bare columns of the
    table's types, on a table that computes and checks nothing, collects its insert candidates
    with the source and writes the unmatched ones from the driver: no anti join, no write job.
    Session time zone Los Angeles, partitioned by a timestamp (the log's value: the UTC instant,
    delta-spark's write.utcTimestampPartitionValues default). Oracles: rows by hand, read back by
    delta-rs; numSourceRows / numTargetRowsInserted / numOutputRows by hand; no staging left."""
    import datetime as dt

    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    utc = dt.timezone.utc
    t0, t1 = dt.datetime(2024, 1, 1, 7, 30, tzinfo=utc), dt.datetime(2024, 1, 2, 3, 0, tzinfo=utc)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        def local(rows):   # (a local relation: its size known, so broadcast)
            return spark.createDataFrame(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                                                   "ts": pa.array([r[1] for r in rows], pa.timestamp("us", "UTC")),
                                                   "v": pa.array([r[2] for r in rows], pa.float64())}))

        local([(i, t0 if i % 2 else t1, i / 2) for i in range(12)]).write.format("delta").partitionBy("ts") \
            .option("delta.enableDeletionVectors", "true").save(path)
        src = local([(3, t0, 33.5), (7, t1, 77.5), (100, t1, None), (101, t0, 1.5), (102, t1, -0.0)])
        with SparkQueries(spark) as q:
            res = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
                   .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        plans = q.plans()
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert [tuple(r) for r in res.collect()] == [(5, 2, 0, 3)]
    assert not any("LeftAnti" in p or "InsertIntoHadoopFsRelationCommand" in p for p in plans)
    want = sorted([(i, t0 if i % 2 else t1, i / 2) for i in range(12) if i not in (3, 7)] +
                  [(3, t0, 33.5), (7, t1, 77.5), (100, t1, None), (101, t0, 1.5), (102, t1, -0.0)])
    (rs,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs")
    assert rs["error"] is None
    got = sorted_rows(rs["rows"], ["id", "ts", "v"])
    assert [(i, _as_utc(ts), v) for i, ts, v in got] == want
    metrics = commit_infos(path)[-1]["operationMetrics"]
    assert (metrics["numSourceRows"], metrics["numTargetRowsInserted"], metrics["numTargetRowsUpdated"]) == \
        ("5", "3", "2")
    adds = log_actions(path, latest_version(path)).get("add", [])
    inserted = [a for a in adds if "deletionVector" not in a or a.get("deletionVector") is None]
    assert {a["partitionValues"]["ts"] for a in inserted} <= {"2024-01-01T07:30:00.000000Z", "2024-01-02T03:00:00.000000Z"}
    assert all(a["path"].startswith("ts=") and a["path"].count("/") == 1 for a in inserted)
    assert not [n for n in os.listdir(path) if n.startswith("_tahoe_staging")]


def _as_utc(ts):
    import datetime as dt

    if isinstance(ts, str):
        ts = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("case", ["overflowing cast", "null into NOT NULL"])
def test_small_upsert_evaluates_insert_values_on_unmatched_rows_only(spark, tmp_path, case):
    """delta-spark evaluates an insert clause's values (their store-assignment cast) and the
    table's NOT NULL checks only on the source rows no target row matches. A matched source row
    whose value would overflow the target's INT (ANSI store assignment raises), or that is NULL
    in a NOT NULL column, does not fail the MERGE when the matched clause does not write it.
    Oracle: the rows by hand (delta-spark's semantics: only inserted rows are cast and checked)."""
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    if case == "overflowing cast":
        spark.createDataFrame([(1, 10), (2, 20)], "id long, x int").write.format("delta") \
            .option("delta.enableDeletionVectors", "true").save(path)
        src = spark.createDataFrame(pa.table({"id": pa.array([1, 5], pa.int64()), "x": pa.array([1 << 40, 50], pa.int64())}))
    else:
        DeltaTable.create(spark).location(path).addColumn("id", "BIGINT").addColumn("x", "INT", nullable=False) \
            .property("delta.enableDeletionVectors", "true").execute()
        spark.createDataFrame([(1, 10), (2, 20)], "id long, x int").write.format("delta").mode("append").save(path)
        src = spark.createDataFrame(pa.table({"id": pa.array([1, 5], pa.int64()), "x": pa.array([None, 50], pa.int32())}))
    (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
     .whenMatchedUpdate(set={"id": "s.id + 100"}).whenNotMatchedInsertAll().execute())
    got = sorted(tuple(r) for r in DeltaTable.forPath(spark, path).toDF().collect())
    assert got == [(2, 20), (5, 50), (101, 10)]


def _broadcast_sides(plan: str) -> list[str]:
    """The text of each BroadcastExchange's subtree in a formatted physical plan (its node
    line and the lines indented under it), with the nodes' details (the "(n) Scan parquet ...
    Location: ..." sections below the tree) appended for the scans the subtree holds."""
    lines = plan.splitlines()
    tree_end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    tree, details = lines[:tree_end], "\n".join(lines[tree_end:])
    sections = {}
    for block in details.split("\n\n"):
        head = block.strip().split("\n", 1)[0]
        if head.startswith("("):
            sections[head.split(")")[0] + ")"] = block
    out = []
    for i, line in enumerate(tree):
        if "BroadcastExchange" not in line:
            continue
        indent = len(line) - len(line.lstrip(" :+-*"))
        sub = [line]
        for nxt in tree[i + 1:]:
            if len(nxt) - len(nxt.lstrip(" :+-*")) <= indent:
                break
            sub.append(nxt)
        text = "\n".join(sub)
        for node in sub:
            n = node.strip().rsplit("(", 1)[-1].rstrip(")")
            if n.isdigit() and f"({n})" in sections:
                text += "\n" + sections[f"({n})"]
        out.append(text)
    return out


def test_insert_only_merge_appends_without_removing(spark, tmp_path):
    """A MERGE with only insert clauses rewrites nothing: its commit has add actions for the new
    rows and no remove action (copy-on-write and deletion vectors alike); the rows are the old
    ones plus the source rows no target row matched (derived by hand)."""
    from tahoe.spark import DeltaTable

    for dv in (False, True):
        path = str(tmp_path / f"t{dv}")
        _partitioned_table(spark, path, dv)
        src = spark.createDataFrame([(3, "a", 0), (50, "b", 5), (51, "z", 6)], "id long, p string, v long")
        r = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
             .whenNotMatchedInsertAll().execute())
        assert tuple(r.collect()[0]) == (2, 0, 0, 2)
        a = log_actions(path, 1)
        assert "remove" not in a and sum(json.loads(x["stats"])["numRecords"] for x in a["add"]) == 2
        assert all(x["dataChange"] for x in a["add"])
        rows = sorted((x.id, x.p, x.v) for x in spark.read.format("delta").load(path).collect())
        assert rows == sorted([(i, "abcd"[i // 10], i) for i in range(40)] + [(50, "b", 5), (51, "z", 6)])


def test_random_dml_sequence_on_spark(spark, tmp_path):
    """A shorter seeded random sequence (tests/write/test_dml_random.py) through delta-spark's
    API on tahoe's Spark executor — partitioned, deletion vectors — checked after each step
    against the same by-hand pandas oracle."""
    from tahoe.spark import DeltaTable, read_delta
    from tests.write import test_dml_random as R

    methods = {("matched", "update"): ("whenMatchedUpdate", "set"), ("matched", "delete"): ("whenMatchedDelete", None),
               ("notMatched", "insert"): ("whenNotMatchedInsert", "values"),
               ("notMatchedBySource", "update"): ("whenNotMatchedBySourceUpdate", "set"),
               ("notMatchedBySource", "delete"): ("whenNotMatchedBySourceDelete", None)}

    def metrics(path: str) -> dict:
        return {k: int(v) for k, v in commit_infos(path)[-1]["operationMetrics"].items()}

    def run(path: str, step) -> dict[str, int]:
        dt = DeltaTable.forPath(spark, path)
        if step.op == "delete":
            assert dt.delete(step.cond.sql()) is None
            return {"deleted": metrics(path)["numDeletedRows"], "updated": 0, "inserted": 0}
        if step.op == "update":
            assert dt.update(step.cond.sql() if step.cond else None, {c: v.sql() for c, v in step.values.items()}) is None
            return {"deleted": 0, "updated": metrics(path)["numUpdatedRows"], "inserted": 0}
        src = spark.createDataFrame([tuple(r[c] for c in R.COLS) for r in step.source], "id long, p string, v long, s string")
        mb = dt.alias("t").merge(src.alias("s"), step.cond.sql())
        for c in step.clauses:
            cond = c.cond.sql() if c.cond else None
            if c.action != "delete" and c.values is None:
                mb = (mb.whenMatchedUpdateAll if c.kind == "matched" else mb.whenNotMatchedInsertAll)(condition=cond)
                continue
            method, key = methods[(c.kind, c.action)]
            kw = {"condition": cond}
            if key:
                kw[key] = {k: v.sql() for k, v in c.values.items()}
            mb = getattr(mb, method)(**kw)
        row = mb.execute().collect()[0]
        return {"deleted": row.num_deleted_rows, "updated": row.num_updated_rows, "inserted": row.num_inserted_rows}

    path = str(tmp_path / "t")
    R.make_table(path, True, True)
    R.check_sequence(path, R.sequence(21, 12, R.initial_rows()), run, lambda p: read_delta(spark, p).toArrow())


def test_merge_stores_structs_inside_arrays_by_name_on_spark(spark, tmp_path):
    """The Spark executor on the cases of the Spark-free test (tests/write/test_dml_rules.py,
    rows derived by hand there): an array of structs with fields in another order and as strings
    stored by name with ANSI casts, NULL element / array / struct kept; a struct field the table
    lacks fails without schema evolution and joins the element struct with it; a string that is
    no number fails at run time ([CAST_INVALID_INPUT]); nothing is committed by a failure."""
    from tahoe.errors import AnalysisException
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.write.test_dml_rules import (
        ARR_BAD_VALUE, ARR_EVOLVED, ARR_MERGED, ARR_NEW_FIELD, ARR_SOURCE, ARR_TARGET,
    )

    path = str(tmp_path / "t")
    write_table(path, ARR_TARGET)
    dt = DeltaTable.forPath(spark, path)

    def merge(src: pa.Table, evolve: bool = False):
        b = dt.alias("t").merge(spark.createDataFrame(src.to_pylist(), _spark_schema(src)).alias("s"), "t.k = s.k") \
            .whenMatchedUpdateAll().whenNotMatchedInsertAll()
        return (b.withSchemaEvolution() if evolve else b).execute()

    def got():
        return sorted((r.asDict(recursive=True) for r in dt.toDF().collect()), key=lambda r: r["k"])

    assert tuple(merge(ARR_SOURCE).collect()[0]) == (3, 1, 0, 2)
    assert got() == ARR_MERGED
    v = latest_version(path)
    with pytest.raises(AnalysisException, match=r"DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION"):
        merge(ARR_NEW_FIELD)
    with pytest.raises(Exception, match=r"CAST_INVALID_INPUT.*'x1'"):
        merge(ARR_BAD_VALUE)
    assert latest_version(path) == v
    assert got() == ARR_MERGED
    merge(ARR_NEW_FIELD, evolve=True)
    assert got() == ARR_EVOLVED


def _table_by_k(spark, tmp_path, data, name: str = "t"):
    """(path, DeltaTable, rows sorted by k as dicts) of a new table holding `data`."""
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table

    path = str(tmp_path / name)
    write_table(path, data)
    dt = DeltaTable.forPath(spark, path)

    def got():
        return sorted((r.asDict(recursive=True) for r in dt.toDF().collect()), key=lambda r: r["k"])

    return path, dt, got


def test_update_and_merge_assign_nested_fields_on_spark(spark, tmp_path):
    """The Spark executor on the Spark-free test's cases (tests/write/test_dml_rules.py, rows
    derived by hand there): `update(set={"s.a": ...})` and a MERGE setting `t.s.b` rebuild the
    struct with its other fields kept (a NULL struct becomes a struct), Column values too; the
    bad keys fail with delta-spark's errors and commit nothing."""
    from pyspark.sql import functions as F

    from tahoe.errors import AnalysisException
    from tests.write.test_dml_rules import (
        NESTED_BAD, NESTED_EVOLVE_SOURCE, NESTED_EVOLVED, NESTED_MERGE, NESTED_MERGED, NESTED_SOURCE, NESTED_TARGET,
        NESTED_UPDATE, NESTED_UPDATED,
    )

    path, dt, got = _table_by_k(spark, tmp_path, NESTED_TARGET)
    dt.update(NESTED_UPDATE[1], {"s.a": F.col("k") * 10, "s.c.y": F.lit("new")})
    assert got() == NESTED_UPDATED
    src = spark.createDataFrame(NESTED_SOURCE.to_pylist(), _spark_schema(NESTED_SOURCE)).alias("src")
    m = dt.alias("t").merge(src, "t.k = src.k").whenMatchedUpdate(set=NESTED_MERGE[0]) \
        .whenNotMatchedInsert(values=NESTED_MERGE[1]).execute()
    assert (m.collect()[0]["num_updated_rows"], m.collect()[0]["num_inserted_rows"]) == (2, 1)
    assert got() == NESTED_MERGED
    v = latest_version(path)
    for bad, error in NESTED_BAD:
        with pytest.raises(AnalysisException, match=error):
            dt.update(set=bad)
    with pytest.raises(Exception, match=r"CAST_INVALID_INPUT.*'abc'"):
        dt.update(set={"s.a": "'abc'"})
    assert latest_version(path) == v
    assert got() == NESTED_MERGED

    path, dt, got = _table_by_k(spark, tmp_path, NESTED_TARGET, "evolve")
    src = spark.createDataFrame(NESTED_EVOLVE_SOURCE.to_pylist(), _spark_schema(NESTED_EVOLVE_SOURCE)).alias("src")
    dt.alias("t").merge(src, "t.k = src.k").whenMatchedUpdate("src.v > 7", {"t.s.a": "src.v"}) \
        .whenMatchedUpdateAll().withSchemaEvolution().execute()
    assert got() == NESTED_EVOLVED


def test_merge_evolves_through_explicit_assignments_on_spark(spark, tmp_path):
    """The Spark executor on the Spark-free test's case (rows derived by hand there): with
    `withSchemaEvolution()`, `set={"t.s": "src.s"}` and an insert of `src.s` carry the source
    struct's new field into the table, `set={"s.d": ...}` names it, `set={"w": ...}` adds the
    source's column w; without evolution the wider struct is refused and nothing is committed."""
    from tahoe.errors import AnalysisException
    from tests.write.test_dml_rules import (
        EXPLICIT_EVOLVED, EXPLICIT_FIELD, EXPLICIT_FIELD_EVOLVED, EXPLICIT_FIELD_SOURCE, EXPLICIT_MERGE,
        EXPLICIT_SOURCE, NESTED_TARGET,
    )

    path, dt, got = _table_by_k(spark, tmp_path, NESTED_TARGET)
    src = spark.createDataFrame(EXPLICIT_SOURCE.to_pylist(), _spark_schema(EXPLICIT_SOURCE)).alias("src")
    v = latest_version(path)
    with pytest.raises(AnalysisException, match="DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION"):
        dt.alias("t").merge(src, "t.k = src.k").whenMatchedUpdate(set=EXPLICIT_MERGE[0]).execute()
    assert latest_version(path) == v
    m = dt.alias("t").merge(src, "t.k = src.k").whenMatchedUpdate(set=EXPLICIT_MERGE[0]) \
        .whenNotMatchedInsert(values=EXPLICIT_MERGE[1]).withSchemaEvolution().execute()
    assert (m.collect()[0]["num_updated_rows"], m.collect()[0]["num_inserted_rows"]) == (1, 1)
    assert dt.toDF().columns == ["k", "s"]
    assert got() == EXPLICIT_EVOLVED
    src = spark.createDataFrame(EXPLICIT_FIELD_SOURCE.to_pylist(), _spark_schema(EXPLICIT_FIELD_SOURCE)).alias("src")
    dt.alias("t").merge(src, "t.k = src.k").whenMatchedUpdate(set=EXPLICIT_FIELD).withSchemaEvolution().execute()
    assert got() == EXPLICIT_FIELD_EVOLVED


def test_booleans_and_numbers_convert_on_spark(spark, tmp_path):
    """The Spark executor on the Spark-free test's cases (rows derived by hand there): booleans
    stored into numbers and numbers into booleans by UPDATE and MERGE (an ANSI CAST)."""
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.write.test_dml_rules import (
        BOOL_MERGE, BOOL_MERGED, BOOL_SOURCE, BOOL_TARGET, BOOL_UPDATE, BOOL_UPDATED,
    )

    path = str(tmp_path / "t")
    write_table(path, BOOL_TARGET)
    dt = DeltaTable.forPath(spark, path)

    def got():
        return sorted((r.asDict(recursive=True) for r in dt.toDF().collect()), key=lambda r: r["k"])

    dt.update(set=BOOL_UPDATE)
    assert got() == BOOL_UPDATED
    src = spark.createDataFrame(BOOL_SOURCE.to_pylist(), _spark_schema(BOOL_SOURCE)).alias("s")
    dt.alias("t").merge(src, "t.k = s.k").whenMatchedUpdate(set=BOOL_MERGE[0]) \
        .whenNotMatchedInsert(values=BOOL_MERGE[1]).execute()
    assert got() == BOOL_MERGED


def _spark_schema(t: pa.Table):
    from tahoe.protocol.schema import from_arrow_schema
    from tahoe.spark.types import to_spark_schema

    return to_spark_schema(from_arrow_schema(t.schema))


@pytest.mark.parametrize("broadcast", [True, False])
def test_merge_source_counts_and_duplicates(spark, tmp_path, broadcast):
    """numSourceRows, inserted and updated counts of MERGEs whose source is read in different
    ways — upsert (one write job for the updated and inserted rows), insert-only, matched-only —
    and the multiple-match error for a target row two source rows in different partitions
    match, with the source broadcast or not (autoBroadcastJoinThreshold -1). Oracle: counts and
    rows derived by hand from the 40-row table of `_partitioned_table`."""
    from tahoe.errors import DeltaUnsupportedOperationException
    from tahoe.spark import DeltaTable

    old = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "10485760" if broadcast else "-1")
    try:
        path = str(tmp_path / "t")
        _partitioned_table(spark, path, True)
        dt = DeltaTable.forPath(spark, path)
        schema = "id long, p string, v long"

        def metrics():
            return {k: int(v) for k, v in commit_infos(path)[-1]["operationMetrics"].items()
                    if k in ("numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated")}

        # upsert: ids 1, 12 (matched) and 60, 61, 62 (new), over three source partitions
        src = spark.createDataFrame([(1, "a", 100), (12, "b", 112), (60, "z", 60), (61, "z", 61), (62, "z", 62)],
                                    schema).repartition(3)
        r = dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        assert tuple(r.collect()[0]) == (5, 2, 0, 3)
        assert metrics() == {"numSourceRows": 5, "numTargetRowsInserted": 3, "numTargetRowsUpdated": 2}
        want = {i: ("abcd"[i // 10], i) for i in range(40)}
        want.update({1: ("a", 100), 12: ("b", 112), 60: ("z", 60), 61: ("z", 61), 62: ("z", 62)})
        assert sorted((x.id, x.p, x.v) for x in dt.toDF().collect()) == sorted((k, *v) for k, v in want.items())

        # insert-only: 3 source rows, 1 already there
        src = spark.createDataFrame([(2, "a", 0), (70, "y", 7), (71, "y", 8)], schema).repartition(2)
        r = dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
        assert tuple(r.collect()[0]) == (2, 0, 0, 2)
        assert metrics() == {"numSourceRows": 3, "numTargetRowsInserted": 2, "numTargetRowsUpdated": 0}

        # matched-only: 4 source rows, 2 match
        src = spark.createDataFrame([(3, "a", 33), (30, "d", 330), (80, "x", 0), (81, "x", 0)], schema).repartition(2)
        r = dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"}).execute()
        assert tuple(r.collect()[0]) == (2, 2, 0, 0)
        assert metrics() == {"numSourceRows": 4, "numTargetRowsInserted": 0, "numTargetRowsUpdated": 2}

        # a target row matched by two source rows of different partitions: the error, nothing committed
        v = latest_version(path)
        dup = spark.createDataFrame([(5, "a", 1), (6, "a", 2), (5, "a", 3), (90, "q", 4)], schema).repartition(4)
        with pytest.raises(DeltaUnsupportedOperationException,
                           match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
            dt.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        assert latest_version(path) == v
        # one row matched once each by two clauses' rows is no duplicate
        ok = spark.createDataFrame([(5, "a", 1), (6, "a", 2)], schema).repartition(2)
        r = dt.alias("t").merge(ok.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
        assert tuple(r.collect()[0]) == (2, 2, 0, 0)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", old)


@pytest.mark.parametrize("route", ["collected", "summarized"])
def test_delete_without_change_data_on_spark(spark, tmp_path, monkeypatch, route):
    """DELETE with the change data feed off (its positions collected straight to the driver, or
    — past `_COLLECT_MAX_FILES` candidate files — summarized as bitmaps in the scan's tasks), on
    DV and copy-on-write tables, partitioned and flat: NULLs in the condition, a second DELETE
    growing existing deletion vectors, one removing every row of some files. Oracles: the rows
    derived by hand, and delta-rs reading what Spark wrote (deletion vectors included)."""
    import tahoe.spark.dml as dml
    from tahoe.spark import DeltaTable, read_delta

    if route == "summarized":
        monkeypatch.setattr(dml, "_COLLECT_MAX_FILES", 0)
    deletes = ["v > 7", "id % 4 = 1 OR day = 'wed' AND id < 12", "id >= 30"]
    want = sorted_rows(base_rows(), COLS)
    for cond_py in (lambda r: r[2] is not None and r[2] > 7,
                    lambda r: r[0] % 4 == 1 or (r[1] == "wed" and r[0] < 12),
                    lambda r: r[0] >= 30):
        want = [r for r in want if not cond_py(r)]
    paths = []
    for partitioned in (True, False):
        for props in ({"delta.enableDeletionVectors": "true"}, {}):
            path = str(tmp_path / f"t{len(paths)}")
            write_table_plain(path, partitioned, props)
            dt = DeltaTable.forPath(spark, path)
            for d in deletes:
                assert dt.delete(d) is None
            assert sorted_rows(read_delta(spark, path).toArrow(), COLS) == want, (partitioned, props)
            a = log_actions(path, 1)
            if props:   # DV mode: the first DELETE adds deletion vectors to the same files, no data file
                assert "cdc" not in a and all(x.get("deletionVector") for x in a["add"])
            m = commit_infos(path)[1]["operationMetrics"]
            assert int(m["numDeletedRows"]) == sum(1 for r in base_rows().to_pylist() if (r["v"] or 0) > 7)
            paths.append(path)
    for path, r in zip(paths, run_deltars([{"path": p, "ops": []} for p in paths], tmp_path / "rs")):
        assert r["error"] is None and sorted_rows(r["rows"], COLS) == want, path


def write_table_plain(path: str, partitioned: bool, props: dict) -> None:
    """`make_table`'s rows and files, without the change data feed."""
    from tahoe.write.writer import write_table

    write_table(path, base_rows(), partition_by=["day"] if partitioned else None, target_file_rows=5,
                properties=props)
