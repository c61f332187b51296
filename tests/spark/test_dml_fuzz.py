"""The differential DML fuzzer (tests/fixtures/dml_fuzz.py; the long run: `python -m bench.fuzz_dml`)
on a few fixed seeds, and the cases it found, kept as named tests. Oracles: plain Spark SQL over
the same rows (the fuzzer), delta-spark's documented / implemented rules (the named cases)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.fixtures.delta_log import latest_version

# a spread of shapes (found by `make_round`): DELETE / UPDATE / MERGE, tahoe- and delta-rs-written,
# partitioned, deletion vectors, three time zones, a multiple-match failure, -0.0 in a dictionary,
# a table whose partitions are scanned one by one with deletion vectors in some
FUZZ_SEEDS = [3, 7, 12, 129, 2171, 2252]
# the second generator's rounds (`make_round(S)`): change rows checked (readChangeFeed, table_changes_by_path,
# delta-rs's load_cdf), SQL text (MERGE INTO / UPDATE), boolean / binary / timestamp_ntz / struct columns,
# a string join key, a DELETE over 106 files, copy-on-write file counts, NaN rows (seed 177)
EXTENDED_SEEDS = [2, 42, 122, 152, 177, 21058, 21164]   # (21058, 21164: plain upserts, inserts written by the driver)
# the third generator's rounds (`make_round(S)`, table shapes): column mapping name / id with a column
# named `odd col-1`, arrays / maps with NULL elements, a nested struct SET by field, ALTER (RENAME / DROP
# COLUMN) before the op, MERGE schema evolution (withSchemaEvolution / SQL / the autoMerge conf). Seeds
# that found tahoe bugs: 30002 (delta-rs's column mapping without the feature), 30061 (evolution by the
# autoMerge conf through the API, no row changed); 30026 (DROP in id mode, then a MERGE evolving the
# schema), 30038 (nested SET after a DROP, id mode), 30047 (RENAME + DROP in id mode, a MERGE).
# (30016, 30040, 30041, 30096, 30140: their named tests; chosen for the suite's time, ~15 s.)
SHAPE_SEEDS = [30002, 30026, 30038, 30047, 30061]


def test_dml_fuzz_fixed_seeds(spark, tmp_path):
    """Each seed's round: tahoe's rows, delta-rs's rows, metrics and failures = the oracle's."""
    from tests.fixtures import dml_fuzz

    bad = [(r.seed, o.mismatches, r.describe()[:2000])
           for r, o in dml_fuzz.run_batch(spark, FUZZ_SEEDS, tmp_path, extras=False) if o.mismatches]
    assert not bad, bad


def test_dml_fuzz_extended_seeds(spark, tmp_path):
    """The same for rounds with the change data feed, SQL text, more types, string keys, >64 files,
    and plain upserts (a source of the target's types: their inserts collected with the broadcast
    source and written by the driver — seeds 21058, 21164)."""
    from tests.fixtures import dml_fuzz

    out = dml_fuzz.run_batch(spark, EXTENDED_SEEDS, tmp_path, shapes=False)
    bad = [(r.seed, o.mismatches, r.describe()[:2000]) for r, o in out if o.mismatches]
    assert not bad, bad
    checked = {c for _, o in out for c in o.checked}
    assert checked == {"cdf", "sql", "files"}, checked


def test_dml_fuzz_shape_seeds(spark, tmp_path):
    """The same for the third generator's table shapes (SHAPE_SEEDS): rows read by tahoe and by
    delta-rs, metrics, change rows, against plain Spark SQL and delta-spark's documented rules
    (schema evolution: new column last, new struct field last, NULL for rows not written)."""
    from tests.fixtures import dml_fuzz

    out = dml_fuzz.run_batch(spark, SHAPE_SEEDS, tmp_path, modes=False)
    bad = [(r.seed, o.mismatches, r.describe()[:2000]) for r, o in out if o.mismatches]
    assert not bad, bad
    rounds = [r for r, _ in out]
    assert {"name", "id"} <= {r.cm for r in rounds} and any(r.alter for r in rounds)
    assert any(r.evo for r in rounds)
    assert any("ns" in r.shape for r in rounds) and any("arr" in r.shape for r in rounds)


def _table(path: str) -> None:
    from tahoe.write.writer import write_table

    write_table(path, pa.table({"id": pa.array([1, 2, 3, None], pa.int64()), "v": pa.array([10, 20, 30, 40], pa.int64())}),
                target_file_rows=1)


@pytest.mark.parametrize("condition", ["t.id = s.id", "t.id <=> s.id"])
def test_merge_not_matched_by_source_only_refuses_multiple_matches(spark, tmp_path, condition):
    """Fuzzer seeds 129 and 224: a MERGE with only WHEN NOT MATCHED BY SOURCE clauses whose target
    row is matched by two source rows. delta-spark (ClassicMergeExecutor.findTouchedFiles) counts
    every target row's matches by the ON condition alone — a right outer join when there are
    NOT MATCHED BY SOURCE clauses — and fails ([DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE])
    whenever some row has two, unless the matched clauses are exactly one unconditional delete
    (none here). tahoe's Spark executor checked only MERGEs with matched clauses, and committed."""
    from tahoe.errors import DeltaUnsupportedOperationException
    from tahoe.spark import DeltaTable

    path = str(tmp_path / "t")
    _table(path)
    key = 1 if condition == "t.id = s.id" else None
    src = spark.createDataFrame([(key, 0), (key, 1), (7, 2)], "id long, v long")
    v = latest_version(path)
    dt = DeltaTable.forPath(spark, path)
    with pytest.raises(DeltaUnsupportedOperationException, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
        dt.alias("t").merge(src.alias("s"), condition).whenNotMatchedBySourceDelete("t.v > 15").execute()
    with pytest.raises(DeltaUnsupportedOperationException, match="DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"):
        (dt.alias("t").merge(src.alias("s"), condition).whenNotMatchedInsertAll()
         .whenNotMatchedBySourceUpdate(set={"v": "t.v + 1"}).execute())
    assert latest_version(path) == v
    # an insert-only MERGE never checks (delta-spark's insert-only path): the unmatched key 7 goes in once
    r = dt.alias("t").merge(src.alias("s"), condition).whenNotMatchedInsertAll("s.id = 7").execute()
    assert tuple(r.collect()[0]) == (1, 0, 0, 1)
    assert sorted((x.id or 0, x.v) for x in dt.toDF().collect()) == [(0, 40), (1, 10), (2, 20), (3, 30), (7, 2)]


def test_negative_zero_matches_zero_in_delta_rs_files(spark, tmp_path):
    """Fuzzer seed 2171: `DELETE WHERE x IN (CAST(1.5 AS DECIMAL(14,2)), 0.0, ...)` left a row whose
    x is -0.0 in a table delta-rs wrote. Spark SQL holds -0.0 = 0.0 (plain Spark over the same
    rows in memory deletes it); parquet-java's dictionary row-group filter compares the bits and
    dropped the file's only row group from the DML's scan — and from reads with the same filter.
    Oracle: Spark over the rows in memory (no parquet), and delta-rs reading what tahoe wrote
    (deletion vectors: the DELETE and MERGE tables; copy-on-write: the UPDATE one)."""
    from tahoe.spark import DeltaTable, read_delta
    from tests.fixtures.deltars import run_deltars, sorted_rows, source_file

    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "x": pa.array([-0.0, 3.0, 0.5])})
    paths = [str(tmp_path / f"t{i}") for i in range(3)]
    src = source_file(rows, tmp_path / "src", "rows")
    written = run_deltars([{"path": p, "ops": [{"op": "write", "source": src, "configuration": {
        "delta.enableDeletionVectors": str(dv).lower()}}], "read": False} for p, dv in zip(paths, [True, False, True])],
        tmp_path / "rs")
    assert all(w["error"] is None for w in written)
    mem = spark.createDataFrame(rows)
    assert [r.id for r in mem.filter("x = 0.0").collect()] == [1]           # Spark's own semantics
    assert sorted(r.id for r in read_delta(spark, paths[0]).filter("x = 0.0").collect()) == [1]
    assert sorted(r.id for r in spark.read.format("delta").load(paths[0]).filter("x IN (0.0, 7.0)").collect()) == [1]
    DeltaTable.forPath(spark, paths[0]).delete("x IN (CAST(1.5 AS DECIMAL(14,2)), 0.0)")
    DeltaTable.forPath(spark, paths[1]).update("x = 0.0D", {"x": "42.0"})
    src_df = spark.createDataFrame([(0.0, "hit")], "k double, s string")
    (DeltaTable.forPath(spark, paths[2]).alias("t").merge(src_df.alias("s"), "t.x = s.k")
     .whenMatchedDelete().execute())
    want = {paths[0]: [(2, 3.0), (3, 0.5)], paths[1]: [(1, 42.0), (2, 3.0), (3, 0.5)], paths[2]: [(2, 3.0), (3, 0.5)]}
    for p in paths:
        assert sorted((r.id, r.x) for r in DeltaTable.forPath(spark, p).toDF().collect()) == want[p], p
    for p, r in zip(paths, run_deltars([{"path": p, "ops": []} for p in paths], tmp_path / "rs-read")):
        assert r["error"] is None and sorted_rows(r["rows"], ["id", "x"]) == want[p], p


@pytest.mark.parametrize("writer", ["delta-rs", "tahoe"])
def test_nan_rows_match_what_spark_sql_says_in_reads_and_dml(spark, tmp_path, writer):
    """Fuzzer seeds 9116 (UPDATE `x >= id` on a delta-rs table) and 9132 (DELETE `x BETWEEN NaN AND
    NaN AND ...` on a tahoe table): rows whose x is NaN were left out. Spark SQL orders NaN above
    every value and holds NaN = NaN, so `x > 1`, `x >= id`, `x != 0.1`, `x = NaN` are true for them;
    parquet-java's row-group min/max filter drops row groups whose min/max (written without NaN by
    parquet-java, Arrow and parquet-rs alike) exclude the literal — plain `spark.read.parquet`
    misses them too. Oracle: Spark over the same rows in memory (no parquet), and delta-rs reading
    what the DML wrote. `x > 1000`: delta-rs's log stats leave NaN out too (max 2.5), so the file
    skipping may not take a double's max as a bound either (`test_nan_hides_behind_a_finite_max`).
    Also read by tahoe's Spark-free reader."""
    from tahoe import Table
    from tahoe.spark import DeltaTable
    from tests.fixtures.deltars import run_deltars, sorted_rows, source_file

    rows = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "x": pa.array([0.1, float("nan"), 2.5, float("nan")])})
    preds = ["x > 1", "x > 1000", "x >= id", "x != 0.1", "x = CAST('NaN' AS DOUBLE)", "NOT (x <= 1)",
             "x BETWEEN CAST('NaN' AS DOUBLE) AND CAST('NaN' AS DOUBLE)", "x IN (CAST('NaN' AS DOUBLE), 7.0)"]
    paths = {op: str(tmp_path / f"t-{op}") for op in ("read", "delete", "update")}
    if writer == "delta-rs":
        src = source_file(rows, tmp_path / "src", "rows")
        written = run_deltars([{"path": p, "ops": [{"op": "write", "source": src, "configuration": {
            "delta.enableDeletionVectors": "true"}}], "read": False} for p in paths.values()], tmp_path / "rs")
        assert all(w["error"] is None for w in written)
    else:
        for p in paths.values():
            spark.createDataFrame(rows).coalesce(1).write.format("delta") \
                .option("delta.enableDeletionVectors", "true").save(p)
    mem = spark.createDataFrame(rows)

    def ids(df, pred):
        return sorted(r.id for r in df.filter(pred).collect())
    for pred in preds:
        want = ids(mem, pred)
        assert 2 in want and 4 in want, pred                             # Spark's own semantics
        assert ids(spark.read.format("delta").load(paths["read"]), pred) == want, pred
        assert sorted(Table(paths["read"]).to_arrow(filter=pred).column("id").to_pylist()) == want, pred
    DeltaTable.forPath(spark, paths["delete"]).delete("x BETWEEN CAST('NaN' AS DOUBLE) AND CAST('NaN' AS DOUBLE)")
    DeltaTable.forPath(spark, paths["update"]).update("x >= id", {"id": "-id"})
    want = {paths["delete"]: [(1, 0.1), (3, 2.5)], paths["update"]: [(-4, "nan"), (-2, "nan"), (1, 0.1), (3, 2.5)]}

    def norm(rs):
        return sorted((i, "nan" if isinstance(x, float) and x != x else x) for i, x in rs)
    for p in (paths["delete"], paths["update"]):
        assert norm((r.id, r.x) for r in DeltaTable.forPath(spark, p).toDF().collect()) == want[p], p
    for p, r in zip([paths["delete"], paths["update"]],
                    run_deltars([{"path": p, "ops": []} for p in (paths["delete"], paths["update"])], tmp_path / "rs2")):
        assert r["error"] is None and norm(sorted_rows(r["rows"], ["id", "x"])) == want[p], p


def test_reads_partitions_some_with_deletion_vectors_of_a_delta_rs_table(spark, tmp_path):
    """Fuzzer seeds 2239 and 2252: after a DML added deletion vectors to the files of some
    partitions of a table delta-rs wrote (its directories `p=a%20b`: not Spark's layout, so
    tahoe scans partition by partition and unions the scans), every read failed with
    [NUM_COLUMNS_MISMATCH] — the scans of files with deletion vectors carried one more column
    than the others. Oracle: the rows derived by hand, and delta-rs reading the same table."""
    from tahoe.spark import DeltaTable, read_delta
    from tests.fixtures.deltars import run_deltars, sorted_rows, source_file

    # files of distinct sizes (the deletion vectors are then applied on the scan, keyed by size)
    rows = pa.table({"id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()), "s": ["x", "y", "z", "w" * 30, "v" * 60, "u"],
                     "p": ["a b", "a b", "a b", "c", "d", "d"]})
    path = str(tmp_path / "t")
    src = source_file(rows, tmp_path / "src", "rows")
    (w,) = run_deltars([{"path": path, "read": False, "ops": [{"op": "write", "source": src, "partition_by": ["p"],
                                                               "configuration": {"delta.enableDeletionVectors": "true"}}]}],
                       tmp_path / "rs")
    assert w["error"] is None
    DeltaTable.forPath(spark, path).delete("id = 1")     # a deletion vector in partition 'a b' only
    want = [(2, "a b"), (3, "a b"), (4, "c"), (5, "d"), (6, "d")]
    assert sorted((r.id, r.p) for r in DeltaTable.forPath(spark, path).toDF().collect()) == want
    assert sorted((r.id, r.p) for r in read_delta(spark, path).filter("id > 0").collect()) == want
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None and sorted_rows(r["rows"], ["id", "p"]) == want


def test_nan_rows_kept_by_parquet_row_group_statistics(spark, tmp_path):
    """Fuzzer seed 177: `DELETE WHERE x > 1.5D` left the rows whose x is NaN in files tahoe wrote.
    Spark SQL orders NaN above every number (plain Spark over the rows in memory deletes them);
    parquet's min/max statistics leave NaN out (pyarrow wrote max 0.0), so parquet-java's
    row-group filter — Spark's and delta-spark's — dropped the file from the scan: reads with the
    filter and DELETE / UPDATE missed the rows. Oracle: Spark over the rows in memory, and Spark's
    own parquet reader (filter pushdown on) over the files tahoe wrote."""
    import glob

    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table

    rows = pa.table({"id": pa.array([0, 1, 2, 3], pa.int64()), "x": [float("nan"), 0.0, None, -2.5],
                     "st": pa.array([{"f": float("nan")}, {"f": 0.5}, None, {"f": 1.0}])})
    mem = spark.createDataFrame(rows)
    assert sorted(r.id for r in mem.filter("x > 1.5D").collect()) == [0]          # Spark's own semantics
    assert sorted(r.id for r in mem.filter("st.f > 1.5").collect()) == [0]
    paths = [str(tmp_path / f"t{i}") for i in range(3)]
    for p in paths:
        write_table(p, rows, target_file_rows=4)
    files = glob.glob(paths[0] + "/*.parquet")
    assert sorted(r.id for r in spark.read.parquet(*files).filter("x > 1.5D").collect()) == [0]
    assert sorted(r.id for r in spark.read.parquet(*files).filter("st.f >= 2.0").collect()) == [0]
    assert sorted(r.id for r in spark.read.format("delta").load(paths[0]).filter("x = CAST('NaN' AS DOUBLE)")
                  .collect()) == [0]
    DeltaTable.forPath(spark, paths[0]).delete("x > 1.5D")
    DeltaTable.forPath(spark, paths[1]).update("x > 100", {"id": "id + 10"})
    DeltaTable.forPath(spark, paths[2]).delete("st.f > 1.5")
    want = {paths[0]: [1, 2, 3], paths[1]: [1, 2, 3, 10], paths[2]: [1, 2, 3]}
    for p in paths:
        assert sorted(r.id for r in DeltaTable.forPath(spark, p).toDF().collect()) == want[p], p


def test_column_mapping_property_without_the_feature_is_ignored(spark, tmp_path):
    """Fuzzer seed 30002: delta-rs 1.6 creates a table with deletion vectors and
    `delta.columnMapping.mode` = name as a 3/7 protocol WITHOUT the columnMapping feature (its
    schema carries physical names, its files the logical ones). The spec (PROTOCOL.md "Column
    Mapping") says the property is then ignored — delta-kernel-rs's `column_mapping_mode` and
    delta-rs's reads do so; tahoe read the files by the physical names: every value NULL, and the
    DML matched nothing. Oracle: the rows written, delta-rs reading the table after tahoe's DML
    and append."""
    from tahoe import Table
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.fixtures.delta_log import log_actions
    from tests.fixtures.deltars import run_deltars, sorted_rows, source_file

    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "odd col-1": pa.array([5, None, 7], pa.int32())})
    path = str(tmp_path / "t")
    src = source_file(rows, tmp_path / "src", "rows")
    (w,) = run_deltars([{"path": path, "read": False, "ops": [{"op": "write", "source": src, "configuration": {
        "delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}}]}], tmp_path / "rs")
    assert w["error"] is None
    proto = log_actions(path, 0)["protocol"][0]
    assert "columnMapping" not in proto.get("readerFeatures", []) and proto["minReaderVersion"] == 3   # (the shape)
    want = [(1, 5), (2, None), (3, 7)]
    assert sorted_rows(Table(path).to_arrow(), ["id", "odd col-1"]) == want
    dt = DeltaTable.forPath(spark, path)
    assert sorted(tuple(r) for r in dt.toDF().collect()) == [(1, 5), (2, None), (3, 7)]
    dt.delete("id = 1")
    dt.update("id = 2", {"`odd col-1`": "42"})
    write_table(path, pa.table({"id": pa.array([4], pa.int64()), "odd col-1": pa.array([8], pa.int32())}))
    want = [(2, 42), (3, 7), (4, 8)]
    assert sorted(tuple(r) for r in dt.toDF().collect()) == want
    # seed 30040: a MERGE with schema evolution (a metadata change) added the columnMapping feature
    # on the way: the files (logical names) unreadable, its own adds refused (partition values
    # named by physical names expected)
    src = spark.createDataFrame([(3, 70, 1), (5, 9, 2)], "id long, `odd col-1` int, ev long")
    (dt.alias("t").merge(src.alias("s"), "t.id = s.id").withSchemaEvolution()
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    assert "columnMapping" not in log_actions(path, latest_version(path)).get("protocol", [{}])[0].get(
        "readerFeatures", [])
    want = [(2, 42, None), (3, 70, 1), (4, 8, None), (5, 9, 2)]
    assert sorted(tuple(r) for r in dt.toDF().collect()) == want
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None and sorted_rows(r["rows"], ["id", "odd col-1", "ev"]) == want


@pytest.mark.parametrize("writer", ["tahoe", "delta-rs"])
def test_rename_and_drop_under_column_mapping_id_then_dml(spark, tmp_path, writer):
    """Fuzzer rounds with ALTER before the DML on `delta.columnMapping.mode` = id tables: tahoe
    refused RENAME COLUMN / DROP COLUMN unless the mode was 'name'; delta-spark refuses them only
    without column mapping (AlterTableChangeColumnDeltaCommand / AlterTableDropColumnsDeltaCommand:
    `columnMappingMode == NoMapping`). In id mode the files are read by field id, so the renamed
    column keeps its values. Oracle: the rows written, and delta-rs reading after the DML."""
    from tahoe import txn
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.fixtures.deltars import run_deltars, sorted_rows, source_file

    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "odd (old)": pa.array([5, None, 7], pa.int32()),
                     "zz": pa.array([0, 1, 2], pa.int32())})
    path = str(tmp_path / "t")
    # (delta-rs: no deletion vectors — with them it leaves the columnMapping feature out, and the
    # mode is not in effect: test_column_mapping_property_without_the_feature_is_ignored)
    props = {"delta.columnMapping.mode": "id", "delta.enableDeletionVectors": str(writer == "tahoe").lower()}
    if writer == "tahoe":
        write_table(path, rows, properties=props, target_file_rows=1)
    else:
        src = source_file(rows, tmp_path / "src", "rows")
        (w,) = run_deltars([{"path": path, "read": False, "ops": [{"op": "write", "source": src,
                                                                   "configuration": props}]}], tmp_path / "rs")
        assert w["error"] is None
    txn.rename_column(path, "odd (old)", "odd col-1")
    txn.drop_column(path, "zz")
    dt = DeltaTable.forPath(spark, path)
    assert dt.toDF().columns == ["id", "odd col-1"]
    dt.update("`odd col-1` IS NULL", {"`odd col-1`": "id * 10"})
    dt.delete("`odd col-1` = 7")
    want = [(1, 5), (2, 20)]
    assert sorted(tuple(r) for r in dt.toDF().collect()) == want
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None and sorted_rows(r["rows"], ["id", "odd col-1"]) == want


def test_merge_api_honours_the_auto_merge_conf(spark, tmp_path):
    """Fuzzer seeds 30016, 30024, 30041: a MERGE through the Python API (`DeltaTable.merge`) with
    `spark.databricks.delta.schema.autoMerge.enabled` = true and UPDATE SET * / INSERT * from a
    source with a new column `ev` and a new nested field `ns.y` failed ("Cannot cast ...") or left
    the schema as it was: only `withSchemaEvolution()` and SQL honoured the conf. delta-spark's
    documentation (Merge: automatic schema evolution) enables it for the API by the conf alike:
    `ev` added at the end, `y` at the end of `ns`, NULL for the rows the MERGE did not write."""
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.fixtures.deltars import run_deltars

    ns = pa.struct([("a", pa.int64())])
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "ns": pa.array([{"a": 1}, {"a": 2}], ns)}))
    src = spark.createDataFrame([(2, (20, "y2"), 7), (3, (30, None), 8)],
                                "id long, ns struct<a: bigint, y: string>, ev long")
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    df = DeltaTable.forPath(spark, path).toDF()
    assert df.columns == ["id", "ns", "ev"] and df.schema["ns"].dataType.names == ["a", "y"]
    want = [(1, (1, None), None), (2, (20, "y2"), 7), (3, (30, None), 8)]
    assert sorted((r.id, tuple(r.ns), r.ev) for r in df.collect()) == want
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None
    assert sorted((x["id"], (x["ns"]["a"], x["ns"]["y"]), x["ev"]) for x in r["rows"].to_pylist()) == want


@pytest.mark.parametrize("how", ["api", "sql"])
def test_merge_schema_evolution_commits_the_schema_when_no_row_changes(spark, tmp_path, how):
    """Fuzzer seed 30061: a MERGE with schema evolution (UPDATE SET * from a source with a new
    column `ev`) whose source matches no target row committed nothing, so the table kept its
    schema. delta-spark adds the column anyway: the evolved metadata is one of the commit's
    actions (OptimisticTransaction.commitImpl skips only a commit with no actions). Oracle: that
    rule, the rows by hand, delta-rs reading the table."""
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.fixtures import dml_fuzz
    from tests.fixtures.deltars import run_deltars

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([10, 20], pa.int64())}))
    v0 = latest_version(path)
    src = spark.createDataFrame([(7, 70, 1)], "id long, v long, ev long")
    if how == "api":
        r = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id").withSchemaEvolution()
             .whenMatchedUpdateAll().execute())
        assert tuple(r.collect()[0]) == (0, 0, 0, 0)
    else:
        ss = dml_fuzz.sql_session(spark)
        ss.createDataFrame(src.collect(), src.schema).createOrReplaceTempView("evo_src")
        ss.sql(f"MERGE WITH SCHEMA EVOLUTION INTO delta.`{path}` t USING evo_src s "
                                        f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET *").collect()
    assert latest_version(path) == v0 + 1
    df = DeltaTable.forPath(spark, path).toDF()
    assert df.columns == ["id", "v", "ev"]
    assert sorted(tuple(x) for x in df.collect()) == [(1, 10, None), (2, 20, None)]
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None and r["rows"].column_names == ["id", "v", "ev"]


def test_lambdas_over_arrays_of_null_elements_in_files_tahoe_wrote(spark, tmp_path):
    """Fuzzer seeds 30096, 30112: `UPDATE ... SET arr = filter(arr, x -> x IS NOT NULL)` failed
    (ArrayIndexOutOfBoundsException in parquet-java's PlainIntegerDictionary.decodeToInt) on files
    whose `arr` held only NULL elements: pyarrow writes such a leaf chunk with an empty dictionary
    page, and Spark's vectorized reader decodes the NULL element through it in a lambda (filter,
    transform, exists, array_compact). Plain Spark SQL over the same rows in memory answers;
    parquet-java (delta-spark's writer) writes no dictionary there. tahoe now writes such leaves
    without a dictionary. Oracle: Spark over the rows in memory, delta-rs reading the result."""
    import glob

    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.fixtures.deltars import run_deltars

    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                     "arr": pa.array([[None], [None, None], []], pa.list_(pa.int32())),
                     "m": pa.array([[("a", None)], [], None], pa.map_(pa.string(), pa.int32())),
                     "ns": pa.array([{"l": [None]}, {"l": None}, None], pa.struct([("l", pa.list_(pa.int64()))]))})
    exprs = ["filter(arr, x -> x IS NOT NULL)", "transform(arr, x -> x + 1)", "exists(arr, x -> x IS NULL)",
             "map_filter(m, (k, v) -> v IS NOT NULL)", "transform(ns.l, x -> x * 2)"]
    mem = spark.createDataFrame(rows)
    want = {e: sorted(map(repr, (r[0] for r in mem.selectExpr(e).collect()))) for e in exprs}   # Spark's own answer
    path = str(tmp_path / "t")
    write_table(path, rows, target_file_rows=1)
    files = glob.glob(path + "/*.parquet")
    for e in exprs:
        assert sorted(map(repr, (r[0] for r in spark.read.parquet(*files).selectExpr(e).collect()))) == want[e], e
    DeltaTable.forPath(spark, path).update("id < 3", {"arr": "filter(arr, x -> x IS NOT NULL)"})
    got = sorted((r.id, r.arr) for r in DeltaTable.forPath(spark, path).toDF().collect())
    assert got == [(1, []), (2, []), (3, [])]
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None and sorted((x["id"], x["arr"]) for x in r["rows"].to_pylist()) == got


def test_merge_nested_field_set_beside_struct_evolution(spark, tmp_path):
    """Fuzzer seed 30140: a MERGE with schema evolution where the source's struct `ns` has a new
    field `y` (INSERT * carries it), a matched UPDATE leaves `ns` alone and a NOT MATCHED BY SOURCE
    clause sets a nested field (`t.ns.q = ...`): tahoe built that clause's struct with an untyped
    NULL for `y`, and Spark refused the CASE over the clauses ([DATATYPE_MISMATCH.DATA_DIFF_TYPES]). delta-spark: `y`
    added at the end of `ns`, NULL where the clause did not write it, and the nested SET rebuilds
    the struct field by field (a NULL `ns` becomes a struct). Oracle: those rules, the rows by hand,
    delta-rs reading the table."""
    from tahoe.spark import DeltaTable
    from tahoe.write.writer import write_table
    from tests.fixtures.deltars import run_deltars

    ns = pa.struct([("a", pa.int64()), ("q", pa.struct([("c", pa.string())]))])
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                                "ns": pa.array([{"a": 1, "q": {"c": "x"}}, {"a": 2, "q": None}, None], ns)}))
    src = spark.createDataFrame([(1, (10, ("s",), "y1")), (4, (40, None, None))],
                                "id long, ns struct<a: bigint, q: struct<c: string>, y: string>")
    (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id").withSchemaEvolution()
     .whenMatchedUpdate(set={"id": "s.id + 10"}).whenNotMatchedInsertAll()
     .whenNotMatchedBySourceUpdate(set={"t.ns.q": "named_struct('c', 'nm')"}).execute())
    df = DeltaTable.forPath(spark, path).toDF()
    assert df.schema["ns"].dataType.names == ["a", "q", "y"]

    def tup(v):
        return None if v is None else (v["a"], None if v["q"] is None else v["q"]["c"], v["y"])
    want = [(2, (2, "nm", None)), (3, (None, "nm", None)), (4, (40, None, None)), (11, (1, "x", None))]
    assert sorted((r.id, tup(r.ns.asDict(True) if r.ns else None)) for r in df.collect()) == want
    (r,) = run_deltars([{"path": path, "ops": []}], tmp_path / "rs-read")
    assert r["error"] is None and sorted((x["id"], tup(x["ns"])) for x in r["rows"].to_pylist()) == want
